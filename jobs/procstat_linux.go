package jobs

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// procStart returns when process pid started (field 22 of /proc/PID/stat,
// clock ticks after boot): with the pid, it names one process for the
// life of the machine, where a pid alone may be reused.
func procStart(pid int) (uint64, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	// After ") " come the fields from the third (state) on; start time is
	// the 22nd.
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(f[19]), 10, 64)
	return n, err == nil
}

// verifiable reports whether this platform can tell a process by its start
// time.
const verifiable = true

// isGroupLeader reports whether pid leads its own process group.
func isGroupLeader(pid int) bool {
	pg, err := syscall.Getpgid(pid)
	return err == nil && pg == pid
}
