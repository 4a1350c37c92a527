package jobs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentexec/agentexec/sandbox"
)

// supervisorArg is the hidden first argument that makes Main run a
// supervisor.
const supervisorArg = "__agentexec_supervise"

// startTimeout bounds how long Start waits for the supervisor to report
// the job's pid.
const startTimeout = 30 * time.Second

// Manager starts jobs. The zero value uses DefaultStateDir and this
// program's own executable as the supervisor.
type Manager struct {
	// StateDir holds one private directory per job; empty means
	// DefaultStateDir().
	StateDir string
	// Executable is the program re-executed as the supervisor; empty
	// means os.Executable(). It must call Main first thing in main.
	Executable string
	// MaxLive caps the running jobs of one conversation; a new job beyond
	// it is refused with ErrTooManyJobs, which lists the running ones.
	// Zero means no cap. The cap is reserved atomically: concurrent
	// starts never exceed it.
	MaxLive int
	// MaxLiveTotal caps the running jobs this Manager started, in all
	// conversations (a server's limit); zero means no cap.
	MaxLiveTotal int
	// MaxOutput caps the output file of jobs whose Spec leaves it zero;
	// zero means DefaultMaxOutput.
	MaxOutput int64
	// OneShot is for hosts that exit right after starting jobs (a CLI
	// call): supervisors are not waited for, so no goroutine outlives the
	// call; they are re-parented when the host exits, and their jobs
	// outlive it. StopAll does not reach them. Without OneShot, every
	// supervisor watches this process (through a pipe whose only writer
	// this process holds) and ends its job within moments when this
	// process dies, even by SIGKILL.
	OneShot bool
	// Cgroups, if set, is a cgroup v2 directory under which each
	// supervisor opens its own runner.Cgroups pool, so that the job's
	// whole tree is held in a cgroup and ended with it (see
	// runner.UseCgroups). Where that fails the job runs without.
	Cgroups string

	reapers sync.WaitGroup // one per supervisor still running
	attachedState
	ownedState
	mu   sync.Mutex
	live map[*os.Process]bool // supervisors not yet reaped
	// lifeR and lifeW are the pipe supervisors watch: lifeW is held open
	// for the life of this process, so that lifeR reads EOF when it dies.
	lifeR, lifeW *os.File
}

// StopAll ends every job this Manager started that is still running: each
// supervisor gets SIGTERM, ends its job's tree (SIGTERM, grace, SIGKILL),
// appends the completion line and exits. StopAll waits for them until ctx
// is done, then kills the supervisors that are left. It is what a
// long-lived server calls when it shuts down.
func (m *Manager) StopAll(ctx context.Context) {
	m.mu.Lock()
	procs := make([]*os.Process, 0, len(m.live))
	for p := range m.live {
		procs = append(procs, p)
	}
	for _, p := range procs {
		terminate(p)
	}
	if m.stopBase != nil {
		m.stopBase()
	}
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.reapers.Wait(); m.attached.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		for _, p := range procs {
			p.Kill()
		}
		<-done
	}
	// Every supervisor is gone: the life pipe is no longer needed.
	m.mu.Lock()
	if m.lifeW != nil {
		m.lifeW.Close()
		m.lifeR.Close()
		m.lifeR, m.lifeW = nil, nil
	}
	m.mu.Unlock()
}

// WaitSupervisors waits until every supervisor this Manager started has
// exited (their jobs have ended). For hosts that shut down cleanly, and for
// tests.
func (m *Manager) WaitSupervisors() { m.reapers.Wait() }

// stateDir returns the manager's state directory.
func (m *Manager) stateDir() string {
	if m != nil && m.StateDir != "" {
		return m.StateDir
	}
	return DefaultStateDir()
}

// JobsDir returns the directory holding one directory per job.
func (m *Manager) JobsDir() string { return filepath.Join(m.stateDir(), "jobs") }

// plan is what the host hands the supervisor on its spec descriptor.
type plan struct {
	Spec   Spec   `json:"spec"`
	ID     string `json:"id"`
	JobDir string `json:"job_dir"`
	// Separate keeps stdout and stderr on two pipes (for callers that
	// need them apart); the file then gets both in arrival order.
	Separate bool `json:"separate,omitempty"`
	// Cgroups is Manager.Cgroups.
	Cgroups string `json:"cgroups,omitempty"`
	// Watch says the supervisor has the host's life pipe on lifeFD and
	// ends the job when it reads EOF there.
	Watch bool `json:"watch,omitempty"`
}

// report is what the supervisor sends back on its status descriptor: the
// job's pid once it started, or why it could not start.
type report struct {
	Pid   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
	Kind  string `json:"kind,omitempty"`
	// Info is the job's record: the first when it starts, the last when
	// it ends (the supervisor writes a second line then).
	Info *Info `json:"info,omitempty"`
}

// StartError says why a job could not start; nothing is running when Start
// returns one.
type StartError struct {
	// Kind is the runner's start-error kind ("program not found", ...)
	// when the command itself could not start; empty otherwise.
	Kind string
	Msg  string
}

// Error returns the message.
func (e *StartError) Error() string { return e.Msg }

