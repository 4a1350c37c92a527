// Package terminal runs interactive sessions: a command on a
// pseudo-terminal (its own session, with the terminal as its controlling
// terminal) or on pipes, whose output is kept in a bounded ring with a
// read cursor and whose input can be written while it runs. It is the only
// package that uses github.com/creack/pty.
//
// A session's process tree has the runner's guarantees (runner.Start): its
// own session and process group, the run's cgroup where cgroups are in
// use, the subreaper sweep, the sandbox through Spec.Wrap, and the whole
// tree ended when the session is closed. The pseudo-terminal's master is
// closed when the session ends, so no pseudo-terminal outlives it.
//
// Output is kept raw (Session.Read); Filter and Readable render it for a
// model: line endings normalised, carriage-return rewrites collapsed and
// escape sequences removed.
package terminal

import (
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentexec/agentexec/runner"
)

// Defaults used when a Spec leaves a field zero.
const (
	// DefaultRingSize is how much of a session's newest output is kept.
	DefaultRingSize = 1 << 20
	// DefaultRows and DefaultCols are the terminal's size.
	DefaultRows = 40
	DefaultCols = 200
	// TrailingOutput bounds how long output is still read after the main
	// process exited (output its tree wrote just before).
	TrailingOutput = 150 * time.Millisecond
	// WriteTimeout bounds one write of input to a program that does not
	// read it.
	WriteTimeout = 5 * time.Second
)

// Errors of Write.
var (
	// ErrNoStdin: the session has no input: it runs on pipes with stdin
	// closed (Spec.TTY and Spec.PipeStdin both false).
	ErrNoStdin = errors.New("terminal: the session's stdin is closed")
	// ErrEnded: the session's process has exited.
	ErrEnded = errors.New("terminal: the session has ended")
	// ErrInputBlocked: the program did not read its input within
	// WriteTimeout; part of it may have been written.
	ErrInputBlocked = errors.New("terminal: the program is not reading its input")
	// ErrUnsupported: interactive sessions need a Unix system.
	ErrUnsupported = errors.New("terminal: interactive sessions are not supported on this system")
)

// Spec describes a session. Exactly one of Command and Argv is set.
type Spec struct {
	// Command is run as Shell -c Command (Shell -l -c Command with
	// Login). Shell empty means bash.
	Command string
	Shell   string
	Login   bool
	// Argv is run without a shell when Command is empty.
	Argv []string
	// Dir is the working directory; empty means the host's current one.
	Dir string
	// Env is the environment (nil: runner.SafeEnv()). Start adds
	// TERM=xterm-256color to a terminal session, and PAGER=cat,
	// GIT_PAGER=cat and NO_COLOR=1 to a pipe session.
	Env []string
	// TTY runs the command on a pseudo-terminal. Otherwise its stdout and
	// stderr are one pipe, and stdin is /dev/null unless PipeStdin is set.
	TTY bool
	// PipeStdin gives a pipe session a stdin pipe that Write writes to.
	PipeStdin bool
	// Rows and Cols size the terminal; zero means DefaultRows and
	// DefaultCols.
	Rows, Cols uint16
	// RingSize is how many of the newest output bytes are kept; zero
	// means DefaultRingSize.
	RingSize int
	// Grace is the time between SIGTERM and SIGKILL when the session is
	// closed; zero means the runner's default.
	Grace time.Duration
	// Wrap is the runner's hook (a sandbox trampoline).
	Wrap func(path string, argv, env []string) (*runner.Wrapped, error)
	// OnOutput, if set, sees every chunk of raw output as it arrives. It
	// must not block for long.
	OnOutput func(p []byte)
}

// Session is a running (or ended) interactive command. Its methods are
// safe for concurrent use.
type Session struct {
	proc    *runner.Process
	tty     bool
	ptsName string
	master  *os.File // terminal sessions: read and write
	out     *os.File // pipe sessions: stdout and stderr
	in      *os.File // pipe sessions with PipeStdin
	started time.Time

	mu       sync.Mutex
	ring     *Ring
	cursor   int64
	changed  chan struct{}
	res      *runner.Result
	onOutput func([]byte)

	writeMu    sync.Mutex
	readerDone chan struct{}
	ended      chan struct{}
	closeOnce  sync.Once
	lastUse    atomic.Int64
}

