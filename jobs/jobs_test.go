//go:build linux

package jobs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/runner"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	Main()
	proctest.RunHelpers(map[string]proctest.Helper{"host": helperHost})
	goleak.VerifyTestMain(m)
}

func waitOutput(t *testing.T, file, want string) string {
	t.Helper()
	var b []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, _ = os.ReadFile(file); strings.Contains(string(b), want) {
			return string(b)
		}
	}
	t.Fatalf("output %q never contained %q", b, want)
	return ""
}

func TestStartAndComplete(t *testing.T) {
	token := proctest.Token(t)
	m := &Manager{StateDir: filepath.Join(t.TempDir(), "state")}
	job, err := m.Start(context.Background(), Spec{Command: "echo $PWD; echo err >&2", Dir: "/tmp", Env: append(runner.SafeEnv(), token), Tool: "bash", Conversation: "c"})
	if err != nil {
		t.Fatal(err)
	}
	out := waitOutput(t, job.OutputFile, "[background process completed]")
	if out != "/tmp\nerr\n\n\n[background process completed]\n" {
		t.Errorf("output %q", out)
	}
	var info *Info
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if info, err = ReadInfo(job.Dir); err == nil && info.State != "running" {
			break
		}
	}
	if info == nil || info.State != "exited" || *info.ExitCode != 0 || info.Pid != job.Pid || info.OwnerPid == 0 || info.Ended.IsZero() || time.Duration(info.Lifetime) != DefaultLifetime {
		t.Errorf("record %+v", info)
	}
	for _, d := range []string{m.StateDir, m.JobsDir(), job.Dir} {
		if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o700 {
			t.Errorf("%s has mode %v", d, fi.Mode().Perm())
		}
	}
	m.WaitSupervisors()
	proctest.NoSurvivors(t, token)
}

func TestStartErrors(t *testing.T) {
	m := &Manager{StateDir: t.TempDir()}
	_, err := m.Start(context.Background(), Spec{Command: "true", Dir: "/no/such/dir"})
	var se *StartError
	if !errors.As(err, &se) || se.Kind != "bad working directory" {
		t.Errorf("bad dir: %v", err)
	}
	_, err = m.Start(context.Background(), Spec{Command: "  "})
	if err == nil {
		t.Error("empty command accepted")
	}
	// A program that does not call Main cannot supervise.
	m.Executable = "/bin/true"
	_, err = m.Start(context.Background(), Spec{Command: "true"})
	if !errors.Is(err, ErrNoSupervisor) || !strings.Contains(err.Error(), "must call jobs.Main") {
		t.Errorf("no supervisor: %v", err)
	}
	m.WaitSupervisors()
	entries, _ := os.ReadDir(m.JobsDir())
	if len(entries) != 0 {
		t.Errorf("failed starts left %d job directories", len(entries))
	}
}

func TestStateDirMadePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	os.Mkdir(dir, 0o777)
	os.Chmod(dir, 0o777)
	if err := privateDir(dir); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if err := privateDir(file); err == nil {
		t.Error("a file was accepted as the state directory")
	}
}

func TestCompletionLine(t *testing.T) {
	cases := []struct {
		res  runner.Result
		want string
	}{
		{runner.Result{Outcome: runner.Exited}, "\n\n[background process completed]\n"},
		{runner.Result{Outcome: runner.Exited, ExitCode: 2}, "\n\n[background process failed: exit status: 2]\n"},
		{runner.Result{Outcome: runner.Signaled, ExitCode: -1, Signal: 15}, "\n\n[background process failed: signal: 15 (SIGTERM)]\n"},
		{runner.Result{Outcome: runner.TimedOut}, "\n\n[background process failed: stopped after reaching its lifetime of 24h0m0s]\n"},
		{runner.Result{Outcome: runner.Cancelled}, "\n\n[background process failed: stopped because agentexec shut down]\n"},
		{runner.Result{Outcome: runner.Exited, LeftoversKilled: 2}, "\n\n[background process completed]\n[note: 2 process(es) it started were still running and were stopped]\n"},
	}
	for _, c := range cases {
		if got := CompletionLine(&c.res, DefaultLifetime); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

func TestStopAll(t *testing.T) {
	token := proctest.Token(t)
	m := &Manager{StateDir: t.TempDir()}
	job, err := m.Start(context.Background(), Spec{Command: "echo up; sleep 600", Env: append(runner.SafeEnv(), token), Grace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, job.OutputFile, "up\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.StopAll(ctx)
	if out := waitOutput(t, job.OutputFile, "[background process failed"); out != "up\n\n\n[background process failed: stopped because agentexec shut down]\n" {
		t.Errorf("output %q", out)
	}
	proctest.NoSurvivors(t, token)
}
