// Package runner runs one process tree from a Spec and returns a Result.
//
// Every command runs in a new session (and so a new process group, with no
// controlling terminal), with the exact environment the caller gives, stdin
// at /dev/null unless bytes are given, and its stdout and stderr captured in
// bounded memory (package capture). Run returns as soon as the main process
// has exited, even when something it started still holds its output pipes;
// by default everything else the command started is then ended, including
// processes that left the session with setsid (found because the host makes
// itself a child subreaper on Linux). Timeout and cancellation send SIGTERM
// to the whole tree, wait a grace period and then send SIGKILL. Where a
// cgroup v2 directory is writable, UseCgroups makes every run hold its tree
// in a cgroup of its own, which also catches a process that both left the
// session and cleared its environment, and ends it with cgroup.kill.
//
// Run is safe to call from many goroutines at once.
package runner

import (
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/agentexec/agentexec/capture"
)

// Stream names one of a command's output streams.
type Stream uint8

const (
	// Stdout is the command's standard output.
	Stdout Stream = iota + 1
	// Stderr is the command's standard error.
	Stderr
)

// String returns "stdout" or "stderr".
func (s Stream) String() string {
	if s == Stderr {
		return "stderr"
	}
	return "stdout"
}

// Defaults used when a Spec leaves a field zero.
const (
	// DefaultGrace is the time between SIGTERM and SIGKILL.
	DefaultGrace = 2 * time.Second
	// DefaultPath is the search path used for an argv program when the
	// child's environment has no PATH.
	DefaultPath = "/usr/local/bin:/usr/bin:/bin"
	// DefaultDrain bounds how long Run keeps reading output after the main
	// process exited and its leftovers were dealt with. It only matters when
	// something that outlived the command still holds the output pipes.
	DefaultDrain = 100 * time.Millisecond
)

// MarkerVar is the environment variable Run adds to every child's
// environment (value: a token unique to the run). It lets Run recognise the
// command's processes that escaped its session, so it can end them too. It
// carries no secret.
const MarkerVar = "AGENTEXEC_RUN"

// Spec describes one command. Exactly one of Command and Argv is set.
// The zero value of every other field is a safe default.
type Spec struct {
	// Command is a shell command line, run as Shell -c Command.
	Command string
	// Shell is the shell for Command: a name looked up in the host's PATH
	// or a path. Empty means bash, or sh where bash is missing.
	Shell string
	// Argv is a program and its arguments, run without a shell: nothing is
	// expanded and ";", "$" or "*" reach the program literally. A program
	// name without a slash is looked up in the PATH of Env (DefaultPath if
	// Env has none).
	Argv []string

	// Dir is the working directory; empty means the host's current one.
	Dir string
	// Env is the child's exact environment ("KEY=value" entries), plus
	// MarkerVar. Nil means SafeEnv(); an empty non-nil slice means nothing.
	// Nothing is inherited from the host unless it is in Env.
	Env []string
	// Stdin is given to the command on its standard input, which is then
	// closed. Nil means /dev/null.
	Stdin []byte

	// Timeout ends the command (SIGTERM, Grace, SIGKILL) after this long.
	// Zero means no timeout.
	Timeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL. Zero means
	// DefaultGrace; a negative value sends SIGKILL at once.
	Grace time.Duration
	// Drain bounds reading output after the main process exited; zero
	// means DefaultDrain.
	Drain time.Duration

	// Stdout, Stderr and Combined bound what is kept of each stream and of
	// both in arrival order. Zero values keep the first capture.DefaultMax
	// bytes.
	Stdout, Stderr, Combined capture.Limit

	// MergeOutput gives the command one pipe for both stdout and stderr
	// (as 2>&1 would), so the combined stream keeps the exact order of
	// their writes. Everything is then reported as stdout: Result.Stdout
	// and Result.Combined hold it and Result.Stderr is empty.
	MergeOutput bool

	// KeepLeftovers leaves running whatever the command started that is
	// still running when the main process exits; they are counted in
	// Result.LeftoversKept. Output they write after Run returns is lost.
	KeepLeftovers bool

	// Wrap, if set, changes what is started: it gets the program, argv
	// and environment that would run and returns what to run instead (a
	// sandbox trampoline that applies its restrictions and then executes
	// the program, keeping the pid).
	Wrap func(path string, argv, env []string) (*Wrapped, error)

	// OnStart, if set, is called once with the main process's id as soon
	// as it has started, before any output is read. It must not block for
	// long.
	OnStart func(pid int)

	// OnOutput, if set, is called with each chunk of output as it arrives,
	// in arrival order, one call at a time. p is only valid during the call;
	// OnOutput must not block for long, since the command's output waits.
	OnOutput func(s Stream, p []byte)
}

