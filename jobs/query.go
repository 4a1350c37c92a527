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
	"unicode/utf8"
)

// Errors of the job queries; test with errors.Is.
var (
	// ErrNoJob: no job has that id.
	ErrNoJob = errors.New("no such job")
	// ErrOtherConversation: the job belongs to another conversation.
	ErrOtherConversation = errors.New("the job belongs to another conversation")
	// ErrTooManyJobs: the conversation (or the server) has as many live
	// jobs as allowed.
	ErrTooManyJobs = errors.New("too many running jobs")
	// ErrNotTheJob: the process a record names is not (or no longer
	// provably) the job's, so it was not signalled.
	ErrNotTheJob = errors.New("the process is not the job's")
)

// List returns the jobs in the state directory, newest first. A
// conversation other than "" limits the list to its jobs. A job recorded as
// running whose owner is gone is reported as "lost".
//
// Records not owned by this user (planted by someone else) are ignored.
// The jobs this Manager started are listed from its memory when their
// directory is gone or unreadable; such a listing has no error.
func (m *Manager) List(conversation string) ([]*Info, error) {
	disk, err := m.listDisk(conversation)
	seen := map[string]bool{}
	var out []*Info
	for _, info := range disk {
		seen[info.ID] = true
		merged, _ := m.merge(info.ID, info, nil)
		out = append(out, merged)
	}
	out = append(out, m.memoryOnly(conversation, seen)...)
	if err != nil && len(out) > 0 {
		err = nil
	}
	sortInfos(out)
	return out, err
}

// listDisk reads the records in the jobs directory.
func (m *Manager) listDisk(conversation string) ([]*Info, error) {
	dir := m.JobsDir()
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("jobs: %s is not a directory; remove it", dir)
	}
	if err := checkOwner(fi); err != nil {
		return nil, fmt.Errorf("jobs: ignoring the jobs directory %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
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
	return out, nil
}

func sortInfos(out []*Info) {
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Started.Equal(out[j].Started) {
			return out[i].Started.After(out[j].Started)
		}
		return out[i].ID > out[j].ID
	})
}

// read loads a job's record and checks that a running job's owner lives.
func (m *Manager) read(id string) (*Info, error) {
	if id == "" || strings.ContainsAny(id, "/\\") || id == "." || id == ".." {
		return nil, fmt.Errorf("%w: %q", ErrNoJob, id)
	}
	dir := filepath.Join(m.JobsDir(), id)
	if err := ownedByMe(dir, true); err != nil {
		return nil, err
	}
	if err := ownedByMe(filepath.Join(dir, "job.json"), false); err != nil {
		return nil, err
	}
	info, err := ReadInfo(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %q", ErrNoJob, id)
	}
	if err != nil {
		return nil, err
	}
	if info.ID != id {
		return nil, fmt.Errorf("%w: %q (its record names another job, %q)", ErrNoJob, id, info.ID)
	}
	info.JobDir = dir
	if info.Running() && !ownerAlive(info) {
		// The owner may have written its last record and exited between
		// the read above and this check: the record read after its exit
		// is the one that counts.
		if again, err := ReadInfo(dir); err == nil && again.ID == id && !again.Running() {
			again.JobDir = dir
			return again, nil
		}
		info.State = "lost"
	}
	return info, nil
}

// ownedByMe checks that path is a directory (or a regular file) of this
// user, not a link: another user's record is never believed.
func ownedByMe(path string, dir bool) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %q", ErrNoJob, filepath.Base(filepath.Dir(path)))
	}
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	if (dir && !fi.IsDir()) || (!dir && !fi.Mode().IsRegular()) {
		return fmt.Errorf("%w: %s is not a plain %s; it is ignored", ErrNoJob, path, map[bool]string{true: "directory", false: "file"}[dir])
	}
	if err := checkOwner(fi); err != nil {
		return fmt.Errorf("%w: %s is ignored: %v", ErrNoJob, path, err)
	}
	return nil
}

// ownerAlive reports whether the process that watches a job (its
// supervisor, or the host of an attached job) still runs: the same pid
// and, where the record has it, the same start time.
func ownerAlive(info *Info) bool {
	if !alive(info.OwnerPid) {
		return false
	}
	if info.OwnerStart != 0 {
		if st, ok := procStart(info.OwnerPid); ok && st != info.OwnerStart {
			return false
		}
	}
	return true
}

// verifyProcess checks, before a signal, that the record's pid still names
// the job's process group: never pid 0, 1 or a negative pid, and, where
// the platform tells, the start time recorded when the job started.
func verifyProcess(info *Info) error {
	if info.Pid < 2 {
		return fmt.Errorf("%w: the record names pid %d, which is never a job's; nothing was signalled", ErrNotTheJob, info.Pid)
	}
	if !verifiable {
		return nil
	}
	st, ok := procStart(info.Pid)
	if !ok {
		return fmt.Errorf("%w: process %d is gone", ErrNotTheJob, info.Pid)
	}
	if info.PidStart == 0 || st != info.PidStart {
		return fmt.Errorf("%w: process %d is not the one the job started (its start time differs from the record's); nothing was signalled", ErrNotTheJob, info.Pid)
	}
	if !isGroupLeader(info.Pid) {
		return fmt.Errorf("%w: process %d no longer leads the job's process group; nothing was signalled", ErrNotTheJob, info.Pid)
	}
	return nil
}

