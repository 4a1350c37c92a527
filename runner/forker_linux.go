package runner

import (
	"runtime"
	"sync"
	"syscall"
	"time"
)

// forkIdle is how long the forking thread waits, with none of the
// processes it started still running, before it ends.
const forkIdle = 100 * time.Millisecond

// forkRequest is one start handed to the forking thread.
type forkRequest struct {
	path string
	argv []string
	attr *syscall.ProcAttr
	done chan forkResult
}

type forkResult struct {
	pid int
	err error
}

var (
	forkMu   sync.Mutex
	forkCh   chan forkRequest // nil while no forking thread runs
	forkLive int              // processes it started that were not yet waited for
)

// forkExec starts a process from a dedicated OS thread that stays alive
// for as long as any process it started is running. Linux sends a child's
// parent-death signal when the thread that forked it ends, not when the
// process does (golang/go#27505), and Go may end any other thread at any
// time; forking from this thread makes Pdeathsig mean "when this process
// dies". Every successful call must be followed by one forkReleased once
// the process has been waited for.
func forkExec(path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	forkMu.Lock()
	if forkCh == nil {
		forkCh = make(chan forkRequest)
		go forkThread(forkCh)
	}
	ch := forkCh
	forkLive++ // reserved before the send, so the thread cannot end meanwhile
	forkMu.Unlock()
	done := make(chan forkResult, 1)
	ch <- forkRequest{path, argv, attr, done}
	r := <-done
	if r.err != nil {
		forkReleased()
	}
	return r.pid, r.err
}

// forkReleased says that a process forkExec started has been waited for.
func forkReleased() {
	forkMu.Lock()
	forkLive--
	forkMu.Unlock()
}

// forkThread serves forkExec on a locked thread, and returns (ending the
// thread, which Go does for a goroutine that exits locked) once none of
// the processes it started is left and no start came for forkIdle.
func forkThread(ch chan forkRequest) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	idle := time.NewTimer(forkIdle)
	defer idle.Stop()
	for {
		select {
		case r := <-ch:
			pid, err := syscall.ForkExec(r.path, r.argv, r.attr)
			r.done <- forkResult{pid, err}
		case <-idle.C:
			forkMu.Lock()
			if forkLive == 0 {
				forkCh = nil
				forkMu.Unlock()
				return
			}
			forkMu.Unlock()
		}
		idle.Reset(forkIdle)
	}
}
