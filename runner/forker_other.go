//go:build unix && !linux

package runner

import "syscall"

// forkExec starts a process; only Linux has a parent-death signal, so no
// thread needs to be kept for it here.
func forkExec(path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	return syscall.ForkExec(path, argv, attr)
}

// forkReleased has nothing to do where forkExec keeps no thread.
func forkReleased() {}
