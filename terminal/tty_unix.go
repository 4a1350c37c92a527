//go:build unix

package terminal

import (
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal of the given size. The master is
// non-blocking and registered with the runtime's poller, so that reads and
// writes can have deadlines and Close interrupts them; the slave is for the
// child.
func openPTY(rows, cols uint16) (master, slave *os.File, name string, err error) {
	m, sl, err := pty.Open()
	if err != nil {
		return nil, nil, "", err
	}
	if err := pty.Setsize(sl, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		m.Close()
		sl.Close()
		return nil, nil, "", err
	}
	// pty.Open made the master blocking (os.File.Fd does): take a
	// non-blocking copy of it for the poller, and close the original.
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	m.Close()
	if err != nil {
		sl.Close()
		return nil, nil, "", err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		sl.Close()
		return nil, nil, "", err
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), sl, sl.Name(), nil
}
