package runner

import (
	"context"
	"os"
	"sync"
)

// Attach names the descriptors a process started with Start gets as its
// standard streams, for callers that read and write them themselves (an
// interactive session on a pseudo-terminal or on pipes). Start does not
// take ownership: the caller closes its copies once Start has returned.
type Attach struct {
	// Stdin, Stdout and Stderr become descriptors 0, 1 and 2. A nil Stdin
	// is /dev/null; Stdout is required; a nil Stderr shares Stdout.
	Stdin, Stdout, Stderr *os.File
	// Terminal makes Stdin, which must then be a terminal (the slave side
	// of a pseudo-terminal), the controlling terminal of the process's new
	// session, so that job control, Ctrl-C and /dev/tty work inside it.
	Terminal bool
}

// Process is a process tree started with Start. It has the guarantees of
// Run (its own session and group, the run's cgroup where cgroups are in
// use, the subreaper sweep, Spec.Wrap and Spec.Timeout), but its output is
// not captured: the caller reads the descriptors it attached. When the main
// process exits, whatever it left running is ended, as Run does without
// Spec.KeepLeftovers.
type Process struct {
	// Pid is the main process's id, which is also its session and process
	// group id.
	Pid int

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	res      *Result
}

// Done is closed once the main process has exited and the rest of its tree
// has been ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Result returns how the process ended (its Stdout, Stderr and Combined
// are empty), or nil while Done is open.
func (p *Process) Result() *Result {
	select {
	case <-p.done:
		return p.res
	default:
		return nil
	}
}

// Stop ends the whole tree (SIGTERM to the group and to every escaped
// process, SIGKILL after the spec's grace period) and returns once it is
// over; the Result's Outcome is then Cancelled unless the process had
// already exited. Stop is safe to call more than once and from many
// goroutines.
func (p *Process) Stop() {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
}

// StopContext is Stop that returns early, with ctx's error, when ctx is
// done first; the tree is still being ended then.
func (p *Process) StopContext(ctx context.Context) error {
	p.stopOnce.Do(func() { close(p.stop) })
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start starts the command spec describes with the standard streams of a,
// and returns once it runs. Spec's output limits, Stdin, Drain, MergeOutput,
// KeepLeftovers and OnOutput do not apply. The error is a *StartError when
// the command could not be started; nothing then runs.
func Start(spec Spec, a Attach) (*Process, error) {
	p, err := prepare(&spec)
	if err != nil {
		return nil, err
	}
	if a.Stdout == nil {
		return nil, &StartError{Kind: ErrInvalidSpec, Detail: "Attach.Stdout is required"}
	}
	if a.Terminal && a.Stdin == nil {
		return nil, &StartError{Kind: ErrInvalidSpec, Detail: "a controlling terminal needs Attach.Stdin"}
	}
	l, err := launch(&spec, p, func(p *plan, env []string, cg *cgroup) (*child, error) {
		return startAttached(p, env, a, cg)
	})
	if err != nil {
		return nil, err
	}
	proc := &Process{Pid: l.c.pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(proc.done)
		defer l.done()
		proc.res = l.finish(proc.stop, false)
	}()
	return proc, nil
}
