package runner

import (
	"os"
	"strconv"
	"syscall"
	"time"
)

// forkFunc starts a plan's main process with env, inside cg when it is set.
type forkFunc func(p *plan, env []string, cg *cgroup) (*child, error)

// launched is a command whose main process has started: what Run and
// Start share from the start of a process tree to its end.
type launched struct {
	plan    *plan
	wrapped *Wrapped // nil without Spec.Wrap
	marker  string   // MarkerVar=value, in every process of the tree
	c       *child
	pool    *Cgroups
	cg      *cgroup // the run's own cgroup, or nil
	tree    *tree
	start   time.Time
	waitCh  chan *exitStatus // the main process's status, once reaped
}

// launch starts the command p plans: it adds the run's marker to the
// environment, applies spec.Wrap, takes a cgroup from the active pool (and
// does without it if the kernel refuses it), starts the main process with
// fork, runs Wrapped.Started, and from then on watches the tree: the main
// process is reaped into waitCh and the watchdog knows the run. On error
// nothing runs and Wrapped.Done has been called; on success the caller
// calls it once the run is over.
func launch(spec *Spec, p *plan, fork forkFunc) (*launched, error) {
	marker := MarkerVar + "=" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(runSeq.Add(1), 10)
	env := append(p.env[:len(p.env):len(p.env)], marker)
	l := &launched{marker: marker}
	if spec.Wrap != nil {
		w, err := spec.Wrap(p.path, p.argv, env)
		if err != nil {
			return nil, &StartError{Kind: ErrSandbox, Program: p.argv[0], Err: err}
		}
		l.wrapped = w
		p = &plan{path: w.Path, argv: w.Argv, dir: p.dir, timeout: p.timeout, grace: p.grace, drain: p.drain, extra: w.Files, attr: w.Attr, start: w.Start}
		env = w.Env
	}
	l.plan = p
	l.pool = active.Load()
	if l.pool != nil {
		l.cg, _ = l.pool.get() // without one, the session and sweep still apply
	}
	c, err := fork(p, env, l.cg)
	if err != nil && l.cg != nil && cgroupRefused(err) {
		l.cg.remove() // the kernel would not put a process there: out of the pool for good
		l.cg = nil
		c, err = fork(p, env, nil)
	}
	if l.wrapped != nil {
		for _, f := range l.wrapped.Files {
			f.Close()
		}
	}
	if err != nil {
		if l.cg != nil {
			l.pool.release(l.cg, true)
		}
		l.done()
		return nil, startError(p, err)
	}
	if l.wrapped != nil && l.wrapped.Started != nil {
		if serr := l.wrapped.Started(c.pid); serr != nil {
			signalGroup(c.pid, syscall.SIGKILL)
			if l.cg != nil {
				l.cg.kill()
			}
			c.wait()
			if l.cg != nil {
				l.pool.release(l.cg, false)
			}
			l.done()
			return nil, &StartError{Kind: ErrSandbox, Program: spec.programName(), Err: serr}
		}
	}
	l.c = c
	l.start = time.Now()
	registerLeader(c.pid)
	l.waitCh = make(chan *exitStatus, 1)
	go func() {
		st := c.wait()
		if l.wrapped != nil && l.wrapped.Exited != nil {
			st.code, st.signal = l.wrapped.Exited(st.code, st.signal)
		}
		unregisterLeader(c.pid)
		l.waitCh <- st
	}()
	l.tree = newTree(c.pid, marker, l.cg)
	if l.wrapped != nil && l.wrapped.Cgroup != "" {
		l.tree.moved = trackCgroup(l.wrapped.Cgroup)
	}
	watchStart(c.pid, marker, l.tree.cgroupDirs()...)
	return l, nil
}

// done calls Wrapped.Done, if any.
func (l *launched) done() {
	if l.wrapped != nil && l.wrapped.Done != nil {
		l.wrapped.Done()
	}
}

// finish waits for the main process to exit, or for the plan's timeout or
// stop, which end the whole tree (SIGTERM, grace, SIGKILL); then it ends
// what the main process left running, or keeps it when keep is set and
// the process exited by itself, and gives the cgroup back. The result has
// the outcome, status, duration and leftover counts.
func (l *launched) finish(stop <-chan struct{}, keep bool) *Result {
	var timeout <-chan time.Time
	if l.plan.timeout > 0 {
		tm := time.NewTimer(l.plan.timeout)
		defer tm.Stop()
		timeout = tm.C
	}
	t, grace := l.tree, l.plan.grace
	res := &Result{Pid: l.c.pid, Start: l.start}
	var st *exitStatus
	select {
	case st = <-l.waitCh:
	case <-timeout:
		res.Outcome = TimedOut
	case <-stop:
		res.Outcome = Cancelled
	}
	if st == nil {
		select {
		case st = <-l.waitCh: // it exited just as the timer fired: not a timeout
			res.Outcome = 0
		default:
			st = t.end(grace, l.waitCh, nil)
		}
	}
	res.Duration = time.Since(l.start)
	setStatus(res, st)
	if res.Outcome == 0 {
		res.Outcome = Exited
		if res.Signal != 0 {
			res.Outcome = Signaled
		}
	}
	if keep && (res.Outcome == Exited || res.Outcome == Signaled) {
		res.LeftoversKept = t.keep()
	} else {
		t.end(grace, nil, st)
	}
	res.LeftoversKilled = t.killed()
	watchEnd(l.c.pid, l.marker, res.LeftoversKept > 0)
	if l.cg != nil {
		l.pool.release(l.cg, t.empty)
	}
	return res
}
