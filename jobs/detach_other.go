//go:build !unix

package jobs

import (
	"os"
	"syscall"
)

func detached() *syscall.SysProcAttr { return nil }

func terminate(p *os.Process) { p.Kill() }

// alive cannot tell on this platform; jobs are assumed alive.
func alive(pid int) bool { return pid > 0 }

// signalGroup kills the job's main process where groups are not available.
func signalGroup(pid int, _ bool) {
	if pid < 2 {
		return
	}
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}