// setEnv returns env with key set to value (replacing earlier entries).
func setEnv(env []string, kv ...string) []string {
	out := make([]string, 0, len(env)+len(kv))
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		keep := true
		for _, s := range kv {
			if sk, _, _ := strings.Cut(s, "="); sk == k {
				keep = false
			}
		}
		if keep {
			out = append(out, e)
		}
	}
	return append(out, kv...)
}

// runnerSpec builds what the runner starts.
func (spec *Spec) runnerSpec() runner.Spec {
	env := spec.Env
	if env == nil {
		env = runner.SafeEnv()
	}
	if spec.TTY {
		env = setEnv(env, "TERM=xterm-256color")
	} else {
		env = setEnv(env, "PAGER=cat", "GIT_PAGER=cat", "NO_COLOR=1")
	}
	rs := runner.Spec{Dir: spec.Dir, Env: env, Grace: spec.Grace, Wrap: spec.Wrap}
	switch {
	case spec.Command != "" && spec.Login:
		shell := spec.Shell
		if shell == "" {
			shell = "bash"
		}
		rs.Argv = []string{shell, "-l", "-c", spec.Command}
	case spec.Command != "":
		rs.Command, rs.Shell = spec.Command, spec.Shell
	default:
		rs.Argv = spec.Argv
	}
	return rs
}

// Start starts the session. The error is a *runner.StartError when the
// command could not be started, or says why the terminal or pipes could
// not be made; nothing runs then.
func Start(spec Spec) (*Session, error) {
	rs := spec.runnerSpec()
	s := &Session{
		tty: spec.TTY, started: time.Now(), ring: NewRing(cmp(spec.RingSize, DefaultRingSize)),
		changed: make(chan struct{}), readerDone: make(chan struct{}), ended: make(chan struct{}), onOutput: spec.OnOutput,
	}
	s.lastUse.Store(time.Now().UnixNano())
	var src *os.File
	if spec.TTY {
		master, slave, name, err := openPTY(cmp(spec.Rows, DefaultRows), cmp(spec.Cols, DefaultCols))
		if err != nil {
			return nil, err
		}
		proc, err := runner.Start(rs, runner.Attach{Stdin: slave, Stdout: slave, Terminal: true})
		slave.Close()
		if err != nil {
			master.Close()
			return nil, err
		}
		s.proc, s.master, s.ptsName, src = proc, master, name, master
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		var ir, iw *os.File
		if spec.PipeStdin {
			if ir, iw, err = os.Pipe(); err != nil {
				r.Close()
				w.Close()
				return nil, err
			}
		}
		proc, err := runner.Start(rs, runner.Attach{Stdin: ir, Stdout: w})
		w.Close()
		if ir != nil {
			ir.Close()
		}
		if err != nil {
			r.Close()
			if iw != nil {
				iw.Close()
			}
			return nil, err
		}
		s.proc, s.out, s.in, src = proc, r, iw, r
	}
	go s.read(src)
	go s.monitor(src)
	return s, nil
}

