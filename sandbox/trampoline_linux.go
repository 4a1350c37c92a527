package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// trampolineArg is the hidden first argument of the trampoline mode.
const trampolineArg = "__agentexec_sandbox"

// Descriptors of the trampoline.
const (
	specFD   = 3
	statusFD = 4
	// egressFD is a Unix socket to the host, given to an Allowlist run
	// behind the namespace wall: the trampoline sends the proxy's
	// listener on it (see sendEgressListener).
	egressFD = 5
)

// launch is what the host sends the trampoline.
type launch struct {
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Spec Spec     `json:"spec"`
	// CgroupProcs is the cgroup.procs file to join, if any.
	CgroupProcs []string `json:"cgroup_procs,omitempty"`
	// Nproc asks for RLIMIT_NPROC (no cgroup was available).
	Nproc bool `json:"nproc,omitempty"`
	// MemCgroup says a joined cgroup limits memory (no RLIMIT_DATA).
	MemCgroup bool `json:"mem_cgroup,omitempty"`
	// Rules are the Landlock path rules, worked out by the host (hidden
	// paths expanded, files told from directories) so that the trampoline
	// does no file system walk.
	Rules []PathRule `json:"rules,omitempty"`
	// NS says the trampoline was started in new namespaces and is their
	// init; Mounts build its root.
	NS     bool    `json:"ns,omitempty"`
	Mounts []Mount `json:"mounts,omitempty"`
	// UserNS says a user namespace was made; UID and GID are the user's,
	// mapped to themselves inside.
	UserNS bool `json:"userns,omitempty"`
	UID    int  `json:"uid,omitempty"`
	GID    int  `json:"gid,omitempty"`
	// EgressPort is the port of the egress proxy: inside the network
	// namespace, where the trampoline listens on 127.0.0.1:EgressPort
	// and sends the listener to the host on egressFD (NS); or on the
	// host's loopback (the fallback). Landlock allows TCP connect to it
	// alone. 0: no way out.
	EgressPort int `json:"egress_port,omitempty"`
}

// exitMsg is what the trampoline sends on its status descriptor: once
// the program started (OK), and its exit status when it ended.
type exitMsg struct {
	OK     bool `json:"ok,omitempty"`
	Exited bool `json:"exited,omitempty"`
	Code   int  `json:"code"`
	Signal int  `json:"signal,omitempty"`
}

// access returns the Landlock rights r grants (before masking with what
// the kernel handles).
func (r PathRule) access() uint64 {
	switch {
	case r.Write && r.File:
		return llRWFile
	case r.Write:
		return llRWDir
	case r.File:
		return llROFile
	}
	return llRODir
}

// PathRule is one Landlock path rule.
type PathRule struct {
	Path  string `json:"p"`
	Write bool   `json:"w,omitempty"`
	File  bool   `json:"f,omitempty"`
}

