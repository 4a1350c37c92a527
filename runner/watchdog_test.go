//go:build linux

package runner

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
)

// watchedCommands are commands a killed host leaves running, in the
// shapes a tree can take: a plain child, one that left the session, a
// double fork, and (with cgroups) one that also cleared its environment.
func watchedCommands(token string, cgroups bool) []string {
	cmds := []string{
		"sleep 600 & echo up; sleep 600",
		"setsid sleep 600 & echo up; sleep 600",
		"(sleep 600 &); echo up; sleep 600",
		"trap '' TERM HUP; echo up; sleep 600",
	}
	if cgroups {
		cmds = append(cmds, "setsid env -i PATH="+DefaultPath+" "+token+" sleep 600 & sleep 0.2; echo up; sleep 600")
	}
	return cmds
}

// helperWatchedHost is a host that starts a watchdog, then runs the
// watched commands (with the token args[1] in their environment; args[0]
// says whether to use cgroups), prints "ready" once each has said it is up,
// and waits to be killed.
func helperWatchedHost(args []string) int {
	if args[0] != "unwatched" {
		if err := WatchHost(); err != nil {
			os.Stdout.WriteString("error: " + err.Error() + "\n")
			return 1
		}
	}
	useCG := args[0] == "cgroups" || args[0] == "unwatched"
	if useCG {
		pool, err := FindCgroups()
		if err != nil {
			os.Stdout.WriteString("nocgroups: " + err.Error() + "\n")
			return 0
		}
		UseCgroups(pool)
	}
	token := args[1]
	var wg sync.WaitGroup
	failed := make(chan string, 8)
	for _, c := range watchedCommands(token, useCG) {
		wg.Add(1)
		var once sync.Once
		go func() {
			res, err := Run(context.Background(), Spec{
				Command: c,
				Env:     []string{"PATH=" + DefaultPath, token},
				OnOutput: func(_ Stream, p []byte) {
					if bytes.Contains(p, []byte("up")) {
						once.Do(wg.Done)
					}
				},
			})
			if err != nil {
				failed <- fmt.Sprintf("%q: %v", c, err)
			} else {
				failed <- fmt.Sprintf("%q ended early: %s: %q", c, res.Describe(), res.Combined.Text())
			}
		}()
	}
	if len(args) > 2 {
		// A run that keeps its leftover on purpose: the watchdog must
		// leave it alone.
		Run(context.Background(), Spec{Command: "sleep 600 & echo up", Env: []string{"PATH=" + DefaultPath, args[2]}, KeepLeftovers: true})
	}
	up := make(chan struct{})
	go func() { wg.Wait(); close(up) }()
	select {
	case <-up:
		os.Stdout.WriteString("ready\n")
	case msg := <-failed:
		os.Stdout.WriteString("error: " + msg + "\n")
		return 1
	}
	msg := <-failed
	os.Stdout.WriteString("error: " + msg + "\n")
	return 1
}

// TestWatchdogEndsTreesOfAKilledHost kills a host with SIGKILL while its
// commands run and checks that nothing they started survives it, and that
// the watchdog itself is gone afterwards.
func TestWatchdogEndsTreesOfAKilledHost(t *testing.T) {
	for _, mode := range []string{"plain", "cgroups"} {
		t.Run(mode, func(t *testing.T) {
			token, keptToken := proctest.Token(t), proctest.Token(t)
			argv, helperEnv := proctest.HelperArgv(t, "watched", mode, token, keptToken)
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), helperEnv)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line := readLine(t, cmd, out)
			if strings.HasPrefix(line, "nocgroups") {
				cmd.Wait()
				t.Skip(strings.TrimSpace(line))
			}
			if line != "ready\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("host said %q", line)
			}
			if n := len(proctest.Survivors(token)); n < 4 {
				t.Fatalf("only %d processes carry the token before the kill", n)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			deadline := time.Now().Add(8 * time.Second)
			for len(proctest.Survivors(token)) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			proctest.NoSurvivors(t, token)
			proctest.ExpectSurvivors(t, keptToken, 1)
			for len(watchdogs(t)) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if left := watchdogs(t); len(left) > 0 {
				t.Errorf("watchdogs still running: %v", left)
			}
		})
	}
}

// watchdogs returns the pids of live watchdogs started from this test
// binary.
func watchdogs(t *testing.T) []int {
	exe, _ := os.Executable()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Equal(cmdline, []byte(exe+"\x00"+watchdogArg+"\x00")) {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		var pid int
		for _, c := range e.Name() {
			pid = pid*10 + int(c-'0')
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestParseWatch checks the watchdog's reading of the host's reports,
// malformed ones included.
func TestParseWatch(t *testing.T) {
	st := &watchState{runs: map[int]watchedRun{}, kept: map[string]bool{}}
	for _, line := range []string{
		`r 100 "AGENTEXEC_RUN=1-1" "/sys/fs/cgroup/x y/r1"`,
		`r 101 "AGENTEXEC_RUN=1-2"`,
		`r 103 "AGENTEXEC_RUN=1-4"`,
		`r 1 "AGENTEXEC_RUN=1-3"`, // pid 1 is never a run
		`r 102`,                   // no marker
		`r x "m"`,
		`r 104 "unterminated`,
		`garbage`,
		`d 101`,
		`k 103 "AGENTEXEC_RUN=1-4"`,
	} {
		st.parse(line)
	}
	if len(st.runs) != 1 {
		t.Fatalf("runs %v, want only 100", st.runs)
	}
	r := st.runs[100]
	if string(r.marker) != "AGENTEXEC_RUN=1-1" || len(r.cgroups) != 1 || r.cgroups[0] != "/sys/fs/cgroup/x y/r1" {
		t.Errorf("run 100 = %+v", r)
	}
	if !st.kept["AGENTEXEC_RUN=1-4"] || len(st.kept) != 1 {
		t.Errorf("kept %v", st.kept)
	}
}

// TestStaleCgroupsEndedAtNextStart kills a host that had no watchdog while
// a command ran in its cgroup pool, and checks that the next pool opened
// under the same parent ends what the dead host left running.
func TestStaleCgroupsEndedAtNextStart(t *testing.T) {
	pool := useTestCgroups(t)
	token := proctest.Token(t)
	argv, helperEnv := proctest.HelperArgv(t, "watched", "unwatched", token)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helperEnv)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line := readLine(t, cmd, out); line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("host said %q", line)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if len(proctest.Survivors(token)) == 0 {
		t.Fatal("nothing survived the host without a watchdog: this test would prove nothing")
	}
	next, err := OpenCgroups(pool.Parent())
	if err != nil {
		t.Fatal(err)
	}
	next.Close()
	proctest.NoSurvivors(t, token)
}

// readLine reads the first line the helper host writes, killing it if none
// comes within a minute (a machine under load can be slow; a hang is a
// failure, not a stall of the whole test run).
func readLine(t *testing.T, cmd *exec.Cmd, out io.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		return line
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		return <-got
	}
}
