// Package proctest holds helpers for tests that start real processes: the
// helper-process pattern (the test binary re-executing itself as an odd
// child), finding processes that survived a test, and counting open file
// descriptors.
package proctest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// HelperVar is the environment variable that selects a helper in the
// re-executed test binary.
const HelperVar = "AGENTEXEC_TEST_HELPER"

// Helper is the body of a helper process. It gets the arguments after the
// helper's name and returns the process exit code.
type Helper func(args []string) int

// RunHelpers must be called first in TestMain. If this process was started
// as a helper, it runs the named helper and exits; otherwise it returns.
func RunHelpers(helpers map[string]Helper) {
	name := os.Getenv(HelperVar)
	if name == "" {
		return
	}
	h, ok := helpers[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "proctest: unknown helper %q\n", name)
		os.Exit(2)
	}
	os.Exit(h(os.Args[1:]))
}

// HelperArgv returns the argv and environment entry that run the named
// helper with args, for a runner Spec or exec.Cmd.
func HelperArgv(t testing.TB, name string, args ...string) (argv []string, envEntry string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("proctest: cannot find the test binary: %v", err)
	}
	return append([]string{exe}, args...), HelperVar + "=" + name
}

// Token returns a random value to put in a child's environment, so that the
// test can later find every process that inherited it.
func Token(t testing.TB) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "PROCTEST_TOKEN=" + hex.EncodeToString(b[:])
}

// Survivors returns the pids of live (non-zombie) processes whose initial
// environment contains the entry token.
func Survivors(token string) []int {
	needle := []byte("\x00" + token + "\x00")
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if bytes.Contains(append(append([]byte{0}, env...), 0), needle) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// NoSurvivors fails the test if any process carrying token is alive after a
// short settling time, and kills such processes so that they do not leak
// into later tests.
func NoSurvivors(t testing.TB, token string) {
	t.Helper()
	var left []int
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if left = Survivors(token); len(left) == 0 {
			return
		}
	}
	for _, pid := range left {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
	t.Errorf("processes survived: %s", describe(left))
}

// ExpectSurvivors waits up to two seconds for want live processes
// carrying token (processes the test expects to have outlived their
// command), fails the test if it finds another number, and then kills them
// all so that they do not leak into later tests.
func ExpectSurvivors(t testing.TB, token string, want int) {
	t.Helper()
	var left []int
	for deadline := time.Now().Add(2 * time.Second); len(left) < want && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		left = Survivors(token)
	}
	if len(left) != want {
		t.Errorf("%d processes outlived their command (%s); want %d", len(left), describe(left), want)
	}
	for _, pid := range left {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
	NoSurvivors(t, token)
}

func describe(pids []int) string {
	var parts []string
	for _, pid := range pids {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		parts = append(parts, fmt.Sprintf("%d %q", pid, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
	}
	return strings.Join(parts, ", ")
}

// OpenFDs returns the number of file descriptors this process has open.
func OpenFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count file descriptors: %v", err)
	}
	return len(entries) - 1 // ReadDir's own descriptor
}

// PTYDescriptors returns how many of this process's descriptors are open
// on a pseudo-terminal (a master, /dev/ptmx, or a slave, /dev/pts/N): a
// session that leaked its terminal leaves one behind. (Counting /dev/pts
// entries instead would see the terminals of other tests on the machine.)
func PTYDescriptors(t testing.TB) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list file descriptors: %v", err)
	}
	n := 0
	for _, e := range es {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && (l == "/dev/ptmx" || strings.HasPrefix(l, "/dev/pts/")) {
			n++
		}
	}
	return n
}
