//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentexec/agentexec/capture"
	"github.com/agentexec/agentexec/internal/proctest"
)

func run(t *testing.T, spec Spec) *Result {
	t.Helper()
	res, err := Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run(%q %q): %v", spec.Command, spec.Argv, err)
	}
	return res
}

func text(s capture.Snapshot) string { return s.Text() }

// The unit-test list of seed 000, applied to the runner.
func TestSeedBasics(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		spec    Spec
		code    int
		stdout  string
		stderr  string
		outcome Outcome
	}{
		{"echo", Spec{Command: "echo hello"}, 0, "hello\n", "", Exited},
		{"exit code", Spec{Command: "exit 42"}, 42, "", "", Exited},
		{"stderr", Spec{Command: "echo oops >&2; exit 1"}, 1, "", "oops\n", Exited},
		{"pipes", Spec{Command: "echo hello | tr a-z A-Z"}, 0, "HELLO\n", "", Exited},
		{"working directory", Spec{Command: "pwd", Dir: dir}, 0, dir + "\n", "", Exited},
		{"no output", Spec{Command: "true"}, 0, "", "", Exited},
		{"sh shell", Spec{Command: "echo $0", Shell: "sh"}, 0, "sh\n", "", Exited},
		{"argv is literal", Spec{Argv: []string{"echo", "; pwd", "$HOME", "*"}}, 0, "; pwd $HOME *\n", "", Exited},
		{"killed by signal", Spec{Command: "kill -9 $$"}, -1, "", "", Signaled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, c.spec)
			if res.ExitCode != c.code || res.Outcome != c.outcome {
				t.Errorf("exit %d outcome %v, want %d %v", res.ExitCode, res.Outcome, c.code, c.outcome)
			}
			if got := text(res.Stdout); got != c.stdout {
				t.Errorf("stdout %q, want %q", got, c.stdout)
			}
			if got := text(res.Stderr); got != c.stderr {
				t.Errorf("stderr %q, want %q", got, c.stderr)
			}
			if res.Outcome == Signaled && res.Signal != int(syscall.SIGKILL) {
				t.Errorf("signal %d, want 9", res.Signal)
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	cases := []struct {
		name string
		spec Spec
		kind error
	}{
		{"empty command", Spec{Command: "   "}, ErrEmptyCommand},
		{"nothing", Spec{}, ErrEmptyCommand},
		{"both", Spec{Command: "true", Argv: []string{"true"}}, ErrInvalidSpec},
		{"missing dir", Spec{Command: "true", Dir: filepath.Join(dir, "nope")}, ErrBadDir},
		{"dir is a file", Spec{Command: "true", Dir: file}, ErrBadDir},
		{"not found", Spec{Argv: []string{"no-such-program-xyz"}}, ErrNotFound},
		{"absolute not found", Spec{Argv: []string{"/no/such/program"}}, ErrNotFound},
		{"not executable", Spec{Argv: []string{file}}, ErrNotExecutable},
		{"directory", Spec{Argv: []string{dir}}, ErrNotExecutable},
		{"shell not found", Spec{Command: "true", Shell: "no-such-shell-xyz"}, ErrNotFound},
		{"bad env", Spec{Command: "true", Env: []string{"NOEQUALS"}}, ErrInvalidSpec},
		{"bad limit", Spec{Command: "true", Stdout: capture.Limit{Max: -1}}, ErrInvalidSpec},
		{"negative timeout", Spec{Command: "true", Timeout: -time.Second}, ErrInvalidSpec},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Run(context.Background(), c.spec)
			var se *StartError
			if !errors.As(err, &se) || !errors.Is(err, c.kind) {
				t.Fatalf("got %v, %v; want a StartError of kind %v", res, err, c.kind)
			}
			if res != nil {
				t.Errorf("a result came with a start error")
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "runner: cannot start") {
				t.Errorf("message %q is not a one-line runner error", msg)
			}
		})
	}
}

