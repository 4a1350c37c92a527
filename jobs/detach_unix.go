//go:build unix

package jobs

import (
	"os"
	"syscall"
)

// detached puts the supervisor in a session of its own, so that signals to
// the starting process's group or terminal do not reach it.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// terminate asks a supervisor to end its job.
func terminate(p *os.Process) { p.Signal(syscall.SIGTERM) }