// Main runs the trampoline and never returns when this process was started
// as one. Otherwise it marks this process non-dumpable (so that a process
// of the same user, sandboxed or not, cannot read its /proc/PID/environ,
// maps or memory, nor trace it; its own /proc reads of its children are
// unaffected) and returns. Call it first thing in main (and in TestMain)
// of any program that runs sandboxed commands.
func Main() {
	if len(os.Args) == 4 && os.Args[1] == usernsArg {
		holdUserNS(os.Args[2], os.Args[3])
	}
	if len(os.Args) < 2 || os.Args[1] != trampolineArg {
		unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
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
	unix.CloseOnExec(egressFD) // if given: never the program's
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
	if l.NS && l.UserNS {
		if err := mapIDs(l.UID, l.GID); err != nil {
			return fail(StepIDs, err)
		}
	}
	// The cgroups are opened now (the new root does not show them) and
	// joined last, so that the trampoline's own allocations do not count.
	var cgroups []int
	for _, procs := range l.CgroupProcs {
		fd, err := unix.Open(procs, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(StepCgroup, err)
		}
		cgroups = append(cgroups, fd)
	}
	var cwd string
	if l.NS {
		unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
		// Nothing in the sandbox may read this process's memory or
		// /proc files, or trace it.
		unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
		var err error
		if cwd, err = os.Getwd(); err != nil {
			return fail(StepDir, err)
		}
		if err := buildRoot(&l); err != nil {
			return fail(StepMounts, err)
		}
		if s.netOff() {
			if err := loopbackUp(); err != nil {
				return fail(StepNetwork, err)
			}
		}
		if s.Allowlist && l.EgressPort > 0 {
			if err := sendEgressListener(l.EgressPort); err != nil {
				return fail(StepEgress, err)
			}
		}
		if err := unix.Chdir(cwd); err != nil {
			return fail(StepDir, fmt.Errorf("%s is not visible under the %s profile (it shows the workspace, the system directories and the paths it lists): %w", cwd, s.label(), err))
		}
		unix.Sethostname([]byte("sandbox"))
	}
	// Everything below applies to this locked thread, the one that
	// executes the program, which inherits it: capabilities dropped
	// (inside the user namespace, or for root without one), then
	// no_new_privs, as Landlock and seccomp need it.
	if l.NS || os.Geteuid() == 0 && s.Isolate {
		if err := dropCaps(); err != nil {
			return fail(StepCaps, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(StepNoNewPrv, err)
	}
	if err := landlockApply(s, l.Rules, l.EgressPort, l.NS); err != nil {
		return fail(StepLandlock, err)
	}
	if s.netOff() || s.Isolate {
		if err := installSeccomp(s); err != nil {
			return fail(StepSeccomp, err)
		}
	}
	for _, fd := range cgroups {
		// "0" is the writer itself, in any PID namespace.
		if _, err := unix.Write(fd, []byte("0")); err != nil {
			return fail(StepCgroup, err)
		}
		unix.Close(fd)
	}
	if err := setRlimits(s, l.Nproc, l.MemCgroup); err != nil {
		return fail(StepRlimits, err)
	}
	if !l.NS {
		err = syscall.Exec(l.Path, l.Argv, l.Env)
		return fail(StepExec, fmt.Errorf("%s: %w", l.Path, err))
	}
	return initProgram(&l, fail)
}

// initProgram starts the program from this (locked, confined) thread, and
// then serves as the namespace's init until it exits: it reaps orphans,
// drops the signals sent to it (the host signals the whole process group,
// which holds the program too), reports the
// program's exit status and exits with it, after which the kernel kills
// whatever is left in the namespace.
func initProgram(l *launch, fail func(string, error) *SetupError) *SetupError {
	// Every signal goes back to the default action, which the kernel
	// drops for a namespace's init (only SIGKILL from outside ends it),
	// so the runtime's handlers never run: a handled SIGSEGV or SIGBUS
	// sent from inside the sandbox would otherwise make the runtime crash
	// the init and end the run with a status that is not the command's.
	// (signal.Notify would start a runtime thread and a goroutine: 2.6 ms
	// of this process's CPU.)
	var dfl [4]uintptr
	for _, sig := range resetSignals() {
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	}
	pid, err := syscall.ForkExec(l.Path, l.Argv, &syscall.ProcAttr{Env: l.Env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		return fail(StepExec, fmt.Errorf("%s: %w", l.Path, err))
	}
	status := os.NewFile(statusFD, "status")
	json.NewEncoder(status).Encode(exitMsg{OK: true})
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			os.Exit(125) // cannot happen while the program is a child
		}
		if wpid != pid {
			continue // an orphan reaped
		}
		msg := exitMsg{Exited: true, Code: ws.ExitStatus()}
		code := msg.Code
		if ws.Signaled() {
			msg.Code, msg.Signal = -1, int(ws.Signal())
			code = 128 + msg.Signal
		}
		json.NewEncoder(status).Encode(msg)
		os.Exit(code)
	}
}

// Landlock access rights, from the kernel's uapi (landlock.h).
const (
	llExecute = 1 << iota
	llWriteFile
	llReadFile
	llReadDir
	llRemoveDir
	llRemoveFile
	llMakeChar
	llMakeDir
	llMakeReg
	llMakeSock
	llMakeFifo
	llMakeBlock
	llMakeSym
	llRefer         // ABI 2
	llTruncate      // ABI 3
	llIoctlDev      // ABI 5
	llFSAllV6       = 1<<16 - 1
	llNetTCP        = 1<<2 - 1 // bind and connect, ABI 4
	llNetConnectTCP = 1 << 1
	llScopedAll     = 1<<2 - 1 // abstract unix sockets and signals, ABI 6

	llRead      = llExecute | llReadFile | llReadDir
	llWrite     = llWriteFile | llRemoveDir | llRemoveFile | llMakeDir | llMakeReg | llMakeSock | llMakeFifo | llMakeSym | llTruncate // never device nodes
	llFileOnly  = llExecute | llWriteFile | llReadFile | llTruncate | llIoctlDev
	llROFile    = llRead & llFileOnly
	llRWFile    = (llRead|llWrite)&llFileOnly | llIoctlDev
	llRODir     = llRead
	llRWDir     = llRead | llWrite | llRefer
	llNeededABI = 6
)

// llSupported returns the filesystem and network rights and the scopes
// Landlock ABI abi can restrict (up to what agentexec uses, ABI 6's).
func llSupported(abi int) (fs, net, scoped uint64) {
	switch {
	case abi >= 6:
		return llFSAllV6, llNetTCP, llScopedAll
	case abi == 5:
		return llFSAllV6, llNetTCP, 0
	case abi == 4:
		return 1<<15 - 1, llNetTCP, 0
	case abi == 3:
		return 1<<15 - 1, 0, 0
	case abi == 2:
		return 1<<14 - 1, 0, 0
	case abi == 1:
		return 1<<13 - 1, 0, 0
	}
	return 0, 0, 0
}

// landlockApply restricts the filesystem, the network and IPC scopes in
// one ruleset. It restricts only the calling thread (which must have
// no_new_privs), the one that executes the program: the program inherits that
// thread's domain, and nothing else runs in the trampoline. This avoids
// the all-thread system calls a library must make for a process that goes
// on running Go code.
//
// Under Allowlist in a network namespace (ns), TCP is left to the
// namespace, which holds only loopback: the command's own servers and the
// proxy's listener are all it reaches, so tests that serve on localhost
// keep working. In the fallback (no namespace), TCP connect is allowed to
// the proxy's port alone, on any address (see StatusOf), and bind to
// nothing.
func landlockApply(s *Spec, paths []PathRule, egressPort int, ns bool) error {
	if !s.Filesystem && !s.netOff() {
		return nil
	}
	abi := llABI()
	if s.Allowlist && !ns && abi < 4 {
		// Without a network rule nothing would hold the command to the
		// proxy in the fallback; never best effort.
		return fmt.Errorf("Landlock ABI %d cannot restrict TCP connections to the egress proxy (4 is needed): %w", abi, ErrUnavailable)
	}
	if s.NoNetwork && !s.BestEffort && abi < 4 {
		return fmt.Errorf("Landlock ABI %d cannot restrict the network (4 is needed): %w", abi, ErrUnavailable)
	}
	if !s.BestEffort && abi < llNeededABI {
		return fmt.Errorf("Landlock ABI %d is older than %d, which this profile needs (set best_effort to run with what the kernel has): %w", abi, llNeededABI, ErrUnavailable)
	}
	supFS, supNet, supScoped := llSupported(abi)
	var attr llRuleset
	attr.scoped = llScopedAll & supScoped
	if s.Filesystem {
		attr.handledFS = llFSAllV6 & supFS
	}
	if s.NoNetwork || s.Allowlist && !ns {
		attr.handledNet = llNetTCP & supNet
	}
	if attr.handledFS == 0 && attr.handledNet == 0 && attr.scoped == 0 {
		return nil // best effort on a kernel without Landlock: nothing to do
	}
	fd, err := llCreate(&attr)
	if err != nil {
		return fmt.Errorf("landlock_create_ruleset: %w", err)
	}
	defer unix.Close(fd)
	if attr.handledFS != 0 {
		for _, r := range paths {
			if err := addPathRule(fd, r.Path, r.access()&attr.handledFS); err != nil {
				return err
			}
		}
	}
	if s.Allowlist && egressPort > 0 && attr.handledNet != 0 {
		if err := llAddPort(fd, llNetConnectTCP, uint64(egressPort)); err != nil {
			return fmt.Errorf("landlock_add_rule for TCP port %d: %w", egressPort, err)
		}
	}
	if err := llRestrictSelf(fd); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// addPathRule allows access beneath path; a path that does not exist is
// skipped.
func addPathRule(ruleset int, path string, access uint64) error {
	if access == 0 {
		return nil
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s for a Landlock rule: %w", path, err)
	}
	defer unix.Close(fd)
	if err := llAddPath(ruleset, fd, access); err != nil {
		return fmt.Errorf("landlock_add_rule %s: %w", path, err)
	}
	return nil
}

// devices are the device files every command may use.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// planRules works out the path rules of s: read-only paths (opened entry
// by entry around hidden ones), read-write paths, and the usual devices.
func planRules(s *Spec) []PathRule {
	var rules []PathRule
	// A hidden path is hidden under its own path and the one links lead
	// to (a Kubernetes Secret's file is a link into a ..data directory).
	hidden := make([]string, 0, 2*len(s.Hidden))
	for _, h := range s.Hidden {
		hidden = append(hidden, filepath.Clean(h))
		if r := real(h); r != filepath.Clean(h) {
			hidden = append(hidden, r)
		}
	}
	// holds reports whether p is or contains a hidden path.
	holds := func(p string) bool {
		for _, h := range hidden {
			if within(h, p) {
				return true
			}
		}
		return false
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
		// A rule is set on what a link leads to: a link to a hidden path,
		// or to a directory holding one, gets none (its target is granted,
		// entry by entry, under its own path).
		if fi.Mode()&os.ModeSymlink != 0 && holds(real(p)) {
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
// They are set with a raw system call, which the Go runtime does not
// treat as one that may block: it starts no new thread between here and
// the program's start (a new thread of a race-detector build would need
// memory that RLIMIT_DATA may no longer allow). memCgroup says a cgroup
// limits memory, which then replaces RLIMIT_DATA.
func setRlimits(s *Spec, nproc, memCgroup bool) error {
	set := func(res int, v uint64, hard uint64) error {
		lim := unix.Rlimit{Cur: v, Max: hard}
		_, _, errno := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(res), uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
		if errno != 0 {
			return errno
		}
		return nil
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
	if s.MemoryBytes > 0 && !memCgroup {
		if err := set(unix.RLIMIT_DATA, uint64(s.MemoryBytes), uint64(s.MemoryBytes)); err != nil {
			return fmt.Errorf("RLIMIT_DATA: %w", err)
		}
	}
	return nil
}

// sendEgressListener is the one step of the egress way out that runs in
// the sandbox: in the new network namespace (loopback up), it listens on
// 127.0.0.1:port and sends the listening socket to the host over
// egressFD (SCM_RIGHTS), then closes its own copies. The host accepts
// the command's connections on it and serves them with the proxy, so the
// only thing to connect to inside is the host's proxy, and no forwarder
// runs in the sandbox. A launcher that replaces the trampoline must do
// the same, in this order, before the program starts.
func sendEgressListener(port int) error {
	defer unix.Close(egressFD)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fmt.Errorf("listen on 127.0.0.1:%d: %w", port, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		return fmt.Errorf("listen on 127.0.0.1:%d: %w", port, err)
	}
	if err := unix.Sendmsg(egressFD, []byte{'L'}, unix.UnixRights(fd), nil, 0); err != nil {
		return fmt.Errorf("send the listener to the host: %w", err)
	}
	return nil
}

// resetSignals are the signals whose handlers the init sets back to the
// default: all but those this program ignores (which stay ignored in the
// command, as a fork and exec would leave them).
var resetSignals = sync.OnceValue(func() []int {
	var out []int
	for sig := 1; sig <= 64; sig++ {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		if sig <= 31 && signal.Ignored(syscall.Signal(sig)) {
			continue
		}
		out = append(out, sig)
	}
	return out
})
