//go:build unix

package jobs

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// detached puts the supervisor in a session of its own, so that signals to
// the starting process's group or terminal do not reach it.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// terminate asks a supervisor to end its job.
func terminate(p *os.Process) { p.Signal(syscall.SIGTERM) }

// alive reports whether process pid exists (and is not a zombie).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
			return false
		}
	}
	return true
}

// signalGroup sends SIGTERM (or SIGKILL) to process group pgid; never to
// pgid 0 or 1 (kill(0) and kill(-1) would reach this process's group or
// every process).
func signalGroup(pgid int, kill bool) {
	if pgid < 2 {
		return
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-pgid, sig)
}
