// Package audit records what agents ran: one JSON object per line, append
// only. Events carry the names of environment variables, never their values.
package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Event types written by the tool registry.
const (
	// Dispatched: the call passed validation, grants and policy and is
	// about to run.
	Dispatched = "tool.call.dispatched"
	// Denied: grants, policy or a person refused the call; nothing ran.
	Denied = "tool.call.denied"
	// Finished: the call ended (ran, failed to start, or was rejected as
	// invalid input before running).
	Finished = "tool.call.finished"
	// Egress: the sandbox's egress proxy allowed or refused a connection.
	Egress = "network.egress"
)

// Event is one line of the audit log. Zero fields are left out.
type Event struct {
	Time         time.Time `json:"time"`
	Type         string    `json:"event"`
	CallID       string    `json:"call_id,omitempty"`
	Tool         string    `json:"tool"`
	Conversation string    `json:"conversation,omitempty"`
	// TraceID is the OpenTelemetry trace the call was served in (32 hex
	// digits), when tracing is on: it joins this line to the trace.
	TraceID string `json:"trace_id,omitempty"`
	// What would run: a shell command, or an argv.
	Command    string   `json:"command,omitempty"`
	Argv       []string `json:"argv,omitempty"`
	Cwd        string   `json:"cwd,omitempty"`
	EnvKeys    []string `json:"env_keys,omitempty"`
	Background bool     `json:"background,omitempty"`
	// The policy's decision and the rule behind it.
	Decision string `json:"decision,omitempty"`
	Rule     string `json:"rule,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// How it ended.
	ErrorKind   string   `json:"error_kind,omitempty"`
	ExitCode    *int     `json:"exit_code,omitempty"`
	Signal      int      `json:"signal,omitempty"`
	Outcome     string   `json:"outcome,omitempty"`
	Pid         int      `json:"pid,omitempty"`
	DurationMS  *float64 `json:"duration_ms,omitempty"`
	StdoutBytes int64    `json:"stdout_bytes,omitempty"`
	StderrBytes int64    `json:"stderr_bytes,omitempty"`
	Truncated   bool     `json:"truncated,omitempty"`
	Sandbox     string   `json:"sandbox,omitempty"`
	// Interactive sessions (exec_command, write_stdin): the session's id
	// and the size of input typed into it.
	Session    string `json:"session,omitempty"`
	InputBytes int    `json:"input_bytes,omitempty"`
	// Network decisions of the egress proxy (type Egress): the
	// destination and the protocol, never a URL path or header.
	Host     string `json:"host,omitempty"`
	Port     int    `json:"port,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	Addr     string `json:"addr,omitempty"`
}

// Sink receives events. Write must be safe for concurrent use.
type Sink interface {
	Write(Event) error
}

// Discard is a Sink that drops every event.
var Discard Sink = discard{}

type discard struct{}

func (discard) Write(Event) error { return nil }

// Memory is a Sink that keeps events in memory, for tests and for hosts
// that forward events elsewhere.
type Memory struct {
	mu     sync.Mutex
	events []Event
}

// Write appends e.
func (m *Memory) Write(e Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, e)
	return nil
}

// Events returns a copy of the events written so far.
func (m *Memory) Events() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Event(nil), m.events...)
}

// Defaults for File.
const (
	DefaultMaxBytes = 10 << 20
	DefaultKeep     = 3
)

// File is a Sink writing JSON lines to a file, rotating it when it would
// grow past MaxBytes: path becomes path.1, path.1 becomes path.2, and so on,
// keeping Keep old files. Each event is written with one write call on a
// file opened for appending, so processes sharing a log do not interleave
// lines; rotation is serialised between them by a lock on the file where
// the platform has one.
type File struct {
	path     string
	maxBytes int64
	keep     int

	mu sync.Mutex
	f  *os.File
}

// OpenFile opens (creating it 0600, and its directory 0700) the log at
// path. maxBytes <= 0 means DefaultMaxBytes; keep < 0 means DefaultKeep.
func OpenFile(path string, maxBytes int64, keep int) (*File, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if keep < 0 {
		keep = DefaultKeep
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit: cannot create the log directory: %w", err)
	}
	a := &File{path: path, maxBytes: maxBytes, keep: keep}
	if err := a.open(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *File) open() error {
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: cannot open the log: %w", err)
	}
	a.f = f
	return nil
}

// Path returns the log's path.
func (a *File) Path() string { return a.path }

// Write appends e as one line, rotating first if the line would take the
// file past its size limit.
func (a *File) Write(e Event) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("audit: cannot encode event: %w", err)
	}
	line = append(line, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return errors.New("audit: log is closed")
	}
	unlock := lockFile(a.f)
	defer func() { unlock() }()
	if a.rotated() {
		// Another process rotated the file: follow it.
		a.f.Close()
		if err := a.open(); err != nil {
			a.f = nil
			return err
		}
		unlock()
		unlock = lockFile(a.f)
	}
	if fi, err := a.f.Stat(); err == nil && fi.Size() > 0 && fi.Size()+int64(len(line)) > a.maxBytes {
		if err := a.rotate(); err != nil {
			return err
		}
		unlock()
		unlock = lockFile(a.f)
	}
	if _, err := a.f.Write(line); err != nil {
		return fmt.Errorf("audit: cannot write the log: %w", err)
	}
	return nil
}

// rotated reports whether the file at path is no longer the one open.
func (a *File) rotated() bool {
	open, err1 := a.f.Stat()
	cur, err2 := os.Stat(a.path)
	return err1 == nil && (err2 != nil || !os.SameFile(open, cur))
}

func (a *File) rotate() error {
	if a.keep == 0 {
		os.Remove(a.path)
	} else {
		for i := a.keep - 1; i >= 1; i-- {
			os.Rename(a.path+"."+strconv.Itoa(i), a.path+"."+strconv.Itoa(i+1))
		}
		if err := os.Rename(a.path, a.path+".1"); err != nil {
			return fmt.Errorf("audit: cannot rotate the log: %w", err)
		}
	}
	a.f.Close()
	if err := a.open(); err != nil {
		a.f = nil
		return err
	}
	return nil
}

// Close flushes the log to stable storage (fsync: the last events of a
// server that stops survive the machine going down) and closes it; later
// writes fail.
func (a *File) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	a.f.Sync()
	err := a.f.Close()
	a.f = nil
	return err
}
