// Package sandbox confines a command: namespaces, resource limits, a
// Landlock filesystem and network policy, a seccomp deny list, IPC
// scoping, dropped capabilities and no_new_privs.
//
// Behind the namespace wall (linux/amd64) the host clones the namespace's
// init itself, sharing its memory (CLONE_VM), and the init applies a
// program of raw system calls compiled beforehand into memory outside the
// Go heap, as Go's own fork-and-exec child does: no second program start
// and no second Go runtime. Elsewhere, and as the fallback
// (Options.Launcher), Go cannot run code between fork and exec, so the
// runner starts a trampoline (this program again in a hidden mode, or
// agentexec-sandbox) that reads the spec from an inherited descriptor
// (never argv or env), applies it to itself, and executes the target.
// Either way a setup failure comes back on a close-on-exec status
// descriptor as a typed error naming the step, and the target never runs.
//
// This is the security boundary that package safety is not. What the
// kernel cannot do is reported (Status), never silently skipped: a spec
// that asks for a missing layer fails unless it says BestEffort, and then
// the run says what was skipped.
package sandbox

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
)

// Spec is what a command may do. The zero value confines nothing.
type Spec struct {
	// Name is the profile the spec came from, for results and the audit
	// log.
	Name string `json:"name,omitempty"`
	// Resource limits; zero means no limit. Memory is RLIMIT_DATA (the
	// heap and anonymous mappings): RLIMIT_AS would count reserved but
	// unused address space, which breaks the JVM, Go and other runtimes
	// that reserve large ranges up front. Core dumps are always off.
	CPUSeconds    int64 `json:"cpu_seconds,omitempty"`
	MemoryBytes   int64 `json:"memory_bytes,omitempty"`
	FileSizeBytes int64 `json:"file_size_bytes,omitempty"`
	OpenFiles     int64 `json:"open_files,omitempty"`
	// Processes caps the processes of the command's tree: a cgroup
	// pids.max where a cgroup is writable (RLIMIT_NPROC does nothing for
	// root), else RLIMIT_NPROC for a non-root user.
	Processes int64 `json:"processes,omitempty"`

	// Filesystem turns on Landlock: ReadOnly paths can be read and
	// executed, ReadWrite paths written too, and nothing else reached.
	Filesystem bool     `json:"filesystem,omitempty"`
	ReadOnly   []string `json:"read_only,omitempty"`
	ReadWrite  []string `json:"read_write,omitempty"`
	// Hidden paths stay unreadable even inside readable trees (secrets
	// such as ~/.ssh): their ancestors are opened entry by entry instead.
	Hidden []string `json:"hidden,omitempty"`
	// PrivateTmp gives each run its own writable temporary directory,
	// exported as TMPDIR and removed afterwards.
	PrivateTmp bool `json:"private_tmp,omitempty"`

	// Isolate builds the namespace wall (new user, mount, PID, IPC and
	// UTS namespaces, and a network namespace with only loopback when
	// NoNetwork): the program sees only the system directories
	// (read-only), the ReadOnly and ReadWrite paths, the Home allow list,
	// the tool Cache, a private /tmp and /var/tmp, an empty HOME, a
	// minimal /dev and its own /proc. It also drops every capability and
	// installs the seccomp deny list. Where user namespaces are refused,
	// only BestEffort runs the spec, on Landlock and seccomp alone.
	Isolate bool `json:"isolate,omitempty"`
	// HomeDir is the home directory replaced by an empty one, and Home
	// the paths under it shown read-only (absolute).
	HomeDir string   `json:"home_dir,omitempty"`
	Home    []string `json:"home,omitempty"`
	// Cache is a writable, persistent directory for tool caches
	// (GOCACHE, GOMODCACHE, npm_config_cache, XDG_CACHE_HOME, CARGO_HOME
	// and PIP_CACHE_DIR point into it); "" for none.
	Cache string `json:"cache,omitempty"`
	// TmpBytes caps the private /tmp (a tmpfs) under Isolate; 0 leaves
	// the kernel's default (half the memory).
	TmpBytes int64 `json:"tmp_bytes,omitempty"`

	// NoNetwork denies TCP bind and connect (Landlock), and UDP, raw and
	// MPTCP sockets, ptrace and io_uring (seccomp).
	NoNetwork bool `json:"no_network,omitempty"`

	// Allowlist confines the network as NoNetwork does, except for one
	// way out: the host's egress proxy (Egress), which lets connections
	// through only to the hosts its allowlist names. Behind the namespace
	// wall the command gets a network namespace holding only loopback,
	// where the proxy's listener (127.0.0.1:DefaultEgressPort) is the one
	// thing besides the command's own servers; in the fallback without
	// namespaces, Landlock allows TCP connect to the proxy's port alone,
	// but on any address (a weaker wall: see StatusOf). The command's
	// environment names the proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and
	// the like). Without Egress (a spec that crossed a process boundary)
	// the command has no network at all.
	Allowlist bool `json:"allowlist,omitempty"`
	// Egress is the proxy of Allowlist; set by the host, never
	// serialised.
	Egress EgressProxy `json:"-"`

	// BestEffort runs with the layers the kernel has when some are
	// missing (the result says which were skipped); otherwise a missing
	// layer is an error.
	BestEffort bool `json:"best_effort,omitempty"`
}