func TestTimeoutKillsGrandchildren(t *testing.T) {
	token := proctest.Token(t)
	start := time.Now()
	res := run(t, Spec{
		Command: "echo before; sleep 100 & sleep 100 & wait",
		Env:     []string{"PATH=" + DefaultPath, token},
		Timeout: 2 * time.Second,
		Grace:   500 * time.Millisecond,
	})
	if !res.TimedOut() {
		t.Fatalf("outcome %v, want timed out", res.Outcome)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v for a 2 s timeout", took)
	}
	if got := text(res.Stdout); got != "before\n" {
		t.Errorf("stdout %q", got)
	}
	if res.LeftoversKilled < 2 {
		t.Errorf("LeftoversKilled = %d, want the two sleeps at least", res.LeftoversKilled)
	}
	proctest.NoSurvivors(t, token)
}

func TestCancelKillsTree(t *testing.T) {
	token := proctest.Token(t)
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	res, err := Run(ctx, Spec{
		Command: "sleep 100 & sleep 100 & echo ready; wait",
		Env:     []string{"PATH=" + DefaultPath, token},
		OnOutput: func(s Stream, p []byte) {
			if strings.Contains(string(p), "ready") {
				once.Do(cancel)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cancelled() {
		t.Fatalf("outcome %v, want cancelled", res.Outcome)
	}
	proctest.NoSurvivors(t, token)

	if _, err := Run(ctx, Spec{Command: "true"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a done context: %v, want context.Canceled", err)
	}
}

func TestReturnsWhenMainProcessExits(t *testing.T) {
	for _, command := range []string{
		"sleep 600 & echo started",
		"setsid sleep 600 & echo started",
		"(sleep 600 &) & echo started",
		"setsid sh -c 'sleep 600 & wait' & echo started",
		"setsid sleep 600 >/dev/null 2>&1 & echo started",
	} {
		t.Run(command, func(t *testing.T) {
			token := proctest.Token(t)
			start := time.Now()
			res := run(t, Spec{Command: command, Env: []string{"PATH=" + DefaultPath, token}})
			took := time.Since(start)
			if took > 3*time.Second {
				t.Errorf("took %v; the call must return when the main process exits", took)
			}
			t.Logf("returned in %v", took)
			if got := text(res.Stdout); got != "started\n" || res.ExitCode != 0 {
				t.Errorf("stdout %q exit %d", got, res.ExitCode)
			}
			if res.LeftoversKilled < 1 {
				t.Errorf("LeftoversKilled = %d, want at least 1", res.LeftoversKilled)
			}
			if res.OutputCut {
				t.Error("OutputCut = true, but every writer was ended before the pipes were read to the end")
			}
			proctest.NoSurvivors(t, token)
		})
	}
}

func TestKeepLeftovers(t *testing.T) {
	token := proctest.Token(t)
	res := run(t, Spec{Command: "sleep 600 & echo started", Env: []string{"PATH=" + DefaultPath, token}, KeepLeftovers: true})
	if res.LeftoversKept != 1 || res.LeftoversKilled != 0 {
		t.Fatalf("kept %d killed %d, want 1 and 0", res.LeftoversKept, res.LeftoversKilled)
	}
	if !res.OutputCut {
		t.Error("OutputCut = false; the kept sleep still holds stdout, so later output is not captured and the result must say so")
	}
	left := proctest.Survivors(token)
	if len(left) != 1 {
		t.Fatalf("survivors %v, want the kept sleep", left)
	}
	syscall.Kill(left[0], syscall.SIGKILL)
	proctest.NoSurvivors(t, token)
	// The next run reaps the kept process's zombie.
	run(t, Spec{Command: "true"})
}

// TestGraceThenKill checks that a command that ignores SIGTERM is killed
// only once the grace period has passed. The command is ended (by
// cancellation) once it said it is ready, so its SIGTERM handling is in
// place whatever the load: a fixed timeout raced the start of the helper,
// which under the race detector on a loaded machine can take longer than
// any short timeout.
func TestGraceThenKill(t *testing.T) {
	argv, helperEnv := proctest.HelperArgv(t, "ignoreterm")
	for _, c := range []struct {
		name string
		spec Spec
	}{
		{"helper", Spec{Argv: argv, Env: []string{helperEnv}, Grace: 300 * time.Millisecond}},
		{"shell trap", Spec{Command: "trap '' TERM; echo ready; while :; do sleep 0.05; done", Env: []string{"PATH=" + DefaultPath}, Grace: 200 * time.Millisecond}},
	} {
		t.Run(c.name, func(t *testing.T) {
			token := proctest.Token(t)
			spec := c.spec
			spec.Env = append(append([]string(nil), spec.Env...), token)
			spec.Timeout = time.Minute // a bound, should the command never get ready
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var cancelled time.Time
			var seen []byte
			spec.OnOutput = func(_ Stream, p []byte) {
				seen = append(seen, p...) // OnOutput calls never overlap
				if cancelled.IsZero() && strings.Contains(string(seen), "ready\n") {
					cancelled = time.Now()
					cancel()
				}
			}
			res, err := Run(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			ended := time.Now()
			proctest.NoSurvivors(t, token)
			if cancelled.IsZero() {
				t.Fatalf("the command never said it was ready: %s, stdout %q", res.Describe(), text(res.Stdout))
			}
			if !res.Cancelled() || res.Signal != int(syscall.SIGKILL) {
				t.Fatalf("outcome %v signal %d; want cancelled by SIGKILL", res.Outcome, res.Signal)
			}
			if took := ended.Sub(cancelled); took < spec.Grace {
				t.Errorf("ended %v after the cancellation: SIGKILL came before the grace period ended (%v)", took, spec.Grace)
			}
		})
	}
}

func TestStdin(t *testing.T) {
	start := time.Now()
	res := run(t, Spec{Command: "cat; echo done", Timeout: 10 * time.Second})
	if text(res.Stdout) != "done\n" || time.Since(start) > 3*time.Second {
		t.Errorf("cat without stdin: %q after %v", text(res.Stdout), time.Since(start))
	}
	res = run(t, Spec{Command: "cat", Stdin: []byte("given\n")})
	if text(res.Stdout) != "given\n" {
		t.Errorf("cat with stdin: %q", text(res.Stdout))
	}
	res = run(t, Spec{Command: "exit 0", Stdin: make([]byte, 1<<20)})
	if res.ExitCode != 0 {
		t.Errorf("unread stdin: exit %d", res.ExitCode)
	}
	res = run(t, Spec{Command: "test -t 0 || echo notty; tty || true"})
	if !strings.HasPrefix(text(res.Stdout), "notty\n") {
		t.Errorf("stdin should not be a terminal: %q", text(res.Stdout))
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("AGENTEXEC_TEST_SECRET", "s3cret")
	res := run(t, Spec{Command: "env"})
	if strings.Contains(text(res.Stdout), "s3cret") {
		t.Errorf("a host secret reached the child: %q", text(res.Stdout))
	}
	if !strings.Contains(text(res.Stdout), "GIT_TERMINAL_PROMPT=0") {
		t.Errorf("SafeEnv lacks non-interactive settings: %q", text(res.Stdout))
	}
	res = run(t, Spec{Argv: []string{"/usr/bin/env"}, Env: []string{"FOO=bar"}})
	lines := strings.Split(strings.TrimSpace(text(res.Stdout)), "\n")
	if len(lines) != 2 || lines[0] != "FOO=bar" || !strings.HasPrefix(lines[1], MarkerVar+"=") {
		t.Errorf("exact env: got %q", lines)
	}
}

func TestTruncationAndCombined(t *testing.T) {
	res := run(t, Spec{
		Command:  "seq 1 100000; echo err >&2",
		Stdout:   capture.Limit{Strategy: capture.Middle, Max: 1000, HeadKeep: 10, TailKeep: 13},
		Stderr:   capture.Limit{Strategy: capture.Head, Max: 2},
		Combined: capture.Limit{Strategy: capture.Tail, Max: 4},
	})
	s := res.Stdout
	if !s.Truncated || string(s.Head) != "1\n2\n3\n4\n5\n" || string(s.Tail) != "99999\n100000\n" {
		t.Errorf("middle: head %q tail %q truncated %v", s.Head, s.Tail, s.Truncated)
	}
	if s.TotalBytes != 588895 {
		t.Errorf("stdout total %d, want 588895", s.TotalBytes)
	}
	if string(res.Stderr.Head) != "er" || !res.Stderr.Truncated || res.Stderr.TotalBytes != 4 {
		t.Errorf("stderr head %q", res.Stderr.Head)
	}
	// stdout and stderr are separate pipes read by separate goroutines, so
	// the interleaving of writes made close together is not defined; only
	// the totals and the kept size are.
	if c := res.Combined; c.TotalBytes != 588895+4 || len(c.Tail) != 4 || !c.Truncated {
		t.Errorf("combined: total %d tail %q truncated %v", c.TotalBytes, c.Tail, c.Truncated)
	}
	res = run(t, Spec{Command: "echo a; sleep 0.1; echo b >&2; sleep 0.1; echo c"})
	if got := text(res.Combined); got != "a\nb\nc\n" {
		t.Errorf("combined %q, want arrival order", got)
	}
}

// TestManyConcurrentRuns runs 500 commands 16 at a time and checks that
// file descriptors come back to where they started (goroutines are checked
// by goleak in TestMain).
func TestManyConcurrentRuns(t *testing.T) {
	n := 500
	if testing.Short() {
		n = 100
	}
	run(t, Spec{Command: "true"}) // open the shared /dev/null first
	before := proctest.OpenFDs(t)
	manyRuns(t, n)
	if after := proctest.OpenFDs(t); after != before {
		t.Errorf("open file descriptors: %d before, %d after", before, after)
	}
}

// manyRuns makes n runs, 16 at a time, a fifth of them leaving a process
// behind, and checks their output.
func manyRuns(t *testing.T, n int) {
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			spec := Spec{Command: "echo out; echo err >&2"}
			if i%5 == 0 {
				spec = Spec{Command: "sleep 60 & echo out; echo err >&2"}
			}
			if i%7 == 0 {
				spec.Stdin = []byte("in")
			}
			res, err := Run(context.Background(), spec)
			if err != nil {
				errs <- err
				return
			}
			if text(res.Stdout) != "out\n" || text(res.Stderr) != "err\n" {
				errs <- errors.New("wrong output: " + text(res.Combined))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestMergeOutputKeepsOrder(t *testing.T) {
	res := run(t, Spec{Command: "for i in $(seq 1 200); do echo o$i; echo e$i >&2; done", MergeOutput: true})
	var want strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&want, "o%d\ne%d\n", i, i)
	}
	if got := text(res.Combined); got != want.String() {
		t.Errorf("merged output out of order: %q", got[:min(len(got), 100)])
	}
	if text(res.Stdout) != want.String() || res.Stderr.TotalBytes != 0 {
		t.Errorf("stdout %d bytes, stderr %d bytes", res.Stdout.TotalBytes, res.Stderr.TotalBytes)
	}
}

// TestNoStrayDescriptors: a descriptor the host inherited without
// close-on-exec does not reach commands (checked in a fresh process, where
// the descriptor exists before the first run).
func TestNoStrayDescriptors(t *testing.T) {
	argv, helper := proctest.HelperArgv(t, "strayfd")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helper)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.Join(strings.Fields(string(out)), " "); got != "0 1 2 3" { // 3 is ls's own directory
		t.Errorf("the command has descriptors %v", got)
	}
}

// TestOutOfDescriptors checks that running out of open files is reported
// as that, with the limit, and not as a platform without pipes.
func TestOutOfDescriptors(t *testing.T) {
	argv, helperEnv := proctest.HelperArgv(t, "fdlimit")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helperEnv)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	got := string(out)
	for _, want := range []string{"ErrResources: ", "too many open files", "RLIMIT_NOFILE", "ulimit -n"} {
		if !strings.Contains(got, want) {
			t.Errorf("error %q does not contain %q", got, want)
		}
	}
	if strings.Contains(got, "not supported") {
		t.Errorf("error %q blames the platform", got)
	}
}
