//go:build linux

package unifiedexec

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentexec/agentexec/tool"
)

var headerRE = regexp.MustCompile(`^Wall time: \d+\.\d seconds\nProcess (exited with code -?\d+|running with session ID [0-9a-f]{16})\nOutput:\n`)

func TestPythonREPL(t *testing.T) {
	f := newFixture(t)
	res := f.call(ExecCommandName, map[string]any{"cmd": "python3 -i -q", "tty": true, "yield_time_ms": 1000})
	if !headerRE.MatchString(res.Text) {
		t.Fatalf("header: %q", res.Text)
	}
	id := running(t, res)
	f.until(id, output(res), ">>> ")
	res = f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "print(6*7)\n", "yield_time_ms": 1000})
	got := output(res)
	if !strings.Contains(got, "42\n>>> ") {
		// a slow machine: poll for the rest
		got += output(f.call(WriteStdinName, map[string]any{"session_id": id}))
	}
	if !strings.Contains(got, "42\n>>> ") {
		t.Fatalf("no 42 and prompt: %q", got)
	}
	res = f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "\u0004", "yield_time_ms": 5000})
	exited(t, res, "0")
	// The record is gone once its end was reported.
	res = f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "x"})
	if !res.IsError || !strings.Contains(res.Text, "no session with ID") {
		t.Fatalf("after the end: %q", res.Text)
	}
}

func TestReadPrompt(t *testing.T) {
	f := newFixture(t)
	id := running(t, f.call(ExecCommandName, map[string]any{"cmd": "read -p 'name? ' n; echo hi $n", "tty": true, "yield_time_ms": 500}))
	res := f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "bob\n", "yield_time_ms": 5000})
	exited(t, res, "0")
	if !strings.Contains(output(res), "hi bob") {
		t.Fatalf("output %q", res.Text)
	}
}

func TestPollReturnsOnExitWithoutWaitingItsYield(t *testing.T) {
	f := newFixture(t)
	id := running(t, f.call(ExecCommandName, map[string]any{"cmd": "sleep 2; echo done", "yield_time_ms": 250}))
	start := time.Now()
	res := f.call(WriteStdinName, map[string]any{"session_id": id, "yield_time_ms": 60000})
	exited(t, res, "0")
	if output(res) != "done\n" {
		t.Errorf("output %q", output(res))
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the poll took %v: it should end when the process does (about 2s)", d)
	}
}

func TestFastCommandReturnsFast(t *testing.T) {
	f := newFixture(t)
	start := time.Now()
	res := f.call(ExecCommandName, map[string]any{"cmd": "sleep 0.05; echo ok", "yield_time_ms": 10000})
	d := time.Since(start)
	exited(t, res, "0")
	if output(res) != "ok\n" {
		t.Errorf("output %q", output(res))
	}
	if d > 5*time.Second { // well under the 10 s yield even on a loaded machine
		t.Errorf("took %v", d)
	}
}

func TestCtrlCStopsSleepInTTY(t *testing.T) {
	f := newFixture(t)
	id := running(t, f.call(ExecCommandName, map[string]any{"cmd": "sleep 100", "tty": true, "yield_time_ms": 250}))
	res := f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "\u0003", "yield_time_ms": 10000})
	exited(t, res, "130")
	// cleanup checks that nothing survived
}

func TestCatWithoutTTYGetsEOF(t *testing.T) {
	f := newFixture(t)
	start := time.Now()
	res := f.call(ExecCommandName, map[string]any{"cmd": "cat; echo eof", "yield_time_ms": 30000})
	exited(t, res, "0")
	if output(res) != "eof\n" || time.Since(start) > 10*time.Second {
		t.Errorf("output %q after %v", output(res), time.Since(start))
	}
}

