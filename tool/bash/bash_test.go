//go:build linux

package bash

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/capture"
	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/jobs"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/tool"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	jobs.Main()
	goleak.VerifyTestMain(m)
}

// newTool returns a bash tool whose commands carry token and whose jobs
// live in a test directory.
func newTool(t *testing.T, token string) *Tool {
	t.Helper()
	m := &jobs.Manager{StateDir: t.TempDir()}
	t.Cleanup(m.WaitSupervisors) // every supervisor has exited before goleak looks
	return &Tool{Env: append(runner.SafeEnv(), token), Grace: 200 * time.Millisecond, Jobs: m}
}

func call(t *testing.T, tl *Tool, input string) *tool.Result {
	t.Helper()
	r := tool.NewRegistry()
	r.Register(tl)
	return r.Dispatch(context.Background(), &tool.Call{WorkDir: t.TempDir(), Conversation: "test"}, Name, json.RawMessage(input))
}

func TestForegroundModes(t *testing.T) {
	tl := newTool(t, proctest.Token(t))
	for _, mode := range []string{`"default"`, `"slow"`, `null`} {
		res := call(t, tl, `{"command": "echo out; echo err >&2", "mode": `+mode+`}`)
		if res.IsError || res.Text != "out\nerr\n" {
			t.Errorf("mode %s: %+v", mode, res)
		}
	}
	res := call(t, tl, `{"command": "true", "mode": "fast"}`)
	if res.Kind != tool.KindValidation || res.Text != `invalid input: mode: must be one of default, slow, background; got "fast"` {
		t.Errorf("bad mode: %+v", res)
	}
}

func TestModeTimeouts(t *testing.T) {
	token := proctest.Token(t)
	tl := newTool(t, token)
	tl.DefaultTimeout, tl.SlowTimeout = 300*time.Millisecond, 600*time.Millisecond
	res := call(t, tl, `{"command": "echo partial; sleep 30"}`)
	if res.Kind != tool.KindTimeout || res.Text != "[command timed out after 300ms]\npartial\n" {
		t.Errorf("default: %+v", res)
	}
	res = call(t, tl, `{"command": "sleep 30", "mode": "slow"}`)
	if res.Kind != tool.KindTimeout || res.Text != "[command timed out after 600ms]" {
		t.Errorf("slow: %+v", res)
	}
	proctest.NoSurvivors(t, token)
}

