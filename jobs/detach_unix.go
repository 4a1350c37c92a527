//go:build unix

package jobs

import "syscall"

// detached puts the supervisor in a session of its own, so that signals to
// the starting process's group or terminal do not reach it.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