func cmp[T int | uint16](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// read copies the output into the ring until EOF or an error (EIO once the
// last holder of the terminal's slave side is gone).
func (s *Session) read(f *os.File) {
	defer close(s.readerDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			s.mu.Lock()
			s.ring.Write(buf[:n])
			if s.onOutput != nil {
				s.onOutput(buf[:n])
			}
			close(s.changed)
			s.changed = make(chan struct{})
			s.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// monitor waits for the tree to end, reads the trailing output for at most
// TrailingOutput, closes every descriptor and marks the session ended.
func (s *Session) monitor(src *os.File) {
	<-s.proc.Done()
	t := time.NewTimer(TrailingOutput)
	select {
	case <-s.readerDone:
	case <-t.C:
	}
	t.Stop()
	s.writeMu.Lock()
	src.Close() // ends the reader if something still holds the other side
	if s.in != nil {
		s.in.Close()
	}
	s.writeMu.Unlock()
	<-s.readerDone
	s.mu.Lock()
	s.res = s.proc.Result()
	close(s.ended)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// Pid returns the main process's id (also its session and group id).
func (s *Session) Pid() int { return s.proc.Pid }

// TTY reports whether the session runs on a pseudo-terminal.
func (s *Session) TTY() bool { return s.tty }

// HasStdin reports whether Write can write to the session.
func (s *Session) HasStdin() bool { return s.tty || s.in != nil }

// PtsName returns the terminal's slave device ("/dev/pts/3"), or "" for a
// pipe session.
func (s *Session) PtsName() string { return s.ptsName }

// Started returns when the session started.
func (s *Session) Started() time.Time { return s.started }

// LastUse returns when the session was last read or written.
func (s *Session) LastUse() time.Time { return time.Unix(0, s.lastUse.Load()) }

func (s *Session) touch() { s.lastUse.Store(time.Now().UnixNano()) }

// Exited is closed once the main process has exited and the rest of its
// tree has been ended; Ended follows once the last output has been read
// (at most TrailingOutput later).
func (s *Session) Exited() <-chan struct{} { return s.proc.Done() }

// Ended is closed once the process tree has ended and its last output has
// been read; Result is then set.
func (s *Session) Ended() <-chan struct{} { return s.ended }

// Result returns how the session's main process ended, or nil while it
// runs.
func (s *Session) Result() *runner.Result {
	select {
	case <-s.ended:
		return s.res
	default:
		return nil
	}
}

// Changed returns a channel closed when new output arrives or the session
// ends, whichever is first after the call.
func (s *Session) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Unread returns how many output bytes arrived after the read cursor.
func (s *Session) Unread() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ring.Written() - s.cursor
}

// Read returns the raw output after the session's read cursor (at most
// limit bytes; limit <= 0 means all that is kept) and moves the cursor past
// it. dropped counts the bytes after the cursor that fell out of the ring
// before they could be read.
func (s *Session) Read(limit int) (data []byte, dropped int64) {
	s.touch()
	s.mu.Lock()
	defer s.mu.Unlock()
	data, s.cursor, dropped = s.ring.Read(nil, s.cursor, limit)
	return data, dropped
}

// ReadAt returns the raw output from cursor on (a position in the whole
// stream; see Ring.Read), without moving the session's cursor, and the
// position after it.
func (s *Session) ReadAt(cursor int64, limit int) (data []byte, next, dropped int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ring.Read(nil, cursor, limit)
}

// Total returns how many output bytes the session produced.
func (s *Session) Total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ring.Written()
}

// Write writes p to the session's input as it is: on a terminal, control
// characters have their usual effect ("\x03" interrupts, "\x04" ends the
// input). It returns ErrNoStdin for a pipe session without stdin, ErrEnded
// once the session has ended, and ErrInputBlocked when the program does
// not take the input within WriteTimeout.
func (s *Session) Write(p []byte) (int, error) {
	s.touch()
	if !s.HasStdin() {
		return 0, ErrNoStdin
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	select {
	case <-s.proc.Done():
		return 0, ErrEnded
	default:
	}
	w := s.master
	if w == nil {
		w = s.in
	}
	w.SetWriteDeadline(time.Now().Add(WriteTimeout))
	n, err := w.Write(p)
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return n, ErrInputBlocked
	case errors.Is(err, os.ErrClosed):
		return n, ErrEnded
	}
	select {
	case <-s.proc.Done():
		return n, ErrEnded
	default:
	}
	return n, err
}

// CloseStdin closes a pipe session's stdin (the program reads EOF); on a
// terminal, write "\x04" instead.
func (s *Session) CloseStdin() error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.in == nil {
		return ErrNoStdin
	}
	return s.in.Close()
}

// Close ends the session's whole process tree (SIGTERM, the grace period,
// SIGKILL), closes the terminal and returns once everything is over. It is
// safe to call more than once.
func (s *Session) Close() {
	s.closeOnce.Do(s.proc.Stop)
	<-s.ended
}

// EchoOff reports whether the terminal currently hides what is typed in a
// line-by-line read (a password prompt: echo off, canonical mode on).
// Programs that edit the line themselves (readline) also turn echo off,
// but with canonical mode off; they are not reported.
func (s *Session) EchoOff() bool {
	if !s.tty {
		return false
	}
	return echoOff(s.master)
}
