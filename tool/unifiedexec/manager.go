// Package unifiedexec is the pair of tools for interactive sessions that
// models are trained on ("unified exec"): exec_command starts a command
// (on pipes with stdin closed, or on a pseudo-terminal with tty=true) and
// waits for it to exit or for its yield time; a command still running is
// kept as a session whose id write_stdin takes to type into it and to poll
// its output. session_list and session_kill list and end the sessions of
// the calling conversation.
//
// Every answer starts with a header:
//
//	Wall time: 0.1 seconds
//	Process exited with code 0          (or: Process running with session ID 3f9a...)
//	Output:
//	<the output since the last read, readable for a model>
//
// Policy: the registry checks exec_command's cmd like bash's command. A
// write_stdin into a session whose foreground program is a shell is checked
// line by line with the same checker before it is written (a refused line
// is not written); input to any other program (a REPL, a password prompt)
// cannot be checked and is allowed when the session runs under a sandbox,
// and otherwise decided by ProgramInput (ask in the guarded profile).
package unifiedexec

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/terminal"
)

// Names of the tools.
const (
	ExecCommandName = "exec_command"
	WriteStdinName  = "write_stdin"
	ListName        = "session_list"
	KillName        = "session_kill"
)

// The contract's numbers.
const (
	DefaultYield      = 10 * time.Second
	DefaultWriteYield = 250 * time.Millisecond
	MinYield          = 250 * time.Millisecond
	MaxYield          = 30 * time.Second
	// An empty write_stdin (a poll) waits between these.
	MinPollYield = 5 * time.Second
	MaxPollYield = 300 * time.Second
	// DefaultMaxOutputTokens bounds the output of one answer; a token is
	// about BytesPerToken bytes.
	DefaultMaxOutputTokens = 10000
	BytesPerToken          = 4
	// Settle is how long a poll that saw new output waits for more before
	// it answers.
	Settle = 20 * time.Millisecond
	// MaxChars bounds the input of one write_stdin.
	MaxChars = 64 << 10
)

// Limits that a Manager applies when its fields are zero.
const (
	DefaultMaxLive            = 64
	DefaultMaxPerConversation = 16
	DefaultIdleTimeout        = 30 * time.Minute
)

// Manager holds the sessions of one server: at most MaxLive live sessions,
// MaxPerConversation per conversation, each ended after IdleTimeout
// without a read or a write. The zero value is ready to use; a Manager is
// safe for concurrent use. Close it to end every session.
type Manager struct {
	MaxLive            int
	MaxPerConversation int
	IdleTimeout        time.Duration
	// Audit receives session events (started, input, ended); nil means
	// none.
	Audit audit.Sink

	mu       sync.Mutex
	sessions map[string]*Entry
	reserved map[string]int // starts in progress, per conversation
	closed   bool
	ends     sync.WaitGroup
}

// Entry is one session and what the tools know about it.
type Entry struct {
	ID           string
	Conversation string
	Command      string
	Dir          string
	// Sandbox is the label of the sandbox profile the session runs under
	// ("off" when none); Sandboxed reports whether one applies.
	Sandbox   string
	Sandboxed bool
	Session   *terminal.Session
	ring      int // bytes of output the session keeps

	readMu sync.Mutex // one reader at a time: the filter's state
	filter terminal.Filter

	inMu    sync.Mutex
	pending []byte // a shell line typed but not yet ended
	inSeq   uint64

	timer *time.Timer
}

// limitError is a refusal by the limits, with the text the model sees.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

func (m *Manager) maxLive() int {
	if m.MaxLive > 0 {
		return m.MaxLive
	}
	return DefaultMaxLive
}

func (m *Manager) maxPerConversation() int {
	if m.MaxPerConversation > 0 {
		return m.MaxPerConversation
	}
	return DefaultMaxPerConversation
}

func (m *Manager) idle() time.Duration {
	if m.IdleTimeout > 0 {
		return m.IdleTimeout
	}
	return DefaultIdleTimeout
}

