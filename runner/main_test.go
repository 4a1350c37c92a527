//go:build linux

package runner

import (
	"context"
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	Main() // the watchdog WatchHost starts
	proctest.RunHelpers(map[string]proctest.Helper{
		"write":      helperWrite,
		"ignoreterm": helperIgnoreTerm,
		"strayfd":    helperStrayFD,
		"fdlimit":    helperFDLimit,
		"watched":    helperWatchedHost,
	})
	goleak.VerifyTestMain(m)
}

// pattern returns the byte at offset i of the helper's output: printable,
// with a period (89) that no power-of-two cut lines up with.
func pattern(i int64) byte { return byte('!' + i%89) }

// helperWrite writes args[0] bytes of pattern to stdout in 1 MiB writes.
func helperWrite(args []string) int {
	n, _ := strconv.ParseInt(args[0], 10, 64)
	buf := make([]byte, 1<<20+89)
	for i := range buf {
		buf[i] = pattern(int64(i))
	}
	for off := int64(0); off < n; {
		k := min(int64(1<<20), n-off)
		phase := off % 89
		if _, err := os.Stdout.Write(buf[phase : phase+k]); err != nil {
			return 1
		}
		off += k
	}
	return 0
}

// helperIgnoreTerm ignores SIGTERM, says it is ready, and sleeps.
func helperIgnoreTerm([]string) int {
	ignoreTerm()
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Hour)
	return 0
}

// helperStrayFD holds a descriptor without close-on-exec, as a host started
// by a careless parent would, and lists a command's descriptors.
func helperStrayFD([]string) int {
	if _, err := syscall.Dup(2); err != nil {
		return 1
	}
	res, err := Run(context.Background(), Spec{Command: "ls /proc/self/fd"})
	if err != nil {
		return 1
	}
	os.Stdout.Write(res.Stdout.Head)
	return 0
}

// helperFDLimit lowers its open-file limit to what it already has open and
// prints the error Run returns.
func helperFDLimit([]string) int {
	Run(context.Background(), Spec{Command: "true"}) // opens the shared /dev/null
	fds, _ := os.ReadDir("/proc/self/fd")
	lim := uint64(len(fds))
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: lim, Max: lim})
	_, err := Run(context.Background(), Spec{Command: "true"})
	if err == nil {
		os.Stdout.WriteString("started\n")
		return 0
	}
	if errors.Is(err, ErrResources) {
		os.Stdout.WriteString("ErrResources: ")
	}
	os.Stdout.WriteString(err.Error() + "\n")
	return 0
}