// Enabled reports whether s confines anything.
func (s *Spec) Enabled() bool {
	return s != nil && (s.CPUSeconds > 0 || s.MemoryBytes > 0 || s.FileSizeBytes > 0 || s.OpenFiles > 0 || s.Processes > 0 ||
		s.Filesystem || s.NoNetwork || s.Allowlist || s.Isolate)
}

// EgressProxy is the host's way out for Allowlist specs (package egress
// provides it).
type EgressProxy interface {
	// ServeListener serves the connections a sandboxed run's listener
	// accepts; stop closes it and them, waits for them, and returns the
	// reasons of the refusals meanwhile (each names its destination).
	ServeListener(ln net.Listener) (stop func() []string)
	// HostPort starts (once) and returns the proxy's port on the host's
	// 127.0.0.1, for the fallback without a network namespace.
	HostPort() (int, error)
}

// DefaultEgressPort is the port of the proxy's listener inside a
// sandbox's network namespace.
const DefaultEgressPort = 3128

// netOff says the spec closes the network (all of it, or all but the
// egress proxy).
func (s *Spec) netOff() bool { return s.NoNetwork || s.Allowlist }

// label is the profile's name, or "custom".
func (s *Spec) label() string {
	if s.Name == "" {
		return "custom"
	}
	return s.Name
}

// Stricter returns a spec at least as strict as both a and b: the lower of
// each limit, and every restriction either asks for. Paths: a path is
// writable only if both allow writing it.
func Stricter(a, b Spec) Spec {
	lower := func(x, y int64) int64 {
		switch {
		case x == 0:
			return y
		case y == 0:
			return x
		}
		return min(x, y)
	}
	out := Spec{
		CPUSeconds: lower(a.CPUSeconds, b.CPUSeconds), MemoryBytes: lower(a.MemoryBytes, b.MemoryBytes),
		FileSizeBytes: lower(a.FileSizeBytes, b.FileSizeBytes), OpenFiles: lower(a.OpenFiles, b.OpenFiles),
		Processes:  lower(a.Processes, b.Processes),
		Filesystem: a.Filesystem || b.Filesystem, NoNetwork: a.NoNetwork || b.NoNetwork,
		Allowlist:  (a.Allowlist || b.Allowlist) && !(a.NoNetwork || b.NoNetwork),
		PrivateTmp: a.PrivateTmp || b.PrivateTmp, BestEffort: a.BestEffort && b.BestEffort,
		Isolate: a.Isolate || b.Isolate, TmpBytes: lower(a.TmpBytes, b.TmpBytes),
		Hidden: append(slices.Clone(a.Hidden), b.Hidden...),
	}
	if out.Allowlist {
		out.Egress = a.Egress
		if !a.Allowlist || out.Egress == nil {
			out.Egress = b.Egress
		}
	}
	switch {
	case a.Isolate && b.Isolate:
		out.HomeDir, out.Cache = a.HomeDir, a.Cache
		for _, h := range a.Home {
			if slices.Contains(b.Home, h) {
				out.Home = append(out.Home, h)
			}
		}
		if a.Cache != b.Cache {
			out.Cache = ""
		}
	case a.Isolate:
		out.HomeDir, out.Home, out.Cache = a.HomeDir, a.Home, a.Cache
	case b.Isolate:
		out.HomeDir, out.Home, out.Cache = b.HomeDir, b.Home, b.Cache
	}
	switch {
	case a.Filesystem && b.Filesystem:
		out.ReadOnly = append(slices.Clone(a.ReadOnly), b.ReadOnly...)
		for _, p := range a.ReadWrite {
			if slices.Contains(b.ReadWrite, p) {
				out.ReadWrite = append(out.ReadWrite, p)
			} else {
				out.ReadOnly = append(out.ReadOnly, p)
			}
		}
	case a.Filesystem:
		out.ReadOnly, out.ReadWrite = a.ReadOnly, a.ReadWrite
	case b.Filesystem:
		out.ReadOnly, out.ReadWrite = b.ReadOnly, b.ReadWrite
	}
	return out
}