// Start starts spec as a job and returns once its command is running. The
// job's directory (0700) holds its output file (0600) and its record.
func (m *Manager) Start(ctx context.Context, spec Spec) (*Job, error) {
	if strings.TrimSpace(spec.Command) == "" && len(spec.Argv) == 0 {
		return nil, &StartError{Msg: "jobs: empty command"}
	}
	if profile := os.Getenv(sandbox.EnvVar); profile != "" {
		return nil, &StartError{Msg: "jobs: background jobs cannot be started from inside a sandboxed command (the " + profile +
			" profile): everything a sandboxed command starts ends with it. Run the command in the foreground, or start the job from the outer agentexec"}
	}
	if err := m.prepare(&spec); err != nil {
		return nil, err
	}
	exe := m.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("jobs: cannot find this program to run the supervisor: %w", err)
		}
	}
	job, err := m.newJobDir()
	if err != nil {
		return nil, err
	}
	dir, id := job.Dir, job.ID
	if err := m.reserve(id, spec.Conversation); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	pid, err := m.launch(ctx, exe, &plan{Spec: spec, ID: id, JobDir: dir, Cgroups: m.Cgroups, Watch: !m.OneShot})
	if err != nil {
		m.release(id)
		os.RemoveAll(dir)
		return nil, err
	}
	if m.OneShot {
		m.release(id) // the record on disk counts it from now on
	}
	job.Pid = pid
	return job, nil
}

// lifePipe returns the read end of the pipe supervisors watch, creating
// it on first use.
func (m *Manager) lifePipe() (*os.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lifeR == nil {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		m.lifeR, m.lifeW = r, w
	}
	return m.lifeR, nil
}

// launch starts the supervisor and waits for its report.
func (m *Manager) launch(ctx context.Context, exe string, p *plan) (int, error) {
	specR, specW, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("jobs: %w", err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		return 0, fmt.Errorf("jobs: %w", err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, fmt.Errorf("jobs: %w", err)
	}
	defer null.Close()
	logf, err := os.OpenFile(filepath.Join(p.JobDir, "supervisor.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("jobs: %w", err)
	}
	defer logf.Close()
	files := []*os.File{null, logf, logf, specR, statusW}
	if p.Watch {
		life, err := m.lifePipe()
		if err != nil {
			specR.Close()
			specW.Close()
			statusR.Close()
			statusW.Close()
			return 0, fmt.Errorf("jobs: %w", err)
		}
		files = append(files, life)
	}
	proc, err := os.StartProcess(exe, []string{exe, supervisorArg}, &os.ProcAttr{
		Dir:   "/",
		Env:   append([]string{"PATH=" + os.Getenv("PATH")}, supervisorEnv...),
		Files: files,
		Sys:   detached(),
	})
	specR.Close()
	statusW.Close()
	if err != nil {
		specW.Close()
		statusR.Close()
		return 0, fmt.Errorf("jobs: cannot start the supervisor %s: %w", exe, err)
	}
	final := make(chan *Info, 1)
	if m.OneShot {
		proc.Release()
	} else {
		m.watch(proc, p.ID, p.JobDir, final)
	}

	go func() {
		json.NewEncoder(specW).Encode(p)
		specW.Close()
	}()
	type answer struct {
		r   report
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		var a answer
		br := bufio.NewReader(statusR)
		line, err := br.ReadBytes('\n')
		if len(line) == 0 {
			a.err = err
		} else {
			a.err = json.Unmarshal(line, &a.r)
		}
		if a.r.Pid != 0 {
			m.started(p.ID, a.r.Info, proc, nil)
		}
		ch <- a
		// The second line is the job's last record, sent when it ends.
		var last *Info
		if a.r.Pid != 0 && !m.OneShot {
			if line, _ := br.ReadBytes('\n'); len(line) > 0 {
				var r report
				if json.Unmarshal(line, &r) == nil {
					last = r.Info
				}
			}
		}
		statusR.Close()
		final <- last
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	var a answer
	select {
	case a = <-ch:
	case <-timer.C:
		proc.Kill()
		a = <-ch
		a.err = errors.New("timed out waiting for it")
	case <-ctx.Done():
		proc.Signal(os.Interrupt)
		a = <-ch
		if a.r.Pid == 0 {
			return 0, ctx.Err()
		}
	}
	switch {
	case a.err != nil && a.r.Pid == 0:
		if errors.Is(a.err, io.EOF) {
			a.err = errors.New("it exited without reporting; the program must call jobs.Main first thing in main")
		}
		log, _ := os.ReadFile(filepath.Join(p.JobDir, "supervisor.log"))
		msg := fmt.Sprintf("%v: %v", ErrNoSupervisor, a.err)
		if s := strings.TrimSpace(string(log)); s != "" {
			msg += " (its log: " + shorten(s, 300) + ")"
		}
		return 0, fmt.Errorf("%s: %w", msg, ErrNoSupervisor)
	case a.r.Error != "":
		return 0, &StartError{Kind: a.r.Kind, Msg: a.r.Error}
	}
	return a.r.Pid, nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// watch reaps a supervisor when it exits, records its job's end, and lets
// StopAll reach it.
func (m *Manager) watch(proc *os.Process, id, dir string, final <-chan *Info) {
	m.reapers.Add(1)
	m.mu.Lock()
	if m.live == nil {
		m.live = map[*os.Process]bool{}
	}
	m.live[proc] = true
	m.mu.Unlock()
	go func() { // reap it if this process lives longer than the job
		defer m.reapers.Done()
		proc.Wait()
		m.finish(id, dir, <-final)
		m.mu.Lock()
		delete(m.live, proc)
		m.mu.Unlock()
	}()
}

// prepare fills a spec's defaults.
func (m *Manager) prepare(spec *Spec) error {
	if spec.Lifetime <= 0 {
		spec.Lifetime = DefaultLifetime
	}
	if spec.MaxOutputBytes == 0 {
		spec.MaxOutputBytes = m.MaxOutput
	}
	return nil
}
