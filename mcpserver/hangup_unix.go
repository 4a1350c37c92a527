//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package mcpserver

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// watchHangup calls gone when the reading end of f (a pipe or socket the
// server writes to) is closed, checking every half second until done is
// closed. Files that are not pipes or sockets are not watched.
func watchHangup(f *os.File, done <-chan struct{}, gone func()) {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	var fd int
	rc.Control(func(u uintptr) { fd = int(u) })
	for {
		select {
		case <-done:
			return
		default:
		}
		// POLLERR (a pipe) and POLLHUP (a socket) are reported whatever the
		// events asked for.
		fds := []unix.PollFd{{Fd: int32(fd), Events: 0}}
		n, err := unix.Poll(fds, 500)
		if err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			gone()
			return
		}
	}
}

// catchSIGPIPE makes a write to a closed stdout an EPIPE error rather than
// the end of the process (Go kills a program that writes to a broken
// stdout unless SIGPIPE is being caught). Caught, not ignored: commands
// started meanwhile still get the default disposition.
func catchSIGPIPE() (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGPIPE)
	return func() { signal.Stop(ch) }
}
