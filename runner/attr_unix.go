//go:build unix && !linux

package runner

import "syscall"

// sysProcAttr returns the attributes every command starts with: a new
// session (there are no cgroups on this platform).
func sysProcAttr(*cgroup) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
