package terminal

import (
	"os"

	"golang.org/x/sys/unix"
)

// echoOff reads the terminal's modes through the master (which reports the
// slave's) without making it blocking.
func echoOff(master *os.File) bool {
	rc, err := master.SyscallConn()
	if err != nil {
		return false
	}
	var t *unix.Termios
	rc.Control(func(fd uintptr) { t, err = unix.IoctlGetTermios(int(fd), unix.TCGETS) })
	if err != nil || t == nil {
		return false
	}
	return t.Lflag&unix.ECHO == 0 && t.Lflag&unix.ICANON != 0
}
