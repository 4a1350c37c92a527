package runner

import (
	"context"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
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
	marker := MarkerVar + "=" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(runSeq.Add(1), 10)
	env := append(p.env[:len(p.env):len(p.env)], marker)
	var wrapped *Wrapped
	if spec.Wrap != nil {
		if wrapped, err = spec.Wrap(p.path, p.argv, env); err != nil {
			return nil, &StartError{Kind: ErrSandbox, Program: p.argv[0], Err: err}
		}
		p = &plan{path: wrapped.Path, argv: wrapped.Argv, dir: p.dir, timeout: p.timeout, grace: p.grace, drain: p.drain, extra: wrapped.Files}
		env = wrapped.Env
	}
	cleanup := func() {
		if wrapped != nil && wrapped.Done != nil {
			wrapped.Done()
		}
	}
	pool := active.Load()
	var cg *cgroup
	if pool != nil {
		cg, _ = pool.get()
	}
	c, err := startAttached(p, env, a, cg)
	if err != nil && cg != nil && cgroupRefused(err) {
		cg.remove()
		cg = nil
		c, err = startAttached(p, env, a, nil)
	}
	if wrapped != nil {
		for _, f := range wrapped.Files {
			f.Close()
		}
	}
	if err != nil {
		if cg != nil {
			pool.release(cg, true)
		}
		cleanup()
		return nil, startError(p, err)
	}
	if wrapped != nil && wrapped.Started != nil {
		if serr := wrapped.Started(c.pid); serr != nil {
			signalGroup(c.pid, syscall.SIGKILL)
			if cg != nil {
				cg.kill()
			}
			c.wait()
			if cg != nil {
				pool.release(cg, false)
			}
			cleanup()
			return nil, &StartError{Kind: ErrSandbox, Program: spec.programName(), Err: serr}
		}
	}
	start := time.Now()
	registerLeader(c.pid)
	proc := &Process{Pid: c.pid, stop: make(chan struct{}), done: make(chan struct{})}
	waitCh := make(chan *exitStatus, 1)
	go func() {
		st := c.wait()
		unregisterLeader(c.pid)
		waitCh <- st
	}()
	t := newTree(c.pid, marker, cg)
	if wrapped != nil && wrapped.Cgroup != "" {
		t.moved = trackCgroup(wrapped.Cgroup)
	}
	watchStart(c.pid, marker, t.cgroupDirs()...)
	go func() {
		defer close(proc.done)
		defer cleanup()
		var timeout <-chan time.Time
		if p.timeout > 0 {
			tm := time.NewTimer(p.timeout)
			defer tm.Stop()
			timeout = tm.C
		}
		res := &Result{Pid: c.pid, Start: start}
		var st *exitStatus
		select {
		case st = <-waitCh:
		case <-timeout:
			res.Outcome = TimedOut
		case <-proc.stop:
			res.Outcome = Cancelled
		}
		if st == nil {
			select {
			case st = <-waitCh:
				res.Outcome = 0
			default:
				st = t.end(p.grace, waitCh, nil)
			}
		}
		res.Duration = time.Since(start)
		setStatus(res, st)
		if res.Outcome == 0 {
			res.Outcome = Exited
			if res.Signal != 0 {
				res.Outcome = Signaled
			}
		}
		t.end(p.grace, nil, st)
		res.LeftoversKilled = t.killed()
		watchEnd(c.pid, marker, false)
		if cg != nil {
			pool.release(cg, t.empty)
		}
		proc.res = res
	}()
	return proc, nil
}