// Get returns the job with that id, if conversation (when not "") owns it.
func (m *Manager) Get(id, conversation string) (*Info, error) {
	info, err := m.read(id)
	info, err = m.merge(id, info, err)
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
		if info.Note != "" {
			return nil, fmt.Errorf("jobs: the output of job %s cannot be read: %s", id, info.Note)
		}
		return nil, fmt.Errorf("jobs: the output of job %s cannot be read: %w", id, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// The record may be older than the file: re-read it after opening.
	if fresh, err := ReadInfo(info.JobDir); err == nil && fresh.ID == id {
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
	if offset >= total {
		p.Offset, p.Next, p.EOF = offset, total, true
		return p, nil
	}
	// A page never starts or ends inside a UTF-8 character: an offset in
	// the middle of one moves back to its first byte (Offset says so), and
	// a page cut by its limit, or by the end of a running job's output so
	// far, ends before a character it would split.
	const back = utf8.UTFMax - 1
	lead := min(int64(back), offset-info.Dropped)
	buf := make([]byte, lead+min(max(limit, utf8.UTFMax), total-offset))
	n, err := f.ReadAt(buf, offset-lead-info.Dropped+info.HeaderLen)
	if err != nil && err != io.EOF {
		return nil, err
	}
	buf = buf[:n]
	start := lead
	if start > int64(len(buf)) {
		start = int64(len(buf))
	}
	if start < int64(len(buf)) && !utf8.RuneStart(buf[start]) {
		for i := start - 1; i >= 0 && start-i <= back; i-- {
			if utf8.RuneStart(buf[i]) {
				if r, size := utf8.DecodeRune(buf[i:]); r != utf8.RuneError && int64(size) > start-i {
					start = i
				}
				break
			}
		}
	}
	all := buf[start:]
	data := all[:min(int64(len(all)), limit)]
	p.Offset = offset - (lead - start)
	end := p.Offset + int64(len(data))
	if end < total || !p.Ended {
		data = data[:completeRunes(data)]
		if len(data) == 0 && utf8.FullRune(all) {
			// A limit smaller than the first character: the page holds
			// that one character.
			_, size := utf8.DecodeRune(all)
			data = all[:size]
			end = p.Offset + int64(size)
		}
	}
	p.Data = data
	p.Next = p.Offset + int64(len(data))
	// Bytes held back at the very end (an unfinished character) are not
	// more to read yet.
	p.EOF = p.Next >= total || end >= total
	return p, nil
}

// completeRunes returns the length of b without a UTF-8 character cut off
// at its end (b itself when it ends with a whole one).
func completeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && len(b)-i <= utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			return len(b)
		}
	}
	return len(b)
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
		var ended <-chan struct{}
		if _, o, ok := m.remembered(id); ok {
			ended = o.ended
		}
		select {
		case <-ctx.Done():
			return info, ctx.Err()
		case <-ended:
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
//
// A job is signalled only after its process is verified to be the job's
// (see ErrNotTheJob); a lost job (its owner died) is ended the same way and
// recorded as "orphaned". Jobs this Manager started are waited for through
// its memory, so a deleted or read-only jobs directory does not hide their
// end.
func (m *Manager) Kill(ctx context.Context, id, conversation string, grace time.Duration) (*Info, error) {
	info, err := m.Get(id, conversation)
	if err != nil || !info.Running() && info.State != "lost" {
		return info, err
	}
	if grace <= 0 {
		grace = 2 * time.Second
	}
	if err := verifyProcess(info); err != nil {
		if _, exists := procStart(info.Pid); info.State == "lost" && info.Pid >= 2 && verifiable && !exists {
			m.markOrphaned(info, "its process was already gone")
			return m.Get(id, conversation)
		}
		return info, fmt.Errorf("jobs: job %s: %w", id, err)
	}
	signalGroup(info.Pid, false)
	if info.State == "lost" {
		gone := waitGone(ctx, info, grace)
		if !gone {
			signalGroup(info.Pid, true)
			waitGone(ctx, info, 5*time.Second)
		}
		m.markOrphaned(info, "")
		return m.Get(id, conversation)
	}
	if after, err := m.Wait(ctx, id, conversation, grace); err == nil && !after.Running() {
		return after, nil
	}
	if verifyProcess(info) == nil {
		signalGroup(info.Pid, true)
	}
	return m.Wait(ctx, id, conversation, 5*time.Second)
}

// waitGone waits up to d for a job's process to be gone.
func waitGone(ctx context.Context, info *Info, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if verifyProcess(info) != nil {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// markOrphaned records that a lost job was ended by someone other than its
// owner (which had died), with a completion line saying so.
func (m *Manager) markOrphaned(info *Info, note string) {
	info.State = "orphaned"
	info.Ended = time.Now().UTC()
	line := "\n\n[background process failed: stopped because the agentexec process that owned it had died]\n"
	if note != "" {
		line = "\n\n[background process ended: the agentexec process that owned it had died, and " + note + "]\n"
	}
	if f, err := os.OpenFile(filepath.Join(info.JobDir, "output"), os.O_WRONLY|os.O_APPEND, 0); err == nil {
		f.WriteString(line)
		f.Close()
	}
	rec := *info
	rec.JobDir, rec.Note = "", ""
	writeInfo(info.JobDir, &rec)
}

// EndOrphans ends the jobs whose owner died (a server or supervisor
// killed with SIGKILL), after verifying that each process is still the
// job's, and records them as "orphaned". A server calls it when it starts.
// It returns the ids of the jobs it ended or marked.
func (m *Manager) EndOrphans(ctx context.Context) []string {
	list, _ := m.listDisk("")
	var ended []string
	for _, info := range list {
		if info.State != "lost" {
			continue
		}
		if _, err := m.Kill(ctx, info.ID, "", time.Second); err == nil {
			ended = append(ended, info.ID)
		}
	}
	return ended
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
	m.mu.Lock()
	delete(m.own, id)
	m.mu.Unlock()
	return os.RemoveAll(info.JobDir)
}
