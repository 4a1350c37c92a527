package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/agentexec/agentexec/runner"
)

// Wrapper returns the runner hook that starts commands under s, or nil
// when s confines nothing. It fails when s asks for a layer this system
// lacks (unless s.BestEffort).
func (s *Spec) Wrapper(o Options) (func(path string, argv, env []string) (*runner.Wrapped, error), error) {
	if !s.Enabled() {
		return nil, nil
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if !s.BestEffort {
		if missing := s.Missing(); len(missing) > 0 {
			return nil, fmt.Errorf("sandbox: %s: %w; use a weaker profile, or set best_effort = true to run without it", strings.Join(missing, "; "), ErrUnavailable)
		}
	}
	exe := o.Executable
	if exe == "" {
		var err error
		if exe, err = trampolineExecutable(); err != nil {
			return nil, fmt.Errorf("sandbox: cannot find this program to run the trampoline: %w", err)
		}
	}
	spec := *s
	var rules []PathRule
	if spec.Filesystem {
		rules = cachedRules(&spec) // walked once per set of paths, not per run
	}
	return func(path string, argv, env []string) (*runner.Wrapped, error) {
		return wrapRules(exe, spec, rules, path, argv, env)
	}, nil
}

// Missing lists the layers s asks for that this system cannot provide.
func (s *Spec) Missing() []string {
	st := Probe()
	var out []string
	if (s.Filesystem || s.NoNetwork) && st.LandlockABI < 6 {
		out = append(out, fmt.Sprintf("Landlock ABI 6 is needed, this kernel has %d", st.LandlockABI))
	}
	if s.NoNetwork && !st.Seccomp {
		out = append(out, "seccomp is not available")
	}
	if s.Processes > 0 && st.PidsCgroup == "" && os.Getuid() == 0 {
		out = append(out, "no writable pids cgroup to cap processes, and RLIMIT_NPROC does not apply to root")
	}
	return out
}

// wrap prepares one run of s (its rules worked out now).
func wrap(exe string, s Spec, path string, argv, env []string) (*runner.Wrapped, error) {
	return wrapRules(exe, s, planRules(&s), path, argv, env)
}

func wrapRules(exe string, s Spec, rules []PathRule, path string, argv, env []string) (*runner.Wrapped, error) {
	var cleanups []func()
	done := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	l := launch{Path: path, Argv: argv, Env: env, Spec: s, Rules: rules}
	l.Spec.ReadOnly, l.Spec.ReadWrite, l.Spec.Hidden = nil, nil, nil // the rules say it all
	if s.PrivateTmp {
		dir, err := os.MkdirTemp("", "agentexec-tmp-")
		if err != nil {
			return nil, fmt.Errorf("sandbox: private tmp: %w", err)
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		l.Rules = append(l.Rules[:len(l.Rules):len(l.Rules)], PathRule{Path: dir, Write: true})
		l.Env = setEnv(l.Env, "TMPDIR", dir)
	}
	if s.Processes > 0 {
		if procs, remove, err := newPidsCgroup(s.Processes); err == nil {
			l.CgroupProcs = procs
			cleanups = append(cleanups, remove)
		} else {
			l.Nproc = true
		}
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		done()
		return nil, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		done()
		return nil, err
	}
	payload, err := json.Marshal(&l)
	if err != nil {
		done()
		return nil, err
	}
	if len(payload) <= 32<<10 {
		// Fits in the pipe's buffer: written before the trampoline starts,
		// so that it reads at once.
		specW.Write(payload)
		specW.Close()
	} else {
		go func() {
			specW.Write(payload)
			specW.Close()
		}()
	}
	var moved string
	if l.CgroupProcs != "" {
		moved = filepath.Dir(l.CgroupProcs)
	}
	return &runner.Wrapped{
		Cgroup: moved, // the trampoline leaves the run's cgroup for it
		Path:   exe,
		Argv:   []string{exe, trampolineArg},
		// One P: the trampoline does one thing, and fewer threads make
		// the all-thread system calls of Landlock and seccomp cheaper.
		Env:   []string{"GOMAXPROCS=1"},
		Files: []*os.File{specR, statusW},
		Started: func(pid int) error {
			defer statusR.Close()
			b, _ := io.ReadAll(io.LimitReader(statusR, 1<<20))
			if len(b) == 0 {
				return nil // the status descriptor closed on exec: the target runs
			}
			var se SetupError
			if json.Unmarshal(b, &se) != nil || se.Step == "" {
				return &SetupError{Step: StepReadSpec, Msg: "the trampoline failed: " + strings.TrimSpace(string(b))}
			}
			return &se
		},
		Done: done,
	}, nil
}

func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// newPidsCgroup creates a cgroup capping processes, and returns its
// cgroup.procs file and how to remove it.
func newPidsCgroup(max int64) (string, func(), error) {
	root := Probe().PidsCgroup
	if root == "" {
		return "", nil, errors.New("no writable pids cgroup")
	}
	var b [6]byte
	rand.Read(b[:])
	dir := filepath.Join(root, "agentexec-"+strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", nil, err
	}
	remove := func() { os.Remove(dir) }
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatInt(max, 10)), 0); err != nil {
		remove()
		return "", nil, err
	}
	return filepath.Join(dir, "cgroup.procs"), remove, nil
}

// HelperName is the small trampoline program agentexec prefers when it is
// installed next to its own binary.
const HelperName = "agentexec-sandbox"

// trampolineExecutable returns agentexec-sandbox next to this program when
// it is there (a small program starts faster), else this program itself.
func trampolineExecutable() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	helper := filepath.Join(filepath.Dir(self), HelperName)
	if fi, err := os.Stat(helper); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return helper, nil
	}
	return self, nil
}

// ruleCache holds the planned rules of each set of paths: tools ask for a
// wrapper on every call, and planning walks the file system.
var ruleCache sync.Map // string -> []PathRule

func cachedRules(s *Spec) []PathRule {
	key := strings.Join(s.ReadOnly, "\x00") + "\x01" + strings.Join(s.ReadWrite, "\x00") + "\x01" + strings.Join(s.Hidden, "\x00")
	if r, ok := ruleCache.Load(key); ok {
		return r.([]PathRule)
	}
	r := planRules(s)
	ruleCache.Store(key, r)
	return r
}
