package runner

import (
	"errors"
	"sync"
	"sync/atomic"
)

// ErrNoCgroups is returned (wrapped) by OpenCgroups and FindCgroups when
// cgroup tracking cannot be used here: not Linux, no cgroup v2 hierarchy,
// a directory that is not writable, or a kernel older than 5.14 (which
// lacks cgroup.kill).
var ErrNoCgroups = errors.New("cgroup v2 tracking is not available")

// Cgroups is a pool of cgroup v2 directories that Run uses, once enabled
// with UseCgroups, to hold each command's whole process tree: the main
// process is started inside a fresh cgroup of the pool (CLONE_INTO_CGROUP),
// so every process it ever starts stays there whatever it does to its
// session, process group or environment, and the tree is ended with
// cgroup.kill, which no fork can race. The session, group and subreaper
// tracking still applies alongside.
//
// The pool lives in a directory of its own, <parent>/agentexec-<pid>-<n>,
// and reuses the cgroups of finished runs, so a run costs no mkdir or
// rmdir. A cgroup whose run kept leftovers (Spec.KeepLeftovers) goes back
// to the pool once they have all exited. A Cgroups is safe for concurrent
// use.
type Cgroups struct {
	parent string
	root   string

	mu      sync.Mutex
	free    []*cgroup
	kept    []*cgroup // populated by leftovers a run kept
	next    int
	closed  bool
	created int
}

// Parent returns the cgroup v2 directory the pool was opened under.
func (c *Cgroups) Parent() string { return c.parent }

// Dir returns the pool's own directory, which holds one cgroup per run.
func (c *Cgroups) Dir() string { return c.root }

// active is the pool every Run uses, or nil.
var active atomic.Pointer[Cgroups]

// UseCgroups makes every later Run in this process start its command in a
// cgroup of c; nil turns cgroup tracking off. Runs already in progress keep
// what they started with. Without it, Run relies on sessions, process
// groups and (on Linux) the subreaper sweep, which miss only a process that
// both left the session and cleared its environment.
func UseCgroups(c *Cgroups) { active.Store(c) }

// ActiveCgroups returns the pool set by UseCgroups, or nil.
func ActiveCgroups() *Cgroups { return active.Load() }
