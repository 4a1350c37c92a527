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
	if err := landlockApply(s); err != nil {
		return fail(StepLandlock, err)
	}
	if s.NoNetwork {
		if err := installSeccomp(); err != nil {
			return fail(StepSeccomp, err)
		}
	}
	if err := llsys.AllThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(StepNoNewPrv, err)
	}
	if err := setRlimits(s, l.Nproc); err != nil {
		return fail(StepRlimits, err)
	}
	err = syscall.Exec(l.Path, l.Argv, l.Env)
	return fail(StepExec, fmt.Errorf("%s: %w", l.Path, err))
}

// landlockApply restricts the filesystem, the network and IPC scopes.
func landlockApply(s *Spec) error {
	if !s.Filesystem && !s.NoNetwork {
		return nil
	}
	abi, _ := llsys.LandlockGetABIVersion()
	cfg := landlock.V6
	if s.BestEffort {
		cfg = cfg.BestEffort()
	}
	if s.Filesystem {
		rules, err := fsRules(s)
		if err != nil {
			return err
		}
		if err := cfg.RestrictPaths(rules...); err != nil {
			return err
		}
	}
	if s.NoNetwork {
		if !s.BestEffort && abi < 4 {
			return fmt.Errorf("Landlock ABI %d cannot restrict the network (4 is needed): %w", abi, ErrUnavailable)
		}
		if err := cfg.RestrictNet(); err != nil {
			return err
		}
	}
	// Signals and abstract unix sockets stay inside the sandbox.
	return cfg.RestrictScoped()
}

// devices are the device files every command may use.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// fsRules builds the Landlock rules of s: read-only paths (opened entry by
// entry around hidden ones), read-write paths, and the usual devices.
func fsRules(s *Spec) ([]landlock.Rule, error) {
	var rules []landlock.Rule
	hidden := make([]string, 0, len(s.Hidden))
	for _, h := range s.Hidden {
		hidden = append(hidden, filepath.Clean(h))
	}
	var grant func(p string, depth int)
	grant = func(p string, depth int) {
		for _, h := range hidden {
			if h == p {
				return // stays unreadable
			}
		}
		inside := false
		for _, h := range hidden {
			if strings.HasPrefix(h, p+"/") || p == "/" {
				inside = true
			}
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return
		}
		if !inside || !fi.IsDir() || depth > 32 {
			if fi.IsDir() {
				rules = append(rules, landlock.RODirs(p))
			} else if fi.Mode().IsRegular() || fi.Mode()&os.ModeSymlink != 0 {
				rules = append(rules, landlock.ROFiles(p).IgnoreIfMissing())
			} else {
				rules = append(rules, landlock.ROFiles(p).IgnoreIfMissing())
			}
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
	readOnly := s.ReadOnly
	if len(hidden) == 0 {
		for _, p := range readOnly {
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				rules = append(rules, landlock.ROFiles(p))
			} else {
				rules = append(rules, landlock.RODirs(p).IgnoreIfMissing())
			}
		}
	} else {
		for _, p := range readOnly {
			grant(filepath.Clean(p), 0)
		}
	}
	for _, p := range s.ReadWrite {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			rules = append(rules, landlock.RWFiles(p))
		} else {
			rules = append(rules, landlock.RWDirs(p).IgnoreIfMissing().WithRefer())
		}
	}
	rules = append(rules, landlock.RWFiles(devices...).IgnoreIfMissing().WithIoctlDev())
	return rules, nil
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
