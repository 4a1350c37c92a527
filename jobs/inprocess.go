package jobs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentexec/agentexec/runner"
)

// Attached is a job run inside this process (a foreground call that may
// detach): it has the same directory, output file, record and completion
// line as a supervised job, so the job tools and `agentexec jobs` see it,
// but this process is its owner: it ends when the job does, or when this
// process stops it.
type Attached struct {
	*Job
	done   chan struct{}
	cancel context.CancelFunc
	res    *runner.Result
	err    error
}

// Done is closed when the job has ended (or could not start).
func (a *Attached) Done() <-chan struct{} { return a.done }

// Result returns how the job ended; valid once Done is closed.
func (a *Attached) Result() (*runner.Result, error) { return a.res, a.err }

// Cancel ends the job (SIGTERM, grace, SIGKILL to its tree).
func (a *Attached) Cancel() { a.cancel() }

// StartAttached starts spec as a job owned by this process and returns once
// it runs. onOutput, if set, sees each chunk as it arrives, with its
// stream (stdout and stderr stay apart when separate is set; otherwise both
// arrive as stdout in exact order). StopAll ends attached jobs too.
func (m *Manager) StartAttached(spec Spec, separate bool, onOutput func(runner.Stream, []byte)) (*Attached, error) {
	if err := m.prepare(&spec); err != nil {
		return nil, err
	}
	job, err := m.newJobDir()
	if err != nil {
		return nil, err
	}
	if err := m.reserve(job.ID, spec.Conversation); err != nil {
		os.RemoveAll(job.Dir)
		return nil, err
	}
	p := &plan{Spec: spec, ID: job.ID, JobDir: job.Dir, Separate: separate}
	m.mu.Lock()
	if m.base == nil {
		m.base, m.stopBase = context.WithCancel(context.Background())
	}
	ctx, cancel := context.WithCancel(m.base)
	m.mu.Unlock()
	a := &Attached{Job: job, done: make(chan struct{}), cancel: cancel}
	started := make(chan int, 1)
	m.attached.Add(1)
	go func() {
		defer m.attached.Done()
		defer close(a.done)
		defer cancel()
		var last *Info
		a.res, last, a.err = runJobStreams(ctx, p, func(info *Info) {
			m.started(job.ID, info, nil, cancel)
			started <- info.Pid
		}, onOutput)
		if a.err != nil {
			started <- 0
			return
		}
		m.finish(job.ID, job.Dir, last)
	}()
	if pid := <-started; pid == 0 {
		<-a.done
		m.release(job.ID)
		os.RemoveAll(job.Dir)
		return nil, a.err
	} else {
		a.Pid = pid
	}
	return a, nil
}

// newJobDir creates a new job's private directory and empty output file.
func (m *Manager) newJobDir() (*Job, error) {
	if err := privateDir(m.stateDir()); err != nil {
		return nil, err
	}
	if err := privateDir(m.JobsDir()); err != nil {
		return nil, err
	}
	id := newID()
	dir := filepath.Join(m.JobsDir(), id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("jobs: cannot create the job's directory in %s: %w (is the jobs directory read-only or its disk full? set jobs.state_dir to a writable private directory)", m.JobsDir(), err)
	}
	job := &Job{ID: id, Dir: dir, OutputFile: filepath.Join(dir, "output")}
	f, err := os.OpenFile(job.OutputFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("jobs: cannot create the job's output file: %w", err)
	}
	f.Close()
	return job, nil
}

// attachedState is the part of Manager that tracks attached jobs.
type attachedState struct {
	base     context.Context
	stopBase context.CancelFunc
	attached sync.WaitGroup
}

// WaitAttached waits until every attached job has ended.
func (m *Manager) WaitAttached() { m.attached.Wait() }

// How an attached job's foreground wait ended.
const (
	// Finished: the job ended by itself within the wait.
	Finished = iota
	// Detached: it was still running after detachAfter; it goes on.
	Detached
	// TimedOut: timeout came first; the job was ended.
	TimedOut
	// Cancelled: ctx was done first; the job was ended.
	Cancelled
)

// Await waits for the job as a foreground call would: until it ends, until
// detachAfter (the job goes on in the background), or until timeout or
// ctx (the job is ended first). It returns which came first.
func (a *Attached) Await(ctx context.Context, detachAfter, timeout time.Duration) int {
	detach := time.NewTimer(detachAfter)
	defer detach.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case <-a.done:
		return Finished
	case <-detach.C:
		return Detached
	case <-ctx.Done():
		a.cancel()
		<-a.done
		return Cancelled
	case <-deadline.C:
		a.cancel()
		<-a.done
		return TimedOut
	}
}
