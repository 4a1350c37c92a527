package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// trampolineArg is the hidden first argument of the trampoline mode.
const trampolineArg = "__agentexec_sandbox"

// Descriptors of the trampoline.
const (
	specFD   = 3
	statusFD = 4
)

// launch is what the host sends the trampoline.
type launch struct {
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Spec Spec     `json:"spec"`
	// CgroupProcs is the cgroup.procs file to join, if any.
	CgroupProcs string `json:"cgroup_procs,omitempty"`
	// Nproc asks for RLIMIT_NPROC (no cgroup was available).
	Nproc bool `json:"nproc,omitempty"`
	// Rules are the Landlock path rules, worked out by the host (hidden
	// paths expanded, files told from directories) so that the trampoline
	// does no file system walk.
	Rules []PathRule `json:"rules,omitempty"`
}

// PathRule is one Landlock path rule.
type PathRule struct {
	Path  string `json:"p"`
	Write bool   `json:"w,omitempty"`
	File  bool   `json:"f,omitempty"`
}

// Main runs the trampoline and never returns when this process was started
// as one; otherwise it returns at once. Call it first thing in main (and in
// TestMain) of any program that runs sandboxed commands.
func Main() {
	if len(os.Args) < 2 || os.Args[1] != trampolineArg {
		return
	}
	runtime.LockOSThread()
	status := os.NewFile(statusFD, "status")
	err := trampoline()
	// Only reached when something failed: exec replaces this process.
	if status != nil {
		json.NewEncoder(status).Encode(err)
	}
	os.Exit(126)
}

// trampoline applies the spec and executes the target; it returns only on
// failure.
func trampoline() *SetupError {
	fail := func(step string, err error) *SetupError {
		se := &SetupError{Step: step, Msg: err.Error()}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			se.Errno = int(errno)
		}
		return se
	}
	unix.CloseOnExec(statusFD)
	f := os.NewFile(specFD, "spec")
	if f == nil {
		return fail(StepReadSpec, errors.New("started without its spec descriptor; this mode is internal"))
	}
	var l launch
	err := json.NewDecoder(io.LimitReader(f, 64<<20)).Decode(&l)
	f.Close()
	if err != nil {
		return fail(StepReadSpec, err)
	}
	s := &l.Spec
	if l.CgroupProcs != "" {
		if err := os.WriteFile(l.CgroupProcs, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return fail(StepCgroup, err)
		}
	}
	if err := landlockApply(s, l.Rules); err != nil {
		return fail(StepLandlock, err)
	}
	if s.NoNetwork {
		if err := installSeccomp(); err != nil {
			return fail(StepSeccomp, err)
		}
	}
	// Landlock and seccomp have set no_new_privs on every thread already;
	// the thread that executes the program is this locked one, so setting
	// it here is enough when neither ran.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(StepNoNewPrv, err)
	}
	if err := setRlimits(s, l.Nproc); err != nil {
		return fail(StepRlimits, err)
	}
	err = syscall.Exec(l.Path, l.Argv, l.Env)
	return fail(StepExec, fmt.Errorf("%s: %w", l.Path, err))
}

// landlockApply restricts the filesystem, the network and IPC scopes in
// one ruleset.
func landlockApply(s *Spec, paths []PathRule) error {
	if !s.Filesystem && !s.NoNetwork {
		return nil
	}
	abi, _ := llsys.LandlockGetABIVersion()
	if s.NoNetwork && !s.BestEffort && abi < 4 {
		return fmt.Errorf("Landlock ABI %d cannot restrict the network (4 is needed): %w", abi, ErrUnavailable)
	}
	args := []any{landlock.V6.Scoped}
	if s.Filesystem {
		args = append(args, landlock.V6.HandledAccessFS)
	}
	if s.NoNetwork {
		args = append(args, landlock.V6.HandledAccessNet)
	}
	cfg, err := landlock.NewConfig(args...)
	if err != nil {
		return err
	}
	if s.BestEffort {
		*cfg = cfg.BestEffort()
	}
	var rules []landlock.Rule
	if s.Filesystem {
		for _, r := range paths {
			switch {
			case r.Write && r.File:
				rules = append(rules, landlock.RWFiles(r.Path).IgnoreIfMissing().WithIoctlDev())
			case r.Write:
				rules = append(rules, landlock.RWDirs(r.Path).IgnoreIfMissing().WithRefer())
			case r.File:
				rules = append(rules, landlock.ROFiles(r.Path).IgnoreIfMissing())
			default:
				rules = append(rules, landlock.RODirs(r.Path).IgnoreIfMissing())
			}
		}
	}
	return cfg.Restrict(rules...)
}