// nonInteractive are set by SafeEnv so that tools fail fast instead of
// waiting for a person at a prompt or pager.
var nonInteractive = []string{
	"GIT_TERMINAL_PROMPT=0",
	"GIT_EDITOR=true",
	"GIT_SEQUENCE_EDITOR=true",
	"EDITOR=true",
	"VISUAL=true",
	"PAGER=cat",
	"GIT_PAGER=cat",
	"DEBIAN_FRONTEND=noninteractive",
	"CI=1",
}

// safeNames are host variables SafeEnv passes through: none holds a secret.
var safeNames = []string{"PATH", "HOME", "LANG", "LC_*", "USER", "LOGNAME", "TERM", "SHELL", "TZ", "TMPDIR"}

// SafeEnv returns the environment used when Spec.Env is nil: the host's
// values of a fixed list of harmless variables (PATH, HOME, LANG, LC_*,
// USER, LOGNAME, TERM, SHELL, TZ, TMPDIR; PATH defaults to DefaultPath)
// plus settings that keep tools non-interactive (GIT_TERMINAL_PROMPT=0,
// EDITOR=true, PAGER=cat, CI=1, ...). Secrets in the host's environment
// never appear in it.
func SafeEnv() []string { return BuildEnv(nil, nil) }

// NonInteractive returns the settings SafeEnv adds so that tools fail fast
// instead of waiting for a person.
func NonInteractive() []string { return append([]string(nil), nonInteractive...) }

// BuildEnv returns SafeEnv's pass-through variables, then the host's
// values of extra (names, or prefixes ending in "*" such as "AWS_*"), then
// the non-interactive settings, then set ("KEY=value", overriding
// anything before). A later entry for a key replaces an earlier one.
func BuildEnv(extra []string, set []string) []string {
	env := make([]string, 0, len(safeNames)+len(nonInteractive)+len(extra)+len(set))
	index := map[string]int{}
	put := func(k, v string) {
		if i, ok := index[k]; ok {
			env[i] = k + "=" + v
			return
		}
		index[k] = len(env)
		env = append(env, k+"="+v)
	}
	host := os.Environ()
	pass := func(pattern string) {
		if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
			for _, kv := range host {
				if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, prefix) && k != "" {
					put(k, v)
				}
			}
			return
		}
		if v, ok := os.LookupEnv(pattern); ok {
			put(pattern, v)
		}
	}
	for _, k := range safeNames {
		pass(k)
	}
	if _, ok := index["PATH"]; !ok {
		put("PATH", DefaultPath)
	}
	for _, k := range extra {
		pass(k)
	}
	for _, kv := range nonInteractive {
		k, v, _ := strings.Cut(kv, "=")
		put(k, v)
	}
	for _, kv := range set {
		k, v, _ := strings.Cut(kv, "=")
		put(k, v)
	}
	return env
}

// lookupEnv returns the value of key in env (last one wins, as in exec).
func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// Wrapped is what a Spec.Wrap hook starts instead of the program.
type Wrapped struct {
	Path string
	Argv []string
	Env  []string
	// Files become the process's descriptors 3, 4, ...; Run closes its
	// copies once the process has started.
	Files []*os.File
	// Started is called with the pid as soon as the process has started.
	// A non-nil error means the program never ran: Run then reaps the
	// process and returns a *StartError of kind ErrSandbox carrying it.
	Started func(pid int) error
	// Done, if set, is called when the run is over (also after a failed
	// start), to clean up.
	Done func()
	// Cgroup, if set, is a cgroup directory (v1 or v2) that the started
	// process moves itself into before it runs the program (leaving the
	// run's own cgroup). Run then finds and ends the processes in it with
	// the rest of the tree.
	Cgroup string
	// Attr, if set, adjusts the process attributes the runner starts the
	// process with (a sandbox adds namespace clone flags and id maps).
	Attr func(*syscall.SysProcAttr)
	// Start, if set, starts the process instead of syscall.ForkExec (a
	// sandbox that clones its init with raw system calls). It gets the
	// working directory, the descriptors that become 0, 1, 2, 3, ... of
	// the process (Files included) and the attributes the runner would
	// have used (session, cgroup, controlling terminal), and returns the
	// pid of a child of this process that Run then waits for and signals
	// as it would a forked one.
	Start func(dir string, files []uintptr, sys *syscall.SysProcAttr) (pid int, err error)
	// Exited, if set, is given the main process's exit code (-1 when a
	// signal killed it) and signal as soon as it has been reaped, and
	// returns the status to report: a wrapper that stays as the parent of
	// the program (a PID namespace's init) reports the program's own.
	Exited func(code, signal int) (int, int)
	// Finish, if set, is called with the result and the last 8 KiB of
	// output (both streams, whatever the capture limits keep) once the
	// output has been read; text it returns is added to the command's
	// output as a last line of stderr (stdout with MergeOutput), through
	// OnOutput too (a sandbox's note when a command failed on a path it
	// does not allow).
	Finish func(res *Result, tail []byte) string
}

// settledDrain bounds the wait for end of output when the end of the tree
// saw nothing left: then a transient holder is the likely cause of a late
// end (see Run), and it is worth waiting for.
const settledDrain = 2 * time.Second
