package jobs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Errors of the job queries; test with errors.Is.
var (
	// ErrNoJob: no job has that id.
	ErrNoJob = errors.New("no such job")
	// ErrOtherConversation: the job belongs to another conversation.
	ErrOtherConversation = errors.New("the job belongs to another conversation")
	// ErrTooManyJobs: the conversation has as many live jobs as allowed.
	ErrTooManyJobs = errors.New("too many running jobs")
)

// List returns the jobs in the state directory, newest first. A
// conversation other than "" limits the list to its jobs. A job recorded as
// running whose owner is gone is reported as "lost".
func (m *Manager) List(conversation string) ([]*Info, error) {
	entries, err := os.ReadDir(m.JobsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	var out []*Info
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		info, err := m.read(e.Name())
		if err != nil || (conversation != "" && info.Conversation != conversation) {
			continue
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Started.Equal(out[j].Started) {
			return out[i].Started.After(out[j].Started)
		}
		return out[i].ID > out[j].ID
	})
	return out, nil
}

// read loads a job's record and checks that a running job's owner lives.
func (m *Manager) read(id string) (*Info, error) {
	if id == "" || strings.ContainsAny(id, "/\\") || id == "." || id == ".." {
		return nil, fmt.Errorf("%w: %q", ErrNoJob, id)
	}
	dir := filepath.Join(m.JobsDir(), id)
	info, err := ReadInfo(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %q", ErrNoJob, id)
	}
	if err != nil {
		return nil, err
	}
	info.JobDir = dir
	if info.Running() && !alive(info.OwnerPid) {
		info.State = "lost"
	}
	return info, nil
}

// Get returns the job with that id, if conversation (when not "") owns it.
func (m *Manager) Get(id, conversation string) (*Info, error) {
	info, err := m.read(id)
	if err != nil {
		return nil, err
	}
	if conversation != "" && info.Conversation != conversation {
		return nil, fmt.Errorf("%w: %s", ErrOtherConversation, id)
	}
	return info, nil
}

// Page is a piece of a job's output.
type Page struct {
	// Data is the output read.
	Data []byte
	// Offset is where Data starts in the job's whole output stream (bytes
	// dropped to keep the file under its cap count); Next is where the
	// following page starts.
	Offset, Next int64
	// Lines says the page was read by line: FirstLine is the index of its
	// first line and NextLine that of the following page.
	Lines               bool
	FirstLine, NextLine int64
	// Dropped is how many bytes before Offset are gone (only when the
	// requested offset fell before the oldest kept output).
	Dropped int64
	// EOF says Data reaches the end of the output written so far; Ended
	// that the job has ended (so nothing more will come).
	EOF, Ended bool
	// Total is the size of the whole output so far.
	Total int64
}

// Limits of a page.
const (
	DefaultPageBytes = 64 << 10
	MaxPageBytes     = 1 << 20
	DefaultPageLines = 200
	MaxPageLines     = 10000
)

// ReadOutput reads a page of a job's output: limit bytes from byte offset,
// or, with lines, limit lines from line index offset. Memory stays bounded
// by the page, whatever the size of the output.
func (m *Manager) ReadOutput(id, conversation string, offset, limit int64, lines bool) (*Page, error) {
	info, err := m.Get(id, conversation)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(info.JobDir, "output"))
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// The record may be older than the file: re-read it after opening.
	if fresh, err := ReadInfo(info.JobDir); err == nil {
		info.Dropped, info.HeaderLen = fresh.Dropped, fresh.HeaderLen
	}
	total := info.Dropped + fi.Size() - info.HeaderLen
	p := &Page{Ended: !info.Running() && info.State != "lost", Total: total}
	if offset < 0 {
		offset = 0
	}
	if lines {
		return readLines(f, info, p, offset, limit)
	}
	if limit <= 0 {
		limit = DefaultPageBytes
	}
	limit = min(limit, MaxPageBytes)
	if offset < info.Dropped {
		p.Dropped = info.Dropped - offset
		offset = info.Dropped
	}
	p.Offset = offset
	if offset >= total {
		p.Next, p.EOF = total, true
		return p, nil
	}
	buf := make([]byte, min(limit, total-offset))
	n, err := f.ReadAt(buf, offset-info.Dropped+info.HeaderLen)
	if err != nil && err != io.EOF {
		return nil, err
	}
	p.Data = buf[:n]
	p.Next = offset + int64(n)
	p.EOF = p.Next >= total
	return p, nil
}