func TestWriteToPipeSessionWithoutStdin(t *testing.T) {
	f := newFixture(t)
	id := running(t, f.call(ExecCommandName, map[string]any{"cmd": "sleep 100", "yield_time_ms": 250}))
	res := f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "x"})
	if !res.IsError || !strings.Contains(res.Text, "stdin is closed for this session; rerun exec_command with tty=true") {
		t.Fatalf("%q", res.Text)
	}
}

func TestPipeStdin(t *testing.T) {
	f := newFixture(t)
	id := running(t, f.call(ExecCommandName, map[string]any{"cmd": "python3 -c 'import sys; print(sys.stdin.readline().upper(), end=\"\")'", "pipe_stdin": true, "yield_time_ms": 250}))
	// While python3 starts (a version manager's shim runs a shell and
	// readlink first), the reader changes under the check, and the answer
	// says to send the input again, as a model would.
	res := f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "abc\n", "yield_time_ms": 10000})
	for try := 1; try < 20 && res.IsError && strings.Contains(res.Text, "send it again"); try++ {
		time.Sleep(50 * time.Millisecond)
		res = f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "abc\n", "yield_time_ms": 10000})
	}
	exited(t, res, "0")
	if output(res) != "ABC\n" {
		t.Errorf("output %q", output(res))
	}
}

func TestWriteToEndedSession(t *testing.T) {
	f := newFixture(t)
	id := running(t, f.call(ExecCommandName, map[string]any{"cmd": "echo ready; read x; echo bye; exit 3", "tty": true, "yield_time_ms": 250}))
	e, _ := f.m.Get(id, "c1")
	e.Session.Write([]byte("go\n")) // behind the model's back
	<-e.Session.Ended()
	res := f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "\u0003"})
	exited(t, res, "3")
	if !strings.Contains(output(res), "bye") {
		t.Errorf("remaining output missing: %q", res.Text)
	}
}

func TestDeniedLineIsNotExecuted(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	mark := filepath.Join(dir, "pushed")
	id := running(t, f.call(ExecCommandName, map[string]any{"cmd": "bash --norc --noprofile -i", "tty": true, "yield_time_ms": 500}))
	res := f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "git() { touch " + mark + "; }; echo defined\n", "yield_time_ms": 1000})
	if res.IsError {
		t.Fatalf("defining a function was refused: %q", res.Text)
	}
	for _, chars := range []string{"git push --force origin main\n", "git push --fo", "rce origin main\r"} {
		res = f.call(WriteStdinName, map[string]any{"session_id": id, "chars": chars, "yield_time_ms": 500})
		if chars == "git push --fo" {
			if res.IsError {
				t.Fatalf("an unfinished line was refused: %q", res.Text)
			}
			continue
		}
		if !res.IsError || res.Kind != tool.KindPermissionDenied {
			t.Fatalf("%q was not refused: %q", chars, res.Text)
		}
	}
	res = f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "\u0015echo alive\n", "yield_time_ms": 1000})
	if !strings.Contains(output(res), "alive") {
		res = f.call(WriteStdinName, map[string]any{"session_id": id})
	}
	if !strings.Contains(res.Text, "alive") {
		t.Fatalf("the session does not answer: %q", res.Text)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the refused line ran")
	}
	res = f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "git pu\t"})
	if !res.IsError || !strings.Contains(res.Text, "Tab") {
		t.Fatalf("Tab at a shell prompt: %q", res.Text)
	}
}

func TestExecCommandGoesThroughPolicy(t *testing.T) {
	f := newFixture(t)
	res := f.call(ExecCommandName, map[string]any{"cmd": "git push --force origin main"})
	if !res.IsError || res.Kind != tool.KindPermissionDenied {
		t.Fatalf("%q", res.Text)
	}
}