func TestRustDuration(t *testing.T) {
	cases := map[time.Duration]string{
		30 * time.Second: "30s", 15 * time.Minute: "900s", 24 * time.Hour: "86400s",
		1500 * time.Millisecond: "1.5s", 250 * time.Millisecond: "250ms", 1500 * time.Microsecond: "1.5ms",
	}
	for d, want := range cases {
		if got := RustDuration(d); got != want {
			t.Errorf("RustDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestExitCodes(t *testing.T) {
	tl := newTool(t, proctest.Token(t))
	cases := []struct {
		cmd, text string
		kind      tool.ErrorKind
	}{
		{"echo fine", "fine\n", ""},
		{"true", "", ""},
		{"echo bad; exit 3", "[command failed: exit code 3]\nbad\n", tool.KindCommandFailed},
		{"exit 1", "[command failed: exit code 1]\n", tool.KindCommandFailed},
		{"kill -9 $$", "[command failed: exit code -1 (killed by signal 9)]\n", tool.KindCommandFailed},
		{"no-such-command-xyz", "[command failed: exit code 127]\nbash: line 1: no-such-command-xyz: command not found\n", tool.KindCommandFailed},
	}
	for _, c := range cases {
		res := call(t, tl, fmt.Sprintf(`{"command": %q}`, c.cmd))
		if res.Text != c.text || res.Kind != c.kind || res.IsError != (c.kind != "") {
			t.Errorf("%s: got %+v, want %q", c.cmd, res, c.text)
		}
	}
}

func TestTruncation(t *testing.T) {
	tl := newTool(t, proctest.Token(t))
	cases := []struct {
		size      int
		truncated bool
		header    string
	}{
		{MaxOutputLength - 1, false, ""},
		{MaxOutputLength, false, ""},
		{MaxOutputLength + 1, true, "[output truncated in middle: got 128.0 KiB, max is 128 KiB]\n"},
		{1 << 20, true, "[output truncated in middle: got 1 MiB, max is 128 KiB]\n"},
		{10<<20 + 512<<10, true, "[output truncated in middle: got 10.5 MiB, max is 128 KiB]\n"},
	}
	for _, c := range cases {
		// Lines of 100 bytes: "<7-digit number> xxx...\n".
		cmd := fmt.Sprintf(`for ((i=0; i<%d; i++)); do printf '%%07d%%092d\n' $i 0; done | head -c %d`, c.size/100+1, c.size)
		res := call(t, tl, fmt.Sprintf(`{"command": %q, "mode": "slow"}`, cmd))
		if res.IsError {
			t.Fatalf("size %d: %+v", c.size, res.Text[:min(len(res.Text), 200)])
		}
		if !c.truncated {
			if len(res.Text) != c.size || res.Run.Truncated {
				t.Errorf("size %d: got %d bytes, truncated %v", c.size, len(res.Text), res.Run.Truncated)
			}
			continue
		}
		if !strings.HasPrefix(res.Text, c.header) {
			t.Errorf("size %d: header %q", c.size, res.Text[:80])
			continue
		}
		body := strings.TrimPrefix(res.Text, c.header)
		head, tail, ok := strings.Cut(body, "\n\n[snip]\n\n")
		if !ok || len(head) != SnipSize || len(tail) != SnipSize {
			t.Errorf("size %d: head %d bytes, tail %d bytes, snip found %v", c.size, len(head), len(tail), ok)
		}
		if !strings.HasPrefix(head, "0000000") {
			t.Errorf("size %d: head starts %q", c.size, head[:20])
		}
		if len(res.Text) > MaxOutputLength+200 {
			t.Errorf("size %d: text is %d bytes", c.size, len(res.Text))
		}
	}
}

func TestTruncationRuneBoundaries(t *testing.T) {
	// 3-byte runes never line up with 4096: cuts must move to a boundary.
	s := capture.Snapshot{}
	buf, _ := capture.New(capture.Limit{Strategy: capture.Middle, Max: MaxOutputLength, HeadKeep: SnipSize, TailKeep: SnipSize})
	buf.Write([]byte(strings.Repeat("€", 100000)))
	s = buf.Snapshot()
	out := FormatOutput(s)
	if strings.ContainsRune(out, '\uFFFD') {
		t.Error("a cut split a rune")
	}
	if !strings.HasPrefix(out, "[output truncated in middle: got 293.0 KiB, max is 128 KiB]\n") {
		t.Errorf("header %q", out[:70])
	}
}

func TestHumanizeBytes(t *testing.T) {
	cases := map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 131072: "128 KiB", 131073: "128.0 KiB", 1 << 30: "1 GiB"}
	for n, want := range cases {
		if got := HumanizeBytes(n); got != want {
			t.Errorf("HumanizeBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCancellation(t *testing.T) {
	token := proctest.Token(t)
	r := tool.NewRegistry()
	r.Register(newTool(t, token))
	ctx, cancel := context.WithCancel(context.Background())
	c := &tool.Call{WorkDir: t.TempDir(), OnOutput: func(string, []byte) { cancel() }}
	res := r.Dispatch(ctx, c, Name, json.RawMessage(`{"command": "echo go; (sleep 60 &); sleep 60"}`))
	if res.Kind != tool.KindCancelled || res.Text != "[command cancelled]\ngo\n" {
		t.Errorf("got %+v", res)
	}
	proctest.NoSurvivors(t, token)
}

func TestLeftoversNote(t *testing.T) {
	token := proctest.Token(t)
	res := call(t, newTool(t, token), `{"command": "sleep 60 & echo started"}`)
	if !strings.HasPrefix(res.Text, "started\n\n\n[note: 1 background process(es) this command started were stopped when it exited.") ||
		!strings.Contains(res.Text, `mode="background"`) {
		t.Errorf("got %q", res.Text)
	}
	proctest.NoSurvivors(t, token)
}

// TestCheckHook plugs a rule defined here into the pre-execution hook:
// a refused command never runs.
func TestCheckHook(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	tl := newTool(t, proctest.Token(t))
	tl.Checks = []policy.Checker{policy.CheckerFunc(func(r policy.Request) policy.Decision {
		if strings.Contains(r.Command, "--force") {
			return policy.Decision{Verdict: policy.Deny, Rule: "test-force",
				Text: "permission denied: git push --force is not allowed. Use \n--force-with-lease for safer force pushes, or push without force"}
		}
		return policy.Allowed
	})}
	res := call(t, tl, fmt.Sprintf(`{"command": "touch %s; git push --force"}`, marker))
	if res.Kind != tool.KindPermissionDenied || !strings.HasPrefix(res.Text, "permission denied: git push --force is not allowed.") {
		t.Errorf("got %+v", res)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a refused command ran")
	}
	res = call(t, tl, fmt.Sprintf(`{"command": "touch %s"}`, marker))
	if res.IsError {
		t.Errorf("allowed command: %+v", res)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Error("an allowed command did not run")
	}
}

func TestDescription(t *testing.T) {
	want, err := os.ReadFile("testdata/golden/description.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := New().Description(&tool.Call{WorkDir: "/home/me/project"}); got != string(want) {
		t.Errorf("got %q", got)
	}
	var s struct {
		Required   []string
		Properties map[string]struct {
			Type string
			Enum []string
		}
	}
	json.Unmarshal(New().InputSchema(), &s)
	if len(s.Required) != 1 || s.Properties["mode"].Type != "string" || strings.Join(s.Properties["mode"].Enum, ",") != "default,slow,background" {
		t.Errorf("schema %+v", s)
	}
}

var backgroundRE = regexp.MustCompile(`^<pid>(\d+)</pid>\n<output_file>(/.+/output)</output_file>\n<reminder>To stop: kill -9 -(\d+)</reminder>$`)

// startBackground starts command in background mode and returns its pid and
// output file.
func startBackground(t *testing.T, tl *Tool, command string) (int, string) {
	t.Helper()
	res := call(t, tl, fmt.Sprintf(`{"command": %q, "mode": "background"}`, command))
	m := backgroundRE.FindStringSubmatch(res.Text)
	if res.IsError || m == nil || m[1] != m[3] {
		t.Fatalf("background answer %+v", res)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid, m[2]
}

// waitFor polls the output file until it contains want.
func waitFor(t *testing.T, file, want string, within time.Duration) string {
	t.Helper()
	var b []byte
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ = os.ReadFile(file)
		if strings.Contains(string(b), want) {
			return string(b)
		}
	}
	t.Fatalf("%s never contained %q; it has %q", file, want, b)
	return ""
}

func TestBackgroundLifecycle(t *testing.T) {
	token := proctest.Token(t)
	tl := newTool(t, token)
	pid, file := startBackground(t, tl, "echo start; sleep 1; echo done")
	if pid <= 0 {
		t.Fatal("no pid")
	}
	for _, p := range []string{file, filepath.Dir(file)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
	out := waitFor(t, file, "[background process completed]", 10*time.Second)
	if out != "start\ndone\n\n\n[background process completed]\n" {
		t.Errorf("output file %q", out)
	}
	// The record is written just after the completion line.
	info, err := jobs.ReadInfo(filepath.Dir(file))
	for deadline := time.Now().Add(5 * time.Second); err == nil && info.Running() && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		info, err = jobs.ReadInfo(filepath.Dir(file))
	}
	if err != nil || info.State != "exited" || info.ExitCode == nil || *info.ExitCode != 0 || info.Pid != pid || info.Tool != "bash" || info.Conversation != "test" {
		t.Errorf("job record %+v %v", info, err)
	}
	proctest.NoSurvivors(t, token)
}

func TestBackgroundFailures(t *testing.T) {
	token := proctest.Token(t)
	tl := newTool(t, token)
	_, file := startBackground(t, tl, "echo oops; exit 3")
	if out := waitFor(t, file, "[background process failed", 10*time.Second); out != "oops\n\n\n[background process failed: exit status: 3]\n" {
		t.Errorf("exit 3: %q", out)
	}
	// The reminder's command stops the job.
	pid, file := startBackground(t, tl, "echo up; sleep 60")
	waitFor(t, file, "up\n", 10*time.Second)
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if out := waitFor(t, file, "[background process failed", 10*time.Second); out != "up\n\n\n[background process failed: signal: 9 (SIGKILL)]\n" {
		t.Errorf("kill -9: %q", out)
	}
	proctest.NoSurvivors(t, token)
}

func TestBackgroundLifetime(t *testing.T) {
	token := proctest.Token(t)
	tl := newTool(t, token)
	tl.BackgroundLifetime = 500 * time.Millisecond
	_, file := startBackground(t, tl, "sleep 60 & sleep 60")
	out := waitFor(t, file, "[background process failed", 10*time.Second)
	if !strings.HasPrefix(out, "\n\n[background process failed: stopped after reaching its lifetime of 500ms]\n") {
		t.Errorf("got %q", out)
	}
	proctest.NoSurvivors(t, token)
}

func TestInvalidInput(t *testing.T) {
	big := strings.Repeat("y", 10<<20)
	cases := []struct{ name, in, want string }{
		{"missing", `{}`, "invalid input: command: is required and cannot be empty"},
		{"null", `{"command": null}`, "invalid input: command: is required and cannot be empty"},
		{"blank", `{"command": "  "}`, "invalid input: command: is required and cannot be empty"},
		{"number", `{"command": 1}`, "invalid input: command: must be a string, not a number"},
		{"mode number", `{"command": "ls", "mode": 2}`, "invalid input: mode: must be a string, not a number"},
		{"mode case", `{"command": "ls", "mode": "Background"}`, `invalid input: mode: must be one of default, slow, background; got "Background"`},
		{"extra", `{"command": "ls", "timeout": 5}`, "invalid input: timeout: is not a known field; the accepted fields are command, mode"},
		{"NUL", `{"command": "ls\u0000"}`, "invalid input: command: contains a NUL byte"},
		{"bad UTF-8", "{\"command\": \"ls \xc3\"}", "invalid input: command: is not valid UTF-8"},
		{"10 MB", `{"command": "` + big + `"}`, "invalid input: command: is 10485760 bytes"},
		{"array", `[]`, "invalid input: the input must be a JSON object, not an array"},
	}
	tl := newTool(t, proctest.Token(t))
	tl.Shell = "/no/such/shell"
	for _, c := range cases {
		res := call(t, tl, c.in)
		if res.Kind != tool.KindValidation || !strings.HasPrefix(res.Text, c.want) || res.Run != nil {
			t.Errorf("%s: got %q", c.name, res.Text[:min(200, len(res.Text))])
		}
	}
}

func TestGoldenBackground(t *testing.T) {
	want, _ := os.ReadFile("testdata/golden/background.txt")
	if got := BackgroundText(4242, "/tmp/agentexec-1000/jobs/x/output"); got != string(want) {
		t.Errorf("got %q", got)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"command":"ls"}`, `{"command":"ls","mode":"slow"}`, `{"mode":"background"}`, `{"command":"","mode":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := Decode(raw)
		if err != nil {
			return
		}
		if strings.TrimSpace(in.Command) == "" || (in.Mode != ModeDefault && in.Mode != ModeSlow && in.Mode != ModeBackground) {
			t.Fatalf("accepted %+v", in)
		}
	})
}

// BenchmarkDispatch measures a whole bash tool call (decode, policy, audit
// to memory, run, render) beside the same command run by the runner alone.
func BenchmarkDispatch(b *testing.B) {
	b.Run("baseline=runner.Run", func(b *testing.B) {
		for b.Loop() {
			if _, err := runner.Run(context.Background(), runner.Spec{Command: "true", Shell: "bash"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("registry.Dispatch", func(b *testing.B) {
		r := tool.NewRegistry()
		r.Register(New())
		r.Audit = &discardCounter{}
		c := &tool.Call{WorkDir: b.TempDir()}
		in := json.RawMessage(`{"command": "true"}`)
		for b.Loop() {
			if res := r.Dispatch(context.Background(), c, Name, in); res.IsError {
				b.Fatal(res.Text)
			}
		}
	})
}

type discardCounter struct{ n int }

func (d *discardCounter) Write(audit.Event) error { d.n++; return nil }

// guardedRegistry is a registry with the guarded policy in front of the
// bash tool, as the CLI and the MCP server build it.
func guardedRegistry(t *testing.T, tl *Tool) (*tool.Registry, *audit.Memory) {
	t.Helper()
	eng, err := policy.NewEngine(policy.Guarded, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := tool.NewRegistry()
	r.Register(tl)
	r.Checkers = []policy.Checker{eng}
	mem := &audit.Memory{}
	r.Audit = mem
	return r, mem
}

// blocked runs a command the checker refuses and checks that nothing ran.
func blocked(t *testing.T, command, message string) {
	t.Helper()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	r, mem := guardedRegistry(t, newTool(t, proctest.Token(t)))
	res := r.Dispatch(context.Background(), &tool.Call{WorkDir: dir}, Name,
		json.RawMessage(fmt.Sprintf(`{"command": %q}`, "touch "+marker+"; "+command)))
	if res.Kind != tool.KindPermissionDenied || res.Text != message || res.Run != nil {
		t.Errorf("got %+v", res)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a refused command ran")
	}
	if ev := mem.Events(); len(ev) != 1 || ev[0].Type != audit.Denied || ev[0].Decision != "deny" {
		t.Errorf("audit %+v", ev)
	}
}

// Seed 001's four integration tests: the checks run before execution.
func Test_blocked_git_add(t *testing.T) {
	blocked(t, "git add -A", "permission denied: blind git add commands (git add -A, git add ., git add --all, git add *) are not allowed, specify files explicitly")
}

func Test_blocked_rm_rf_root(t *testing.T) {
	blocked(t, "rm -rf /", "permission denied: this rm command could delete critical data (.git, home directory, or root). Specify the full path explicitly (no wildcards, ~, or $HOME)")
}

func Test_blocked_git_push_force(t *testing.T) {
	blocked(t, "git push --force", "permission denied: git push --force is not allowed. Use --force-with-lease for safer force pushes, or push without force")
}

func Test_allowed_command_runs(t *testing.T) {
	r, mem := guardedRegistry(t, newTool(t, proctest.Token(t)))
	res := r.Dispatch(context.Background(), &tool.Call{WorkDir: t.TempDir()}, Name, json.RawMessage(`{"command": "echo allowed && git --version >/dev/null"}`))
	if res.IsError || res.Text != "allowed\n" {
		t.Errorf("got %+v", res)
	}
	if ev := mem.Events(); len(ev) != 2 || ev[0].Type != audit.Dispatched || ev[1].Type != audit.Finished {
		t.Errorf("audit %+v", ev)
	}
}

func TestParseFailureRefused(t *testing.T) {
	blocked(t, `echo "unterminated`, "Failed to parse script")
}
