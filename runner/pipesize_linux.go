package runner

import "golang.org/x/sys/unix"

// pipeSize is the capacity asked for output pipes: larger than the 64 KiB
// default so a fast writer wakes the reader less often.
const pipeSize = 1 << 20

// growPipe raises a pipe's capacity; failure (a per-user limit) is harmless.
func growPipe(fd int) { unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, pipeSize) }

// newPipe creates a pipe whose ends are closed on exec.
func newPipe(fds *[2]int) error { return unix.Pipe2(fds[:], unix.O_CLOEXEC) }