func TestProgramInputWithoutSandboxAsks(t *testing.T) {
	f := newFixture(t)
	f.write.ProgramInput = ""
	res := f.call(ExecCommandName, map[string]any{"cmd": "python3 -i -q", "tty": true, "yield_time_ms": 1000})
	id := running(t, res)
	f.until(id, output(res), ">>> ")
	res = f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "print(1)\n"})
	if !res.IsError || !strings.Contains(res.Text, "not a shell") {
		t.Fatalf("input to python without a sandbox and nobody to ask: %q", res.Text)
	}
	approve := tool.ApproverFunc(func(_ context.Context, r tool.ApprovalRequest) (tool.Approval, error) {
		return tool.Approval{Approved: r.Decision.Rule == RuleProgramInput}, nil
	})
	raw := []byte(`{"session_id":"` + id + `","chars":"print(6*7)\n","yield_time_ms":2000}`)
	res = f.r.Dispatch(context.Background(), &tool.Call{Conversation: "c1", Approver: approve}, WriteStdinName, raw)
	if res.IsError || !strings.Contains(res.Text, "42") {
		t.Fatalf("approved input: %q", res.Text)
	}
}

func TestEchoOffRecordsLengthOnly(t *testing.T) {
	f := newFixture(t)
	id := running(t, f.call(ExecCommandName, map[string]any{"cmd": "read -s -p 'password: ' pw; echo; echo got ${#pw}", "tty": true, "yield_time_ms": 500}))
	res := f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "hunter22\n", "yield_time_ms": 5000})
	exited(t, res, "0")
	if !strings.Contains(output(res), "got 8") {
		t.Fatalf("%q", res.Text)
	}
	found := false
	for _, ev := range f.log.Events() {
		if strings.Contains(fmt.Sprintf("%+v", ev), "hunter22") {
			t.Errorf("the password reached the audit log: %+v", ev)
		}
		if ev.Type == "session.input" && ev.Session == id {
			found = true
			if ev.InputBytes != 9 {
				t.Errorf("input_bytes %d", ev.InputBytes)
			}
		}
	}
	if !found {
		t.Error("no session.input event")
	}
}

func TestAuditEvents(t *testing.T) {
	f := newFixture(t)
	id := running(t, f.call(ExecCommandName, map[string]any{"cmd": "cat", "tty": true, "yield_time_ms": 250}))
	f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "hello\n"})
	exited(t, f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "\u0004", "yield_time_ms": 5000}), "0")
	f.m.Close() // waits for the end event
	var types []string
	for _, ev := range f.log.Events() {
		if ev.Session == id {
			types = append(types, ev.Type)
			if ev.Type == "session.input" && ev.InputBytes == 6 && ev.Command != "hello\n" {
				t.Errorf("program input not recorded: %+v", ev)
			}
		}
	}
	want := "session.started session.input session.input session.ended"
	if strings.Join(types, " ") != want {
		t.Errorf("events %v, want %s", types, want)
	}
}

func TestSessionsAreScopedToTheirConversation(t *testing.T) {
	f := newFixture(t)
	id := running(t, f.call(ExecCommandName, map[string]any{"cmd": "sleep 100", "tty": true, "yield_time_ms": 250}))
	for _, name := range []string{WriteStdinName, KillName} {
		res := f.callIn("c2", name, map[string]any{"session_id": id, "chars": "x"})
		if name == KillName {
			res = f.callIn("c2", name, map[string]any{"session_id": id})
		}
		if !res.IsError || !strings.Contains(res.Text, "no session with ID") {
			t.Errorf("%s from another conversation: %q", name, res.Text)
		}
	}
	if res := f.callIn("c2", ListName, map[string]any{}); strings.Contains(res.Text, id) {
		t.Errorf("listed to another conversation: %q", res.Text)
	}
	if res := f.call(ListName, map[string]any{}); !strings.Contains(res.Text, id) {
		t.Errorf("not listed: %q", res.Text)
	}
	res := f.call(KillName, map[string]any{"session_id": id})
	if res.IsError || !strings.Contains(res.Text, "ended") {
		t.Errorf("kill: %q", res.Text)
	}
}

