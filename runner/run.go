package runner

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentexec/agentexec/capture"
)

// readSize is the size of each read from an output pipe.
const readSize = 128 << 10

var readBufs = sync.Pool{New: func() any { b := make([]byte, readSize); return &b }}

var runSeq atomic.Uint64

// output collects both streams and their combination under one lock, so the
// combined stream keeps arrival order and OnOutput calls never overlap.
type output struct {
	mu       sync.Mutex
	stdout   *capture.Buffer
	stderr   *capture.Buffer
	combined *capture.Buffer
	onOutput func(Stream, []byte)
	keepTail bool   // keep the last tailMax bytes of both streams, for Wrapped.Finish
	tail     []byte // those bytes
}

// tailMax bounds what Wrapped.Finish gets of the output.
const tailMax = 8 << 10

func (o *output) write(s Stream, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s == Stdout {
		o.stdout.Write(p)
	} else {
		o.stderr.Write(p)
	}
	o.combined.Write(p)
	if o.keepTail {
		if len(p) >= tailMax {
			o.tail = append(o.tail[:0], p[len(p)-tailMax:]...)
		} else {
			if over := len(o.tail) + len(p) - tailMax; over > 0 {
				o.tail = append(o.tail[:0], o.tail[over:]...)
			}
			o.tail = append(o.tail, p...)
		}
	}
	if o.onOutput != nil {
		o.onOutput(s, p)
	}
}

// drain reads r into o until EOF or another error, and reports whether it
// saw EOF (every writer had closed the pipe). When r's read deadline
// passes first, drain still reads everything already in the pipe before it
// returns: a read deadline is checked before the pipe is, so a reader that
// was not scheduled in time (a busy CPU) would otherwise lose output that
// an exited process had fully written.
func (o *output) drain(r *os.File, s Stream) (eof bool) {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	for {
		n, err := r.Read(buf)
		if n > 0 {
			o.write(s, buf[:n])
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			return readRest(r, buf, func(p []byte) { o.write(s, p) })
		default:
			return errors.Is(err, io.EOF)
		}
	}
}