// readLines reads limit lines starting at line index first (of the output
// still in the file), streaming so that memory stays bounded by the page.
func readLines(f *os.File, info *Info, p *Page, first, limit int64) (*Page, error) {
	if limit <= 0 {
		limit = DefaultPageLines
	}
	limit = min(limit, MaxPageLines)
	p.Lines, p.FirstLine, p.NextLine = true, first, first
	if _, err := f.Seek(info.HeaderLen, io.SeekStart); err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(f, 64<<10)
	pos, line := info.Dropped, int64(0)
	started, full := false, false
	var data []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(chunk) > 0 {
			if line >= first+limit {
				break
			}
			if line >= first {
				if !started {
					started, p.Offset = true, pos
				}
				if len(data)+len(chunk) > MaxPageBytes {
					full = true
					break
				}
				data = append(data, chunk...)
			}
			pos += int64(len(chunk))
			if chunk[len(chunk)-1] == '\n' {
				line++
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			break
		}
	}
	if !started {
		p.Offset = pos
	}
	p.Data = data
	p.Next = p.Offset + int64(len(data))
	p.NextLine = first + int64(bytes.Count(data, []byte{'\n'}))
	if !full && len(data) > 0 && data[len(data)-1] != '\n' {
		p.NextLine++ // a last line still without its newline
	}
	p.EOF = p.Next >= p.Total
	return p, nil
}

// Wait waits until the job has ended or timeout has passed (zero: check
// once), and returns its record.
func (m *Manager) Wait(ctx context.Context, id, conversation string, timeout time.Duration) (*Info, error) {
	deadline := time.Now().Add(timeout)
	for {
		info, err := m.Get(id, conversation)
		if err != nil || !info.Running() || !time.Now().Before(deadline) {
			return info, err
		}
		select {
		case <-ctx.Done():
			return info, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitOutput waits until the job's output grows past offset or the job
// ends, for at most timeout.
func (m *Manager) WaitOutput(ctx context.Context, id, conversation string, offset int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		p, err := m.ReadOutput(id, conversation, offset, 1, false)
		if err != nil {
			return err
		}
		if len(p.Data) > 0 || p.Ended || p.Dropped > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Kill ends a running job: SIGTERM to its process group, SIGKILL after
// grace, then waits (up to grace plus 5 s) for its owner to record the
// end. A job that already ended is returned as it is.
func (m *Manager) Kill(ctx context.Context, id, conversation string, grace time.Duration) (*Info, error) {
	info, err := m.Get(id, conversation)
	if err != nil || !info.Running() && info.State != "lost" {
		return info, err
	}
	if grace <= 0 {
		grace = 2 * time.Second
	}
	signalGroup(info.Pid, false)
	if after, err := m.Wait(ctx, id, conversation, grace); err == nil && !after.Running() {
		return after, nil
	}
	signalGroup(info.Pid, true)
	return m.Wait(ctx, id, conversation, 5*time.Second)
}

// Remove deletes an ended job's directory.
func (m *Manager) Remove(id, conversation string) error {
	info, err := m.Get(id, conversation)
	if err != nil {
		return err
	}
	if info.Running() {
		return fmt.Errorf("jobs: job %s is still running; kill it first", id)
	}
	return os.RemoveAll(info.JobDir)
}

// checkLive refuses a new job when the conversation has max running jobs,
// listing them.
func (m *Manager) checkLive(conversation string, max int) error {
	if max <= 0 {
		return nil
	}
	all, _ := m.List(conversation)
	var live []string
	for _, j := range all {
		if j.Running() {
			live = append(live, fmt.Sprintf("%s (pid %d): %s", j.ID, j.Pid, shorten(j.Command, 60)))
		}
	}
	if len(live) < max {
		return nil
	}
	return fmt.Errorf("%w: this conversation already has %d running job(s), the most allowed; stop one first (job_kill):\n  %s",
		ErrTooManyJobs, len(live), strings.Join(live, "\n  "))
}