func TestSessionCap(t *testing.T) {
	f := newFixture(t)
	f.m.MaxPerConversation = DefaultMaxLive
	var wg sync.WaitGroup
	ids := make([]string, DefaultMaxLive)
	texts := make([]string, DefaultMaxLive)
	for i := range DefaultMaxLive {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := f.callIn(fmt.Sprint("c", i%2), ExecCommandName, map[string]any{"cmd": "sleep 100", "yield_time_ms": 250})
			texts[i] = res.Text
			if m := sessionRE.FindStringSubmatch(res.Text); m != nil {
				ids[i] = m[1]
			}
		}()
	}
	wg.Wait()
	for i, id := range ids {
		if id == "" {
			t.Fatalf("session %d did not start: %q", i, texts[i])
		}
	}
	res := f.callIn("c0", ExecCommandName, map[string]any{"cmd": "echo one too many"})
	if !res.IsError || !strings.Contains(res.Text, "the limit is 64") || !strings.Contains(res.Text, ids[0]) || strings.Contains(res.Text, ids[1]) {
		t.Fatalf("the 65th session: %q", res.Text)
	}
	f.call(KillName, map[string]any{"session_id": ids[0]}) // c1 has ids[1], c0 has ids[0]
	f.callIn("c0", KillName, map[string]any{"session_id": ids[0]})
	exited(t, f.callIn("c0", ExecCommandName, map[string]any{"cmd": "echo room again"}), "0")
}

func TestPerConversationCap(t *testing.T) {
	f := newFixture(t)
	f.m.MaxPerConversation = 2
	for range 2 {
		running(t, f.call(ExecCommandName, map[string]any{"cmd": "sleep 100", "yield_time_ms": 250}))
	}
	res := f.call(ExecCommandName, map[string]any{"cmd": "sleep 100", "yield_time_ms": 250})
	if !res.IsError || !strings.Contains(res.Text, "this conversation already has 2 live sessions") || !strings.Contains(res.Text, "session_kill") {
		t.Fatalf("%q", res.Text)
	}
	running(t, f.callIn("other", ExecCommandName, map[string]any{"cmd": "sleep 100", "yield_time_ms": 250}))
}

func TestIdleExpiry(t *testing.T) {
	f := newFixture(t)
	f.m.IdleTimeout = 300 * time.Millisecond
	id := running(t, f.call(ExecCommandName, map[string]any{"cmd": "sleep 100", "tty": true, "yield_time_ms": 250}))
	e, ok := f.m.Get(id, "c1")
	if !ok {
		t.Fatal("no entry")
	}
	select {
	case <-e.Session.Ended():
	case <-time.After(30 * time.Second):
		t.Fatal("the idle session was not ended")
	}
	res := f.call(WriteStdinName, map[string]any{"session_id": id})
	if !res.IsError || !strings.Contains(res.Text, "no session with ID") {
		t.Fatalf("%q", res.Text)
	}
}

func TestShutdownEndsEverySession(t *testing.T) {
	f := newFixture(t)
	before := ptyFDs(t)
	for _, in := range []map[string]any{
		{"cmd": "sleep 100 & setsid sleep 100 & trap '' TERM HUP; wait", "tty": true},
		{"cmd": "bash --norc -i", "tty": true},
		{"cmd": "sleep 100 & wait"},
		{"cmd": "cat", "pipe_stdin": true},
	} {
		in["yield_time_ms"] = 250
		running(t, f.call(ExecCommandName, in))
	}
	f.exec.Grace = 100 * time.Millisecond
	f.m.Close()
	if after := ptyFDs(t); after > before {
		t.Errorf("descriptors on a pseudo-terminal: %d before, %d after", before, after)
	}
	res := f.call(ExecCommandName, map[string]any{"cmd": "true"})
	if !res.IsError || !strings.Contains(res.Text, "shutting down") {
		t.Errorf("after Close: %q", res.Text)
	}
}

