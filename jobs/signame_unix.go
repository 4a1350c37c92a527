//go:build unix

package jobs

import (
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName returns "SIGKILL" for 9, as Rust's ExitStatus prints it.
func signalName(sig int) string {
	if n := unix.SignalName(syscall.Signal(sig)); n != "" {
		return n
	}
	return "signal " + strconv.Itoa(sig)
}
