//go:build unix

package runner

import (
	"syscall"
)

// startAttached starts p in a new session (inside cg, if set) with a's
// descriptors as its standard streams and, when a.Terminal is set, a.Stdin
// as its controlling terminal.
func startAttached(p *plan, env []string, a Attach, cg *cgroup) (*child, error) {
	prepareHost()
	in := -1
	if a.Stdin != nil {
		in = int(a.Stdin.Fd())
	} else {
		fd, err := devNull()
		if err != nil {
			return nil, err
		}
		in = fd
	}
	out := a.Stdout.Fd()
	errFd := out
	if a.Stderr != nil {
		errFd = a.Stderr.Fd()
	}
	files := []uintptr{uintptr(in), out, errFd}
	for _, f := range p.extra {
		files = append(files, f.Fd())
	}
	attr := sysProcAttr(cg)
	if p.attr != nil {
		p.attr(attr) // a wrapper's namespaces
	}
	if a.Terminal {
		attr.Setctty = true
		attr.Ctty = 0 // the child's descriptor 0
	}
	var pid int
	var err error
	if p.start != nil {
		pid, err = p.start(p.dir, files, attr)
	} else {
		pid, err = syscall.ForkExec(p.path, p.argv, &syscall.ProcAttr{Dir: p.dir, Env: env, Files: files, Sys: attr})
	}
	if err != nil {
		return nil, err
	}
	return &child{pid: pid}, nil
}