// devices are the device files every command may use.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// planRules works out the path rules of s: read-only paths (opened entry
// by entry around hidden ones), read-write paths, and the usual devices.
func planRules(s *Spec) []PathRule {
	var rules []PathRule
	hidden := make([]string, 0, len(s.Hidden))
	for _, h := range s.Hidden {
		hidden = append(hidden, filepath.Clean(h))
	}
	add := func(p string, write bool) {
		fi, err := os.Stat(p)
		if err != nil {
			return
		}
		rules = append(rules, PathRule{Path: p, Write: write, File: !fi.IsDir()})
	}
	var grant func(p string, depth int)
	grant = func(p string, depth int) {
		inside := false
		for _, h := range hidden {
			if h == p {
				return // stays unreadable
			}
			if strings.HasPrefix(h, p+"/") || (p == "/" && h != "/") {
				inside = true
			}
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return
		}
		if !inside || !fi.IsDir() || depth > 32 {
			add(p, false)
			return
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return
		}
		for _, e := range entries {
			grant(filepath.Join(p, e.Name()), depth+1)
		}
	}
	for _, p := range s.ReadOnly {
		grant(filepath.Clean(p), 0)
	}
	for _, p := range s.ReadWrite {
		add(p, true)
	}
	for _, d := range devices {
		if _, err := os.Stat(d); err == nil {
			rules = append(rules, PathRule{Path: d, Write: true, File: true})
		}
	}
	return rules
}

// setRlimits sets the limits last, after everything that allocates.
func setRlimits(s *Spec, nproc bool) error {
	set := func(res int, v uint64, hard uint64) error {
		return unix.Setrlimit(res, &unix.Rlimit{Cur: v, Max: hard})
	}
	if err := set(unix.RLIMIT_CORE, 0, 0); err != nil {
		return fmt.Errorf("RLIMIT_CORE: %w", err)
	}
	if s.CPUSeconds > 0 {
		// SIGXCPU at the limit, SIGKILL a second later.
		if err := set(unix.RLIMIT_CPU, uint64(s.CPUSeconds), uint64(s.CPUSeconds)+1); err != nil {
			return fmt.Errorf("RLIMIT_CPU: %w", err)
		}
	}
	if s.FileSizeBytes > 0 {
		if err := set(unix.RLIMIT_FSIZE, uint64(s.FileSizeBytes), uint64(s.FileSizeBytes)); err != nil {
			return fmt.Errorf("RLIMIT_FSIZE: %w", err)
		}
	}
	if s.OpenFiles > 0 {
		if err := set(unix.RLIMIT_NOFILE, uint64(s.OpenFiles), uint64(s.OpenFiles)); err != nil {
			return fmt.Errorf("RLIMIT_NOFILE: %w", err)
		}
	}
	if nproc && s.Processes > 0 {
		if err := set(unix.RLIMIT_NPROC, uint64(s.Processes), uint64(s.Processes)); err != nil {
			return fmt.Errorf("RLIMIT_NPROC: %w", err)
		}
	}
	if s.MemoryBytes > 0 {
		if err := set(unix.RLIMIT_DATA, uint64(s.MemoryBytes), uint64(s.MemoryBytes)); err != nil {
			return fmt.Errorf("RLIMIT_DATA: %w", err)
		}
	}
	return nil
}