// Run starts the command spec describes, waits for its main process to
// exit, ends whatever it left running (unless spec.KeepLeftovers), and
// returns what happened. Timeout and ctx cancellation end the whole process
// tree: SIGTERM, then SIGKILL after the grace period.
//
// The error is a *StartError when the command could not be started (and
// then nothing ran), or ctx.Err() if ctx was done before the start. Once the
// command started, Run always returns a Result and a nil error; an exit code
// other than zero is part of the Result.
func Run(ctx context.Context, spec Spec) (*Result, error) {
	p, err := prepare(&spec)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := &output{onOutput: spec.OnOutput}
	out.stdout, _ = capture.New(spec.Stdout) // limits were validated by prepare
	out.stderr, _ = capture.New(spec.Stderr)
	out.combined, _ = capture.New(spec.Combined)

	pipes, err := openPipes(spec.Stdin != nil, spec.MergeOutput)
	if err != nil {
		if kind, detail := resourceError(err); kind != nil {
			return nil, &StartError{Kind: kind, Program: p.argv[0], Detail: "cannot create the output pipes: " + detail, Err: err}
		}
		return nil, &StartError{Kind: ErrUnsupported, Program: p.argv[0], Detail: "cannot create pipes", Err: err}
	}
	l, err := launch(&spec, p, func(p *plan, env []string, cg *cgroup) (*child, error) {
		return startProcess(p, env, pipes, cg)
	})
	pipes.closeChildEnds()
	if err != nil {
		pipes.closeParentEnds()
		return nil, err
	}
	defer l.done()
	wrapped := l.wrapped
	out.keepTail = wrapped != nil && wrapped.Finish != nil
	if spec.OnStart != nil {
		spec.OnStart(l.c.pid)
	}

	var wg sync.WaitGroup
	var outEOF, errEOF bool
	wg.Add(1)
	go func() { defer wg.Done(); outEOF = out.drain(pipes.stdout, Stdout) }()
	if pipes.stderr != nil {
		wg.Add(1)
		go func() { defer wg.Done(); errEOF = out.drain(pipes.stderr, Stderr) }()
	} else {
		errEOF = true
	}
	if pipes.stdin != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pipes.stdin.Write(spec.Stdin) // EPIPE when the command does not read: fine
			pipes.stdin.Close()
		}()
	}
	res := l.finish(ctx.Done(), spec.KeepLeftovers)
	p = l.plan

	if pipes.stdin != nil {
		pipes.stdin.Close() // unblocks a writer whose reader outlived the command
	}
	// Every process of the tree has exited now (or was deliberately kept),
	// so whatever they wrote is in the pipes, and the readers take all of
	// it even when the deadline passes before they run. The deadline only
	// bounds waiting for EOF from writers that are still alive: those kept
	// by KeepLeftovers, or a process that left the tracked tree while
	// holding the pipes. Output they write later is not captured, and the
	// result says so. When the end of the tree saw nothing left (its
	// cgroup empty, where there is one), the likeliest holder is a sibling
	// run's child between its fork and its exec (the kernel wakes a vfork
	// parent before it closes the child's close-on-exec descriptors),
	// which lets go as soon as it is scheduled. So the bound is then
	// settledDrain, long enough for a loaded machine to schedule it; only
	// an escapee that nothing tracked (no cgroup) makes a run wait for it.
	drain := p.drain
	if l.tree.empty && res.LeftoversKept == 0 {
		drain = max(drain, settledDrain)
	}
	deadline := time.Now().Add(drain)
	pipes.stdout.SetReadDeadline(deadline)
	if pipes.stderr != nil {
		pipes.stderr.SetReadDeadline(deadline)
	}
	wg.Wait()
	res.OutputCut = !outEOF || !errEOF
	pipes.stdout.Close()
	if pipes.stderr != nil {
		pipes.stderr.Close()
	}

	res.Stdout = out.stdout.Snapshot()
	res.Stderr = out.stderr.Snapshot()
	res.Combined = out.combined.Snapshot()
	if wrapped != nil && wrapped.Finish != nil {
		if note := wrapped.Finish(res, out.tail); note != "" {
			s := Stderr
			if spec.MergeOutput {
				s = Stdout
			}
			out.write(s, []byte(note))
			res.Stdout, res.Stderr, res.Combined = out.stdout.Snapshot(), out.stderr.Snapshot(), out.combined.Snapshot()
		}
	}
	return res, nil
}

// exitStatus is how the main process ended.
type exitStatus struct {
	code   int // -1 when killed by a signal
	signal int
}

// setStatus copies the main process's exit status into res.
func setStatus(res *Result, st *exitStatus) {
	res.ExitCode, res.Signal = st.code, st.signal
}

// startError turns an error from starting the process into a StartError,
// looking at the program again to say precisely what was wrong with it.
func startError(p *plan, err error) error {
	if _, cerr := checkExecutable(p.argv[0], p.path); cerr != nil {
		return cerr
	}
	if kind, detail := resourceError(err); kind != nil {
		return &StartError{Kind: kind, Program: p.argv[0], Dir: p.dir, Detail: detail, Err: err}
	}
	kind := ErrUnsupported
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EACCES, syscall.EPERM:
			kind = ErrPermission
		case syscall.ENOEXEC, syscall.EISDIR:
			kind = ErrNotExecutable
		case syscall.ENOENT:
			kind = ErrNotFound
			if p.dir != "" {
				if _, derr := os.Stat(p.dir); derr != nil {
					kind = ErrBadDir
				}
			}
		case syscall.ENOTDIR:
			kind = ErrBadDir
		}
	}
	return &StartError{Kind: kind, Program: p.argv[0], Dir: p.dir, Err: err}
}
