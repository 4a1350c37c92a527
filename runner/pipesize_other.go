//go:build unix && !linux

package runner

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// growPipe is a no-op where pipe capacity cannot be changed.
func growPipe(int) {}

// newPipe creates a pipe whose ends are closed on exec; ForkLock keeps a
// concurrent fork from inheriting them in between.
func newPipe(fds *[2]int) error {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	if err := unix.Pipe(fds[:]); err != nil {
		return err
	}
	unix.CloseOnExec(fds[0])
	unix.CloseOnExec(fds[1])
	return nil
}
