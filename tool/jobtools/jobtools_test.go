//go:build linux

package jobtools

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/jobs"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/tool"
	"github.com/agentexec/agentexec/tool/bash"
	"github.com/agentexec/agentexec/tool/shellexec"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	jobs.Main()
	proctest.RunHelpers(map[string]proctest.Helper{"listen": helperListen})
	goleak.VerifyTestMain(m)
}

// helperListen is a server: it listens on a loopback port, prints it, and
// answers connections until killed.
func helperListen([]string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		fmt.Fprintf(c, "hello\n")
		fmt.Println("served a connection")
		c.Close()
	}
}

type fixture struct {
	r     *tool.Registry
	m     *jobs.Manager
	token string
	env   []string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{token: proctest.Token(t), m: &jobs.Manager{StateDir: t.TempDir(), MaxLive: 3}}
	f.env = append(runner.SafeEnv(), f.token)
	f.r = tool.NewRegistry()
	f.r.Register(&bash.Tool{Env: f.env, Grace: 200 * time.Millisecond, Jobs: f.m, DetachAfter: time.Second})
	f.r.Register(&shellexec.Tool{Env: f.env, Grace: 200 * time.Millisecond, Jobs: f.m, DetachAfter: time.Second})
	for _, tl := range All(f.m) {
		f.r.Register(tl)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		f.m.StopAll(ctx)
		proctest.NoSurvivors(t, f.token)
	})
	return f
}

func (f *fixture) call(t *testing.T, conversation, name string, input any) *tool.Result {
	t.Helper()
	b, _ := json.Marshal(input)
	return f.r.Dispatch(context.Background(), &tool.Call{Conversation: conversation, WorkDir: os.TempDir()}, name, b)
}

var jobIDRE = regexp.MustCompile(`job ([0-9]{8}-[0-9]{6}-[0-9a-f]+)`)

// background starts a command in seed 001's background mode and returns
// its job id (found through job_list).
func (f *fixture) background(t *testing.T, conversation, command string) string {
	t.Helper()
	res := f.call(t, conversation, "bash", map[string]any{"command": command, "mode": "background"})
	if res.IsError || !strings.HasPrefix(res.Text, "<pid>") {
		t.Fatalf("background: %+v", res)
	}
	list := f.call(t, conversation, ListName, map[string]any{})
	ids := regexp.MustCompile(`(?m)^(\S+)  pid`).FindAllStringSubmatch(list.Text, -1)
	if len(ids) == 0 {
		t.Fatalf("job_list: %q", list.Text)
	}
	return ids[0][1]
}

func TestServerJob(t *testing.T) {
	f := setup(t)
	argv, helper := proctest.HelperArgv(t, "listen")
	id := f.background(t, "c1", helper+" "+strings.Join(argv, " "))
	// Its output is readable, and it keeps serving.
	var out *tool.Result
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		out = f.call(t, "c1", OutputName, map[string]any{"job_id": id, "wait_seconds": 1})
		if strings.Contains(out.Text, "listening on") {
			break
		}
	}
	addr := regexp.MustCompile(`listening on (\S+)`).FindStringSubmatch(out.Text)
	if addr == nil {
		t.Fatalf("output %q", out.Text)
	}
	conn, err := net.Dial("tcp", addr[1])
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if !strings.Contains(out.Text, "still running") || out.IsError {
		t.Errorf("job_output: %q", out.Text)
	}
	kill := f.call(t, "c1", KillName, map[string]any{"job_id": id})
	if kill.IsError || !strings.Contains(kill.Text, "stopped: killed by SIGTERM") {
		t.Errorf("job_kill: %+v", kill)
	}
	proctest.NoSurvivors(t, f.token)
	again := f.call(t, "c1", KillName, map[string]any{"job_id": id})
	if !strings.Contains(again.Text, "had already ended") {
		t.Errorf("second kill: %q", again.Text)
	}
}

func TestWaitAndOutput(t *testing.T) {
	f := setup(t)
	id := f.background(t, "c1", "sleep 1; echo done")
	w := f.call(t, "c1", WaitName, map[string]any{"job_id": id, "timeout_seconds": 20})
	if w.IsError || !strings.HasPrefix(w.Text, "job "+id+" ended: exited 0 after") || !strings.Contains(w.Text, "done\n\n\n[background process completed]\n") {
		t.Errorf("job_wait: %q", w.Text)
	}
	o := f.call(t, "c1", OutputName, map[string]any{"job_id": id, "offset": 0, "limit": 3})
	if !strings.HasPrefix(o.Text, "[job "+id+": exited 0; bytes 0 to 3 of ") || !strings.Contains(o.Text, "; next offset 3]\ndon") {
		t.Errorf("job_output: %q", o.Text)
	}
	o = f.call(t, "c1", OutputName, map[string]any{"job_id": id, "offset": 0, "limit": 1, "lines": true})
	if !strings.Contains(o.Text, "lines 0 to 0") || !strings.Contains(o.Text, "next line offset 1]\ndone\n") {
		t.Errorf("job_output lines: %q", o.Text)
	}
	o = f.call(t, "c1", OutputName, map[string]any{"job_id": id, "offset": 1000})
	if !strings.HasSuffix(o.Text, "[end of output: the job has ended]") {
		t.Errorf("past the end: %q", o.Text)
	}
}

