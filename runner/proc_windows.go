//go:build windows

package runner

import (
	"os"
	"syscall"
)

// pipes are a run's standard streams.
type pipes struct {
	childIn, childOut, childErr *os.File
	stdin, stdout, stderr       *os.File
}

func openPipes(withStdin, merge bool) (*pipes, error) {
	p := &pipes{}
	var err error
	if withStdin {
		if p.childIn, p.stdin, err = os.Pipe(); err != nil {
			return nil, err
		}
	} else if p.childIn, err = os.Open(os.DevNull); err != nil {
		return nil, err
	}
	if p.stdout, p.childOut, err = os.Pipe(); err != nil {
		p.closeChildEnds()
		p.closeParentEnds()
		return nil, err
	}
	if merge {
		p.childErr = p.childOut
		return p, nil
	}
	if p.stderr, p.childErr, err = os.Pipe(); err != nil {
		p.closeChildEnds()
		p.closeParentEnds()
		return nil, err
	}
	return p, nil
}

func (p *pipes) closeChildEnds() {
	for i, f := range []*os.File{p.childIn, p.childOut, p.childErr} {
		if f != nil && (i < 2 || f != p.childOut) {
			f.Close()
		}
	}
}

func (p *pipes) closeParentEnds() {
	for _, f := range []*os.File{p.stdin, p.stdout, p.stderr} {
		if f != nil {
			f.Close()
		}
	}
}

// child is a started main process.
type child struct {
	pid  int
	proc *os.Process
}

// startProcess starts p. Windows has no sessions or process groups in the
// POSIX sense, so only the main process can be ended.
func startProcess(p *plan, env []string, io *pipes, _ *cgroup) (*child, error) {
	proc, err := os.StartProcess(p.path, p.argv, &os.ProcAttr{Dir: p.dir, Env: env, Files: []*os.File{io.childIn, io.childOut, io.childErr}})
	if err != nil {
		return nil, err
	}
	return &child{pid: proc.Pid, proc: proc}, nil
}

func (c *child) wait() *exitStatus {
	st, err := c.proc.Wait()
	if err != nil {
		return &exitStatus{code: -1}
	}
	return &exitStatus{code: st.ExitCode()}
}

func signalGroup(pid int, sig syscall.Signal) { signalProcess(pid, sig) }

func signalProcess(pid int, _ syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

func groupExists(int) bool { return false }

// readRest is called when a read deadline passed. Windows pipes from
// os.Pipe have no deadlines, so reads end only at EOF or an error, and
// nothing is left to take here.
func readRest(*os.File, []byte, func([]byte)) (eof bool) { return false }
