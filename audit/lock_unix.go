//go:build unix

package audit

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive advisory lock on f and returns its release.
func lockFile(f *os.File) func() {
	fd := int(f.Fd())
	if unix.Flock(fd, unix.LOCK_EX) != nil {
		return func() {}
	}
	return func() { unix.Flock(fd, unix.LOCK_UN) }
}