func TestConversations(t *testing.T) {
	f := setup(t)
	id := f.background(t, "mine", "sleep 600")
	if l := f.call(t, "theirs", ListName, map[string]any{}); l.Text != "No background jobs in this conversation." {
		t.Errorf("another conversation lists %q", l.Text)
	}
	for _, name := range []string{OutputName, KillName, WaitName} {
		res := f.call(t, "theirs", name, map[string]any{"job_id": id})
		if res.Kind != tool.KindPermissionDenied || !strings.Contains(res.Text, "belongs to another conversation") {
			t.Errorf("%s: %+v", name, res)
		}
	}
	res := f.call(t, "mine", OutputName, map[string]any{"job_id": "20260101-000000-nope"})
	if res.Kind != tool.KindValidation || !strings.Contains(res.Text, "no job with id") {
		t.Errorf("unknown: %+v", res)
	}
	for _, bad := range []map[string]any{{}, {"job_id": 5}, {"job_id": id, "offset": -1}, {"job_id": id, "lines": "yes"}, {"job_id": id, "wait_seconds": 61}, {"job_id": id, "x": 1}} {
		if res := f.call(t, "mine", OutputName, bad); res.Kind != tool.KindValidation {
			t.Errorf("%v: %+v", bad, res)
		}
	}
}

func TestLiveCapThroughBash(t *testing.T) {
	f := setup(t)
	for range 3 {
		f.background(t, "c", "sleep 600")
	}
	res := f.call(t, "c", "bash", map[string]any{"command": "sleep 600", "mode": "background"})
	if !res.IsError || !strings.Contains(res.Text, "too many running jobs") || strings.Count(res.Text, "sleep 600") != 3 {
		t.Errorf("%+v", res)
	}
}

// TestDetachAfter: a 3 s command with a 1 s detach returns a job id after
// about 1 s, and the job later completes with its full output.
func TestDetachAfter(t *testing.T) {
	f := setup(t)
	start := time.Now()
	res := f.call(t, "c", "bash", map[string]any{"command": "echo first; sleep 3; echo last"})
	took := time.Since(start)
	m := regexp.MustCompile(`<job_id>(\S+)</job_id>`).FindStringSubmatch(res.Text)
	if m == nil || res.IsError || !strings.HasPrefix(res.Text, "[command still running after 1s; it continues in the background as job ") ||
		!strings.Contains(res.Text, "\nfirst\n") {
		t.Fatalf("detach: %+v", res)
	}
	if took < 900*time.Millisecond || took > 2500*time.Millisecond {
		t.Errorf("returned after %v", took)
	}
	w := f.call(t, "c", WaitName, map[string]any{"job_id": m[1], "timeout_seconds": 20})
	if !strings.Contains(w.Text, "ended: exited 0") || !strings.Contains(w.Text, "first\nlast\n") {
		t.Errorf("job_wait: %q", w.Text)
	}
	// A command that ends in time is answered as usual and leaves no job.
	res = f.call(t, "c2", "bash", map[string]any{"command": "echo quick"})
	if res.Text != "quick\n" {
		t.Errorf("quick: %q", res.Text)
	}
	if l := f.call(t, "c2", ListName, map[string]any{}); !strings.HasPrefix(l.Text, "No background jobs") {
		t.Errorf("a finished call left a job: %q", l.Text)
	}
	// shell.exec detaches too, and keeps stdout and stderr apart.
	res = f.call(t, "c3", "shell.exec", map[string]any{"executable": "sh", "argv": []string{"-c", "echo out; echo err >&2; sleep 3"}})
	if !strings.Contains(res.Text, "is still running after 1000 ms; it continues in the background as job") || !strings.Contains(res.Text, `"stdout":"out\n","stderr":"err\n"`) {
		t.Errorf("shell.exec detach: %q", res.Text)
	}
	res = f.call(t, "c3", "shell.exec", map[string]any{"executable": "sh", "argv": []string{"-c", "echo o; echo e >&2; exit 2"}})
	if res.Text != `{"stdout":"o\n","stderr":"e\n","success":false,"exit_code":2}` {
		t.Errorf("shell.exec in time: %q", res.Text)
	}
}
