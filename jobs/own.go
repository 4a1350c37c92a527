package jobs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// owned is what a Manager remembers of a job it started: the record as its
// supervisor (or, for an attached job, this process) last reported it.
// While the Manager's process runs, this memory is authoritative: a job
// directory deleted or made unwritable under a running server does not
// make its jobs invisible, unkillable or wrongly "running".
type owned struct {
	info  Info
	conv  string
	proc  *os.Process // the supervisor; nil for an attached job
	stop  func()      // ends an attached job
	ended chan struct{}
	done  bool
}

// ownedState is the part of Manager that remembers its jobs.
type ownedState struct {
	own map[string]*owned
}

// reserve counts a job about to start against the caps, atomically with
// every other start by this Manager: MaxLive for its conversation (its
// jobs in memory, plus those other processes recorded in the state
// directory), MaxLiveTotal for all of this Manager's jobs.
func (m *Manager) reserve(id, conv string) error {
	var others []*Info
	if m.MaxLive > 0 {
		others, _ = m.listDisk(conv) // before the lock: the disk is slow
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.own == nil {
		m.own = map[string]*owned{}
	}
	var mine, all []string
	for oid, o := range m.own {
		if o.done {
			continue
		}
		line := fmt.Sprintf("%s (pid %d): %s", oid, o.info.Pid, shorten(o.info.Command, 60))
		if o.info.Pid == 0 {
			line = oid + ": starting"
		}
		all = append(all, line)
		if o.conv == conv {
			mine = append(mine, line)
		}
	}
	for _, j := range others {
		if _, ok := m.own[j.ID]; !ok && j.Running() {
			mine = append(mine, fmt.Sprintf("%s (pid %d): %s", j.ID, j.Pid, shorten(j.Command, 60)))
		}
	}
	if m.MaxLive > 0 && len(mine) >= m.MaxLive {
		return fmt.Errorf("%w: this conversation already has %d running job(s), the most allowed (jobs.max_live); stop one first (job_kill):\n  %s",
			ErrTooManyJobs, len(mine), strings.Join(sortedLines(mine), "\n  "))
	}
	if m.MaxLiveTotal > 0 && len(all) >= m.MaxLiveTotal {
		return fmt.Errorf("%w: this agentexec server already runs %d job(s) for all its clients, the most allowed (jobs.max_live_total); stop one of yours (job_kill) or try again later",
			ErrTooManyJobs, len(all))
	}
	m.own[id] = &owned{conv: conv, ended: make(chan struct{}), info: Info{ID: id, Conversation: conv, State: "running"}}
	return nil
}

func sortedLines(l []string) []string {
	out := append([]string(nil), l...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// release forgets a reservation whose job did not start.
func (m *Manager) release(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.own, id)
}

// started records the job's first record (its pid), and how to stop it.
func (m *Manager) started(id string, info *Info, proc *os.Process, stop func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o := m.own[id]; o != nil {
		if info != nil {
			o.info = *info
		}
		o.proc, o.stop = proc, stop
	}
}

// finish records a job's end: final is its last record as its owner
// reported it, or nil when the owner died without reporting (then the
// directory's record is read, and failing that the job is "lost").
func (m *Manager) finish(id, dir string, final *Info) {
	if final == nil {
		if disk, err := ReadInfo(dir); err == nil && !disk.Running() {
			final = disk
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.own[id]
	if o == nil || o.done {
		return
	}
	if final != nil {
		o.info = *final
	} else {
		o.info.State = "lost"
		o.info.Note = "its supervisor ended without saying how the job ended"
	}
	if o.info.Ended.IsZero() {
		o.info.Ended = time.Now().UTC()
	}
	o.done = true
	close(o.ended)
}

// remembered returns a copy of what this Manager knows of job id, its end
// channel, and whether it knows the job at all.
func (m *Manager) remembered(id string) (Info, *owned, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.own[id]
	if !ok || o.info.Pid == 0 {
		return Info{}, nil, false
	}
	return o.info, o, true
}

// merge reconciles the directory's record of a job this Manager started
// (disk, or the error reading it) with its memory.
func (m *Manager) merge(id string, disk *Info, err error) (*Info, error) {
	mem, o, ok := m.remembered(id)
	if !ok {
		return disk, err
	}
	dir := filepath.Join(m.JobsDir(), id)
	mem.JobDir = dir
	m.mu.Lock()
	done := o.done
	m.mu.Unlock()
	switch {
	case err != nil:
		why := "is gone"
		if !errors.Is(err, os.ErrNotExist) {
			why = "cannot be read (" + err.Error() + ")"
		}
		mem.Note = fmt.Sprintf("the job's record %s %s; this is agentexec's own memory of the job", filepath.Join(dir, "job.json"), why)
		if _, serr := os.Stat(dir); serr != nil {
			mem.Note = fmt.Sprintf("the job's directory %s is gone (deleted while agentexec ran), so its output is lost; this is agentexec's own memory of the job", dir)
		}
		return &mem, nil
	case done && (disk.Running() || disk.State == "lost"):
		// The owner ended but could not write its last record.
		mem.Note = fmt.Sprintf("the job's record in %s could not be updated when it ended (is the directory read-only?); this is agentexec's own memory of the job", dir)
		mem.Dropped, mem.HeaderLen = disk.Dropped, disk.HeaderLen
		return &mem, nil
	case !done && disk.State == "lost":
		disk.State = "running" // its owner is this process's supervisor, alive
	}
	return disk, nil
}

// memoryOnly returns the jobs of conv (all for "") this Manager knows of
// whose id is not in seen.
func (m *Manager) memoryOnly(conv string, seen map[string]bool) []*Info {
	m.mu.Lock()
	var ids []string
	for id, o := range m.own {
		if !seen[id] && o.info.Pid != 0 && (conv == "" || o.conv == conv) {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	var out []*Info
	for _, id := range ids {
		if info, err := m.merge(id, nil, os.ErrNotExist); err == nil && info != nil {
			out = append(out, info)
		}
	}
	return out
}

// Live returns the number of jobs this Manager started (or is starting)
// that have not ended, for a gauge. It does not read the state directory.
func (m *Manager) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, o := range m.own {
		if !o.done {
			n++
		}
	}
	return n
}