func TestBigOutputIsBounded(t *testing.T) {
	size := int64(1 << 30) // CI runs it at full size without the race detector
	if testing.Short() || raceEnabled {
		size = 64 << 20
	}
	f := newFixture(t)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := f.call(ExecCommandName, map[string]any{"cmd": fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x", size), "yield_time_ms": 30000})
	for tries := 0; sessionRE.MatchString(res.Text) && tries < 20; tries++ {
		res = f.call(WriteStdinName, map[string]any{"session_id": sessionRE.FindStringSubmatch(res.Text)[1], "yield_time_ms": 30000})
	}
	exited(t, res, "0")
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if after.HeapInuse > before.HeapInuse+64<<20 {
		t.Errorf("heap grew from %d to %d MiB", before.HeapInuse>>20, after.HeapInuse>>20)
	}
	if !strings.Contains(res.Text, "bytes of earlier output were lost") || len(res.Text) > 50_000 {
		t.Errorf("reply of %d bytes: %.300q", len(res.Text), res.Text)
	}
	t.Logf("heap in use %d MiB after %d MiB of output", after.HeapInuse>>20, size>>20)
}

func TestValidation(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		name  string
		input string
		want  string
	}{
		{ExecCommandName, `{}`, "cmd: is required"},
		{ExecCommandName, `{"cmd":"  "}`, "cmd: is required"},
		{ExecCommandName, `{"cmd":"true","tty":"yes"}`, "tty: must be true or false"},
		{ExecCommandName, `{"cmd":"true","yield_time_ms":-1}`, "yield_time_ms: must not be negative"},
		{ExecCommandName, `{"cmd":"true","max_output_tokens":0}`, "max_output_tokens: must be at least 1"},
		{ExecCommandName, `{"cmd":"true","bogus":1}`, "bogus: is not a known field"},
		{ExecCommandName, `{"cmd":"print(1)","shell":"python3"}`, "shell: must be one of bash, sh"},
		{ExecCommandName, `{"cmd":"true","shell":"/tmp/bash-like"}`, "shell: must be one of"},
		{WriteStdinName, `{}`, "session_id: is required"},
		{WriteStdinName, `{"session_id":5}`, "session_id: must be a string"},
		{WriteStdinName, `{"session_id":"abc","chars":7}`, "chars: must be a string"},
		{WriteStdinName, `{"session_id":"abc"}`, "no session with ID"},
		{KillName, `{}`, "session_id: is required"},
		{WriteStdinName, `{"session_id":"abc","chars":"` + strings.Repeat("x", MaxChars+1) + `"}`, "chars: is 65537 bytes; the limit is 65536"},
	} {
		res := f.r.Dispatch(context.Background(), &tool.Call{Conversation: "c1"}, c.name, []byte(c.input))
		if !res.IsError || !strings.Contains(res.Text, c.want) {
			t.Errorf("%s %s: %q, want %q", c.name, c.input, res.Text, c.want)
		}
	}
}

func TestClamps(t *testing.T) {
	for _, c := range []struct {
		input string
		want  time.Duration
	}{
		{`{"cmd":"x"}`, DefaultYield},
		{`{"cmd":"x","yield_time_ms":1}`, MinYield},
		{`{"cmd":"x","yield_time_ms":1e12}`, MaxYield},
		{`{"cmd":"x","yield_time_ms":1500}`, 1500 * time.Millisecond},
	} {
		in, err := DecodeExec([]byte(c.input))
		if err != nil || in.Yield != c.want {
			t.Errorf("%s: %v %v, want %v", c.input, in, err, c.want)
		}
	}
	for _, c := range []struct {
		input string
		want  time.Duration
	}{
		{`{"session_id":"a","chars":"x"}`, DefaultWriteYield},
		{`{"session_id":"a","chars":"x","yield_time_ms":99999}`, MaxYield},
		{`{"session_id":"a"}`, MinPollYield},
		{`{"session_id":"a","yield_time_ms":1e9}`, MaxPollYield},
		{`{"session_id":"a","chars":"","yield_time_ms":60000}`, time.Minute},
	} {
		in, err := DecodeWrite([]byte(c.input))
		if err != nil || in.Yield != c.want {
			t.Errorf("%s: %v %v, want %v", c.input, in, err, c.want)
		}
	}
}

func TestShellInput(t *testing.T) {
	for _, c := range []struct {
		pending, chars, lines, rest, bad string
	}{
		{"", "ls\n", "ls\n", "", ""},
		{"", "ls", "", "ls", ""},
		{"git push --fo", "rce\r", "git push --force\n", "", ""},
		{"rm -rf /", "\u0003echo hi\n", "echo hi\n", "", ""},
		{"", "rm -rf /tmpx\x7f\n", "rm -rf /tmp\n", "", ""},
		{"", "a\nb\nc", "a\nb\n", "c", ""},
		{"", "echo\u0004", "echo\n", "", ""},
		{"", "x\u0015y\n", "y\n", "", ""},
		{"", "ls\t", "", "", "Tab (completion)"},
		{"", "\x1b[A\n", "", "", "an escape sequence (arrow or function key)"},
		{"", "\x01rm ", "", "", "Ctrl-A"},
		{"", "\x12", "", "", "Ctrl-R"},
	} {
		lines, rest, bad := shellInput([]byte(c.pending), c.chars)
		if lines != c.lines || string(rest) != c.rest || bad != c.bad {
			t.Errorf("shellInput(%q, %q) = %q, %q, %q; want %q, %q, %q", c.pending, c.chars, lines, rest, bad, c.lines, c.rest, c.bad)
		}
	}
}

func TestTruncate(t *testing.T) {
	s := strings.Repeat("é", 100) + strings.Repeat("x", 100)
	out, cut := truncate(s, 41)
	if !cut || !strings.Contains(out, "bytes (about") || !strings.HasPrefix(out, strings.Repeat("é", 10)) || !strings.HasSuffix(out, strings.Repeat("x", 21)) {
		t.Errorf("%q", out)
	}
	if out, cut := truncate("short", 100); cut || out != "short" {
		t.Errorf("%q", out)
	}
}

// TestTypeaheadIsChecked: input to a program that is not a shell is still
// refused when a line would be denied as a shell command, since what the
// program leaves unread reaches the shell that reads next. Echo-off input
// (a password prompt) is checked the same way, and still recorded by
// length only.
func TestTypeaheadIsChecked(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	mark := filepath.Join(dir, "pushed")
	res := f.call(ExecCommandName, map[string]any{"cmd": "git() { touch " + mark + "; }; export -f git; stty -echo; echo ready; sleep 1; exec bash --norc --noprofile --noediting", "tty": true, "yield_time_ms": 250})
	id := running(t, res)
	f.until(id, output(res), "ready")
	for _, chars := range []string{"git push --force origin main\n", "echo fine\rgit push -f\n"} {
		res = f.call(WriteStdinName, map[string]any{"session_id": id, "chars": chars})
		if !res.IsError || res.Kind != tool.KindPermissionDenied || !strings.Contains(res.Text, "a shell may read what the program leaves unread") {
			t.Fatalf("typeahead %q: %q", chars, res.Text)
		}
	}
	res = f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "echo still here\n", "yield_time_ms": 3000})
	got := f.until(id, output(res), "still here")
	res = f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "git push --force\n"})
	if !res.IsError {
		t.Fatalf("a denied line typed into the shell with echo off: %q", res.Text)
	}
	exited(t, f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "exit 0\n", "yield_time_ms": 5000}), "0")
	if _, err := os.Stat(mark); err == nil {
		t.Fatalf("a refused line ran; output %q", got)
	}
	for _, ev := range f.log.Events() {
		if ev.Type == "session.input" && ev.Command != "" {
			t.Errorf("input typed with echo off was recorded: %+v", ev)
		}
	}
}