// Validate checks that paths are absolute.
func (s *Spec) Validate() error {
	for _, list := range [][]string{s.ReadOnly, s.ReadWrite, s.Hidden, s.Home, {s.HomeDir, s.Cache}} {
		for _, p := range list {
			if p != "" && !filepath.IsAbs(p) {
				return fmt.Errorf("sandbox: %q is not an absolute path", p)
			}
		}
	}
	if s.TmpBytes < 0 || s.CPUSeconds < 0 || s.MemoryBytes < 0 || s.FileSizeBytes < 0 || s.OpenFiles < 0 || s.Processes < 0 {
		return errors.New("sandbox: limits must not be negative")
	}
	return nil
}

// EnvVar is set, to the profile's name, in the environment of every
// command behind the namespace wall (or the fallback of a namespaced
// profile). A nested agentexec refuses background jobs when it sees it:
// nothing a sandboxed command starts may outlive it.
const EnvVar = "AGENTEXEC_SANDBOX"

// Steps of the trampoline, named in SetupErrors.
const (
	StepReadSpec = "read the spec"
	StepCgroup   = "join the cgroup"
	StepLandlock = "apply Landlock"
	StepSeccomp  = "install the seccomp filter"
	StepNoNewPrv = "set no_new_privs"
	StepRlimits  = "set resource limits"
	StepExec     = "execute the program"
)

// SetupError says which step of the trampoline failed; the target did not
// run.
type SetupError struct {
	Step string `json:"step"`
	Msg  string `json:"error"`
	// Errno is the system error number, if any.
	Errno int `json:"errno,omitempty"`
}

// Error returns "sandbox: cannot <step>: <message>".
func (e *SetupError) Error() string { return "sandbox: cannot " + e.Step + ": " + e.Msg }

// ErrUnavailable is wrapped by errors for layers the kernel lacks.
var ErrUnavailable = errors.New("not available on this system")

// Options say how the host starts the trampoline.
type Options struct {
	// Executable is the trampoline program; empty means agentexec-sandbox
	// next to this program, or else this program itself. It must call
	// Main first thing in main.
	Executable string
	// Launcher chooses how namespaced commands start: LauncherRaw (the
	// host clones the sandbox's init itself, which applies the spec with
	// raw system calls: one process start, no second Go runtime),
	// LauncherTrampoline (the Go trampoline program, started for each
	// command), or "" for the environment variable LauncherEnv, else
	// LauncherRaw where it is available (linux/amd64; an ordinary user
	// also needs the shared user namespace, made once per process) and
	// the trampoline elsewhere. Both build the same wall.
	Launcher string
}

// Launchers.
const (
	LauncherRaw        = "raw"
	LauncherTrampoline = "trampoline"
	// LauncherEnv, when set to a launcher's name, chooses it where
	// Options.Launcher is empty.
	LauncherEnv = "AGENTEXEC_SANDBOX_LAUNCHER"
)

// State is what this system can do for the sandbox.
type State struct {
	LandlockABI int  // 0: none
	Seccomp     bool // seccomp filters can be installed
	UserNS      bool // new user (and mount, PID, ...) namespaces can be created
	// UserNSDetail says how UserNS was found, or why the kernel refused.
	UserNSDetail string
	PidsCgroup   string // a writable directory of a pids controller, or ""
	CgroupV2     bool
	Bwrap        string // path of bubblewrap, or ""
}

// Layer is one line of `agentexec sandbox status`.
type Layer struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	// State is "used", "available" or "missing".
	State  string `json:"state,omitempty"`
	Detail string `json:"detail"`
	// Open says which escapes stay open when the layer is missing.
	Open string `json:"open_when_missing,omitempty"`
	Fix  string `json:"fix,omitempty"`
}