// live counts live sessions (all, and conv's), with starts in progress.
func (m *Manager) live(conv string) (all, mine int) {
	for _, e := range m.sessions {
		if e.Session.Result() == nil {
			all++
			if e.Conversation == conv {
				mine++
			}
		}
	}
	for c, n := range m.reserved {
		all += n
		if c == conv {
			mine += n
		}
	}
	return all, mine
}

// reserve counts a session about to start against the limits, or refuses
// with a text that lists the conversation's live sessions and says how to
// end them. release undoes it.
func (m *Manager) reserve(conv string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return &limitError{"refused: this server is shutting down; no new session can start"}
	}
	all, mine := m.live(conv)
	var why string
	switch {
	case mine >= m.maxPerConversation():
		why = fmt.Sprintf("this conversation already has %d live sessions (the limit is %d)", mine, m.maxPerConversation())
	case all >= m.maxLive():
		why = fmt.Sprintf("this server already has %d live sessions (the limit is %d)", all, m.maxLive())
	}
	if why == "" {
		if m.reserved == nil {
			m.reserved = map[string]int{}
		}
		m.reserved[conv]++
		return nil
	}
	return &limitError{"refused: " + why + ". " + m.describeLive(conv) +
		"End a session you no longer need with session_kill (session_id=...), or finish it with write_stdin " +
		`(for example chars "\u0003" to interrupt, "\u0004" or "exit\n" to end its input), then retry.`}
}

func (m *Manager) release(conv string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releaseLocked(conv)
}

func (m *Manager) releaseLocked(conv string) {
	if m.reserved[conv] <= 1 {
		delete(m.reserved, conv)
	} else {
		m.reserved[conv]--
	}
}

// describeLive lists conv's live sessions (never another conversation's).
func (m *Manager) describeLive(conv string) string {
	var lines []string
	for _, e := range m.sorted(conv) {
		if e.Session.Result() == nil {
			lines = append(lines, "- "+e.describe())
		}
	}
	if len(lines) == 0 {
		return "This conversation has no live session. "
	}
	return "Live sessions of this conversation:\n" + strings.Join(lines, "\n") + "\n"
}

func (e *Entry) describe() string {
	state := "running"
	if r := e.Session.Result(); r != nil {
		state = fmt.Sprintf("exited with code %d", exitCode(r.ExitCode, r.Signal))
	}
	mode := "pipes"
	if e.Session.TTY() {
		mode = "tty"
	}
	return fmt.Sprintf("%s: %s, %s, started %s ago, idle %s: %s", e.ID, state, mode,
		time.Since(e.Session.Started()).Round(time.Second), time.Since(e.Session.LastUse()).Round(time.Second), shorten(e.Command, 80))
}

func (m *Manager) sorted(conv string) []*Entry {
	var out []*Entry
	for _, e := range m.sessions {
		if e.Conversation == conv {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Session.Started().Before(out[j].Session.Started()) })
	return out
}

// add registers a started session under a new id, ends it after the idle
// timeout, and audits its end. It takes over the reservation reserve made
// for e's conversation in the same critical section, so that the session is
// never counted twice against the limits.
func (m *Manager) add(e *Entry) {
	var b [8]byte
	rand.Read(b[:])
	e.ID = hex.EncodeToString(b[:])
	idle := m.idle()
	e.timer = time.AfterFunc(time.Duration(1<<62), func() { m.expire(e, idle) })
	m.mu.Lock()
	if m.sessions == nil {
		m.sessions = map[string]*Entry{}
	}
	m.sessions[e.ID] = e
	m.releaseLocked(e.Conversation)
	closed := m.closed
	m.evictEnded()
	m.mu.Unlock()
	e.timer.Reset(idle)
	m.ends.Add(1)
	go func() {
		defer m.ends.Done()
		<-e.Session.Ended()
		// A write_stdin call records its input while it holds inMu: wait
		// for one in progress, so that the input that ended the program
		// (Ctrl-D, exit) is logged before the end.
		e.inMu.Lock()
		e.inMu.Unlock()
		m.emit(e, "session.ended", func(ev *audit.Event) {
			r := e.Session.Result()
			code := exitCode(r.ExitCode, r.Signal)
			ms := float64(r.Duration) / float64(time.Millisecond)
			ev.ExitCode, ev.Signal, ev.Outcome, ev.DurationMS, ev.StdoutBytes = &code, r.Signal, r.Outcome.String(), &ms, e.Session.Total()
		})
	}()
	if closed {
		e.Session.Close()
	}
}

