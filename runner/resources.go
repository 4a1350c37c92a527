package runner

import (
	"errors"
	"fmt"
	"syscall"
)

// resourceError recognises errors that mean a limit was reached and returns
// ErrResources with a sentence naming the limit and what to do, or nil.
func resourceError(err error) (kind error, detail string) {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return nil, ""
	}
	switch errno {
	case syscall.EMFILE:
		limit := "this process's limit"
		if n, ok := openFileLimit(); ok {
			limit = fmt.Sprintf("this process's limit of %d (RLIMIT_NOFILE)", n)
		}
		return ErrResources, "too many open files: " + limit + " was reached; raise it (ulimit -n) or run fewer commands at once"
	case syscall.ENFILE:
		return ErrResources, "too many open files in the system: the system-wide limit (fs.file-max) was reached"
	case syscall.EAGAIN:
		return ErrResources, "cannot create another process: the process limit (RLIMIT_NPROC, a cgroup's pids.max or kernel.threads-max) was reached"
	case syscall.ENOMEM:
		return ErrResources, "not enough memory to start the command"
	}
	return nil, ""
}
