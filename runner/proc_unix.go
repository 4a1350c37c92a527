//go:build unix

package runner

import (
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// devNull is opened once and shared by every run whose stdin is empty.
var devNull = sync.OnceValues(func() (int, error) {
	return unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
})

// pipes are a run's standard streams. The child's ends are raw descriptors
// (never registered with the runtime poller, which costs syscalls); the
// parent's read ends are non-blocking *os.File values so that reads can
// have deadlines.
type pipes struct {
	childIn, childOut, childErr int
	ownChildIn                  bool
	stdin                       *os.File // nil when stdin is /dev/null
	stdout, stderr              *os.File
}

func openPipes(withStdin, merge bool) (*pipes, error) {
	p := &pipes{childIn: -1, childOut: -1, childErr: -1}
	fail := func(err error) (*pipes, error) {
		p.closeChildEnds()
		p.closeParentEnds()
		return nil, err
	}
	if withStdin {
		var fds [2]int
		if err := newPipe(&fds); err != nil {
			return fail(err)
		}
		p.childIn, p.ownChildIn = fds[0], true
		unix.SetNonblock(fds[1], true)
		p.stdin = os.NewFile(uintptr(fds[1]), "|stdin")
	} else {
		fd, err := devNull()
		if err != nil {
			return fail(err)
		}
		p.childIn = fd
	}
	for _, s := range []struct {
		child  *int
		parent **os.File
		name   string
	}{{&p.childOut, &p.stdout, "|stdout"}, {&p.childErr, &p.stderr, "|stderr"}} {
		if merge && s.child == &p.childErr {
			p.childErr = p.childOut // one pipe: the exact order of writes is kept
			break
		}
		var fds [2]int
		if err := newPipe(&fds); err != nil {
			return fail(err)
		}
		*s.child = fds[1]
		growPipe(fds[1])
		unix.SetNonblock(fds[0], true)
		*s.parent = os.NewFile(uintptr(fds[0]), s.name)
	}
	return p, nil
}

// closeChildEnds closes the descriptors the child inherited.
func (p *pipes) closeChildEnds() {
	if p.ownChildIn && p.childIn >= 0 {
		unix.Close(p.childIn)
	}
	for i, fd := range []int{p.childOut, p.childErr} {
		if fd >= 0 && (i == 0 || fd != p.childOut) {
			unix.Close(fd)
		}
	}
	p.childIn, p.childOut, p.childErr = -1, -1, -1
}

// closeParentEnds closes the parent's ends.
func (p *pipes) closeParentEnds() {
	for _, f := range []*os.File{p.stdin, p.stdout, p.stderr} {
		if f != nil {
			f.Close()
		}
	}
}

// child is a started main process.
type child struct{ pid int }

// startProcess starts p in a new session (inside cg, if set) with the pipes
// as its stdin, stdout and stderr.
func startProcess(p *plan, env []string, io *pipes, cg *cgroup) (*child, error) {
	prepareHost()
	files := []uintptr{uintptr(io.childIn), uintptr(io.childOut), uintptr(io.childErr)}
	for _, f := range p.extra {
		files = append(files, f.Fd())
	}
	sys := sysProcAttr(cg)
	if p.attr != nil {
		p.attr(sys)
	}
	var pid int
	var err error
	if p.start != nil {
		pid, err = p.start(p.dir, files, sys)
	} else {
		pid, err = syscall.ForkExec(p.path, p.argv, &syscall.ProcAttr{
			Dir:   p.dir,
			Env:   env,
			Files: files,
			Sys:   sys,
		})
	}
	if err != nil {
		return nil, err
	}
	return &child{pid: pid}, nil
}

// wait waits for the main process (and only it) to exit and reaps it.
func (c *child) wait() *exitStatus {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(c.pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if ws.Signaled() {
		return &exitStatus{code: -1, signal: int(ws.Signal())}
	}
	return &exitStatus{code: ws.ExitStatus()}
}

// signalGroup sends sig to every process in group pgid.
func signalGroup(pgid int, sig syscall.Signal) { syscall.Kill(-pgid, sig) }

// groupExists reports whether any process, zombies included, is in group
// pgid.
func groupExists(pgid int) bool { return syscall.Kill(-pgid, 0) != syscall.ESRCH }

// maxRest bounds what readRest takes in one call, so that a writer that is
// still alive and writing cannot keep it reading for ever.
const maxRest = 8 << 20

// readRest reads what is already in the pipe r without waiting and without
// looking at r's deadline, passing each chunk to put, and reports whether
// it reached EOF (no writer left).
func readRest(r *os.File, buf []byte, put func([]byte)) (eof bool) {
	rc, err := r.SyscallConn()
	if err != nil {
		return false
	}
	rc.Control(func(fd uintptr) {
		for total := 0; total < maxRest; {
			n, err := unix.Read(int(fd), buf)
			if n > 0 {
				put(buf[:n])
				total += n
				continue
			}
			if err == unix.EINTR {
				continue
			}
			eof = n == 0 && err == nil
			return
		}
	})
	return eof
}