// evictEnded forgets the oldest ended sessions nobody read when there are
// more than twice MaxLive records, so that unread ended sessions cannot
// hold memory without bound.
func (m *Manager) evictEnded() {
	if len(m.sessions) <= 2*m.maxLive() {
		return
	}
	var ended []*Entry
	for _, e := range m.sessions {
		if e.Session.Result() != nil {
			ended = append(ended, e)
		}
	}
	sort.Slice(ended, func(i, j int) bool { return ended[i].Session.LastUse().Before(ended[j].Session.LastUse()) })
	for _, e := range ended {
		if len(m.sessions) <= 2*m.maxLive() {
			break
		}
		delete(m.sessions, e.ID)
		e.timer.Stop()
	}
}

// expire ends e when it has not been used for idle, or checks again when
// it will have been.
func (m *Manager) expire(e *Entry, idle time.Duration) {
	left := idle - time.Since(e.Session.LastUse())
	if left > 0 {
		e.timer.Reset(left)
		return
	}
	m.mu.Lock()
	delete(m.sessions, e.ID)
	m.mu.Unlock()
	m.emit(e, "session.expired", func(ev *audit.Event) { ev.Reason = fmt.Sprintf("idle for %s", idle) })
	e.Session.Close()
}

// Get returns conv's session id; another conversation's session is not
// found.
func (m *Manager) Get(id, conv string) (*Entry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.sessions[id]
	if !ok || e.Conversation != conv {
		return nil, false
	}
	return e, true
}

// forget removes the record of a session (its process has ended).
func (m *Manager) forget(e *Entry) {
	m.mu.Lock()
	if m.sessions[e.ID] == e {
		delete(m.sessions, e.ID)
	}
	m.mu.Unlock()
	e.timer.Stop()
}

// List returns conv's sessions, oldest first.
func (m *Manager) List(conv string) []*Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sorted(conv)
}

// Kill ends conv's session id (its whole tree) and forgets it. It reports
// whether there was such a session.
func (m *Manager) Kill(id, conv string) (*Entry, bool) {
	e, ok := m.Get(id, conv)
	if !ok {
		return nil, false
	}
	e.Session.Close()
	m.forget(e)
	return e, true
}

// EndConversation ends every session of conv (the conversation is over).
func (m *Manager) EndConversation(conv string) {
	m.mu.Lock()
	list := m.sorted(conv)
	for _, e := range list {
		delete(m.sessions, e.ID)
	}
	m.mu.Unlock()
	closeAll(list)
}

// Close ends every session, refuses new ones, and returns once every
// session's tree has ended and its terminal is closed.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	var list []*Entry
	for _, e := range m.sessions {
		list = append(list, e)
	}
	m.sessions = nil
	m.mu.Unlock()
	closeAll(list)
	m.ends.Wait()
}

func closeAll(list []*Entry) {
	var wg sync.WaitGroup
	for _, e := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.timer.Stop()
			e.Session.Close()
		}()
	}
	wg.Wait()
}

// emit writes a session event.
func (m *Manager) emit(e *Entry, typ string, fill func(*audit.Event)) {
	if m.Audit == nil {
		return
	}
	ev := audit.Event{Time: time.Now().UTC(), Type: typ, Conversation: e.Conversation, Session: e.ID, Pid: e.Session.Pid(), Sandbox: e.Sandbox}
	if fill != nil {
		fill(&ev)
	}
	m.Audit.Write(ev)
}

// exitCode is the shell's convention: 128+n for a process killed by
// signal n.
func exitCode(code, signal int) int {
	if signal != 0 {
		return 128 + signal
	}
	return code
}

func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Live returns the number of live sessions (with starts in progress), for
// a gauge.
func (m *Manager) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	all, _ := m.live("")
	return all
}
