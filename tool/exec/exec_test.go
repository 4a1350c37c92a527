//go:build linux

package exec

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/tool"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// call runs one call of t through a registry, as a host would.
func call(t *testing.T, tl *Tool, input string) *tool.Result {
	t.Helper()
	r := tool.NewRegistry()
	if err := r.Register(tl); err != nil {
		t.Fatal(err)
	}
	return r.Dispatch(context.Background(), &tool.Call{WorkDir: t.TempDir()}, Name, json.RawMessage(input))
}

func TestExecute_simpleCommand(t *testing.T) {
	res := call(t, New(), `{"command": "echo hello"}`)
	if res.IsError || res.Text != "[Exit Code: 0]\n\nhello" {
		t.Errorf("got %+v", res)
	}
}

func TestExecute_commandWithExitCode(t *testing.T) {
	res := call(t, New(), `{"command": "exit 42"}`)
	if res.IsError || res.Text != "[Exit Code: 42]\n\n(no output)" {
		t.Errorf("got %+v", res)
	}
}

func TestExecute_commandWithStderr(t *testing.T) {
	res := call(t, New(), `{"command": "echo out; echo err >&2; exit 1"}`)
	if res.Text != "[Exit Code: 1]\n\nout\n\n[stderr]\nerr" {
		t.Errorf("got %q", res.Text)
	}
}

func TestExecute_commandWithPipes(t *testing.T) {
	res := call(t, New(), `{"command": "echo hello | tr a-z A-Z"}`)
	if res.Text != "[Exit Code: 0]\n\nHELLO" {
		t.Errorf("got %q", res.Text)
	}
}

func TestExecute_timeout(t *testing.T) {
	token := proctest.Token(t)
	tl := &Tool{Env: append(runner.SafeEnv(), token), Grace: 200 * time.Millisecond}
	start := time.Now()
	res := call(t, tl, `{"command": "echo partial; sleep 60 & sleep 60", "timeout_seconds": 2}`)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	want := "[Exit Code: -1 (timeout after 2s)]\n\npartial\n\n[stderr]\nProcess killed after 2 seconds timeout."
	if res.IsError || res.Text != want {
		t.Errorf("got %+v\nwant %q", res, want)
	}
	proctest.NoSurvivors(t, token)
}

func TestExecute_workingDirectory(t *testing.T) {
	dir := t.TempDir()
	res := call(t, New(), `{"command": "pwd", "working_directory": "`+dir+`"}`)
	if res.Text != "[Exit Code: 0]\n\n"+dir {
		t.Errorf("got %q", res.Text)
	}
	// A relative directory is taken from the workspace.
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	r := tool.NewRegistry()
	r.Register(New())
	res = r.Dispatch(context.Background(), &tool.Call{WorkDir: ws}, Name, json.RawMessage(`{"command": "pwd", "working_directory": "sub"}`))
	if res.Text != "[Exit Code: 0]\n\n"+filepath.Join(ws, "sub") {
		t.Errorf("relative: got %q", res.Text)
	}
	// Default: the workspace.
	res = r.Dispatch(context.Background(), &tool.Call{WorkDir: ws}, Name, json.RawMessage(`{"command": "pwd"}`))
	if res.Text != "[Exit Code: 0]\n\n"+ws {
		t.Errorf("default: got %q", res.Text)
	}
}

func TestExecute_emptyCommand(t *testing.T) {
	for _, in := range []string{`{"command": ""}`, `{"command": "   \n"}`, `{}`, `{"command": null}`} {
		res := call(t, New(), in)
		if !res.IsError || res.Kind != tool.KindValidation || res.Text != "Parameter 'command' is required and cannot be empty" {
			t.Errorf("%s: got %+v", in, res)
		}
	}
}

func TestExecute_invalidWorkingDir(t *testing.T) {
	res := call(t, New(), `{"command": "pwd", "working_directory": "/no/such/dir"}`)
	if res.Kind != tool.KindValidation || res.Text != "Working directory does not exist: /no/such/dir" {
		t.Errorf("got %+v", res)
	}
	res = call(t, New(), `{"command": "pwd", "working_directory": "/etc/hostname"}`)
	if res.Kind != tool.KindValidation || res.Text != "Working directory does not exist: /etc/hostname" {
		t.Errorf("a file: got %+v", res)
	}
}

func TestExecute_maxLength(t *testing.T) {
	res := call(t, New(), `{"command": "head -c 200000 /dev/zero | tr '\\0' a; echo; echo done >&2", "max_length": 100}`)
	want := "[Exit Code: 0]\n\n" + strings.Repeat("a", 100) + "\n[output truncated: showing the first 100 of 200001 characters]\n\n[stderr]\ndone"
	if res.Text != want {
		t.Errorf("got %q", res.Text)
	}
	// Characters, not bytes: 10 three-byte runes fit a limit of 10.
	res = call(t, New(), `{"command": "printf '€€€€€€€€€€'", "max_length": "10"}`)
	if res.Text != "[Exit Code: 0]\n\n€€€€€€€€€€" {
		t.Errorf("chars: got %q", res.Text)
	}
	// The default is 50,000 characters, and the child is never blocked.
	start := time.Now()
	res = call(t, New(), `{"command": "head -c 50000000 /dev/zero | tr '\\0' b"}`)
	if !strings.Contains(res.Text, "[output truncated: showing the first 50000 of 50000000 characters]") {
		t.Errorf("default: got %q", res.Text[len(res.Text)-100:])
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("50 MB took %v", d)
	}
}

func TestExecute_noOutput(t *testing.T) {
	res := call(t, New(), `{"command": "true"}`)
	if res.Text != "[Exit Code: 0]\n\n(no output)" {
		t.Errorf("got %q", res.Text)
	}
}

func TestExecute_timeoutClamped(t *testing.T) {
	cases := []struct {
		in   string
		want int
	}{
		{`500`, 120}, {`1e300`, 120}, {`0`, 1}, {`-5`, 1}, {`"45"`, 45}, {`30.9`, 30}, {`"2.5"`, 2}, {`-1e300`, 1}, {`null`, 30},
	}
	for _, c := range cases {
		in, err := Decode(json.RawMessage(`{"command":"true","timeout_seconds":`+c.in+`}`), "/")
		if err != nil || in.TimeoutSeconds != c.want {
			t.Errorf("timeout_seconds %s: got %+v %v, want %d", c.in, in, err, c.want)
		}
	}
}

func TestDefinition(t *testing.T) {
	tl := New()
	if tl.Name() != "exec" || tl.Description(nil) != "Execute a shell command on the device and return its output" {
		t.Errorf("name %q description %q", tl.Name(), tl.Description(nil))
	}
	var s struct {
		Type       string
		Properties map[string]struct{ Type string }
		Required   []string
	}
	if err := json.Unmarshal(tl.InputSchema(), &s); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"command": "string", "timeout_seconds": "integer", "working_directory": "string", "max_length": "integer"}
	for k, v := range want {
		if s.Properties[k].Type != v {
			t.Errorf("property %s: %q, want %q", k, s.Properties[k].Type, v)
		}
	}
	if len(s.Properties) != 4 || len(s.Required) != 1 || s.Required[0] != "command" {
		t.Errorf("schema %+v", s)
	}
}

// TestGolden renders each output example of the seed and compares it byte
// for byte.
func TestGolden(t *testing.T) {
	cases := map[string]Output{
		"success.txt": {ExitCode: 0, Stdout: "total 48\ndrwxr-xr-x  2 u0_a123 u0_a123 4096 2026-03-01 10:00 .\n-rw-r--r--  1 u0_a123 u0_a123 1234 2026-03-01 09:30 file.txt\n"},
		"error.txt":   {ExitCode: 1, Stderr: "ls: cannot access '/nonexistent': No such file or directory\n"},
		"both.txt":    {ExitCode: 0, Stdout: "Processing file1.txt\nProcessing file2.txt\n", Stderr: "Warning: file3.txt skipped (empty)\n"},
		"timeout.txt": {TimedOut: true, TimeoutSeconds: 30, Stdout: "partial output here..."},
	}
	for name, out := range cases {
		want, err := os.ReadFile(filepath.Join("testdata", "golden", name))
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Format(); got != string(want) {
			t.Errorf("%s:\ngot  %q\nwant %q", name, got, want)
		}
	}
}

// TestInvalidInput: bad input is always a validation error naming the
// field, and nothing is spawned.
func TestInvalidInput(t *testing.T) {
	big := strings.Repeat("x", 10<<20)
	cases := []struct {
		name, in, want string
	}{
		{"not an object", `[1]`, "Invalid parameters: the input must be a JSON object, not an array"},
		{"not JSON", `{"command":`, "Parameter 'command' has a value that is not valid JSON"},
		{"command number", `{"command": 42}`, "Parameter 'command' must be a string, not a number"},
		{"command array", `{"command": ["ls"]}`, "Parameter 'command' must be a string, not an array"},
		{"timeout bool", `{"command": "true", "timeout_seconds": true}`, "Parameter 'timeout_seconds' must be a number, not a boolean"},
		{"timeout words", `{"command": "true", "timeout_seconds": "soon"}`, `Parameter 'timeout_seconds' must be a number; "soon" is not one`},
		{"timeout overflow", `{"command": "true", "timeout_seconds": 1e999}`, "Parameter 'timeout_seconds' must be a number within range"},
		{"max_length object", `{"command": "true", "max_length": {}}`, "Parameter 'max_length' must be a number, not an object"},
		{"dir number", `{"command": "true", "working_directory": 7}`, "Parameter 'working_directory' must be a string, not a number"},
		{"extra field", `{"command": "true", "shell": "zsh"}`, "Parameter 'shell' is not a known field; the accepted fields are command, timeout_seconds, working_directory, max_length"},
		{"duplicate", `{"command": "true", "command": "false"}`, "Parameter 'command' is given more than once"},
		{"NUL", `{"command": "echo a\u0000b"}`, "Parameter 'command' contains a NUL byte"},
		{"dir NUL", `{"command": "true", "working_directory": "/tmp\u0000x"}`, "Parameter 'working_directory' contains a NUL byte"},
		{"invalid UTF-8", "{\"command\": \"echo \xff\"}", "Parameter 'command' is not valid UTF-8"},
		{"10 MB", `{"command": "` + big + `"}`, "Parameter 'command' is 10485760 bytes; the limit for one argument is 131071 bytes"},
	}
	token := proctest.Token(t)
	tl := &Tool{Env: append(runner.SafeEnv(), token), Shell: "/no/such/shell"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := call(t, tl, c.in)
			if !res.IsError || res.Kind != tool.KindValidation || !strings.HasPrefix(res.Text, c.want) || res.Run != nil {
				t.Errorf("got %+v\nwant prefix %q", shortResult(res), c.want)
			}
		})
	}
}

func shortResult(r *tool.Result) string {
	s := r.Text
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return string(r.Kind) + ": " + s
}

func TestStartFailure(t *testing.T) {
	res := call(t, &Tool{Shell: "/no/such/shell"}, `{"command": "true"}`)
	if res.Kind != tool.KindExecution || !strings.HasPrefix(res.Text, "Failed to start process: ") {
		t.Errorf("got %+v", res)
	}
}

func TestCancel(t *testing.T) {
	token := proctest.Token(t)
	r := tool.NewRegistry()
	r.Register(&Tool{Env: append(runner.SafeEnv(), token), Grace: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var once bool
	c := &tool.Call{WorkDir: t.TempDir(), OnOutput: func(string, []byte) {
		if !once {
			once = true
			cancel()
		}
	}}
	res := r.Dispatch(ctx, c, Name, json.RawMessage(`{"command": "echo started; sleep 60"}`))
	if res.Kind != tool.KindCancelled || !strings.HasPrefix(res.Text, "[Exit Code: -1 (cancelled)]\n\nstarted\n\n[stderr]\nProcess killed: the call was cancelled.") {
		t.Errorf("got %+v", res)
	}
	proctest.NoSurvivors(t, token)
}

func TestSignalExitCode(t *testing.T) {
	res := call(t, New(), `{"command": "kill -9 $$"}`)
	if res.Text != "[Exit Code: 137]\n\n(no output)" {
		t.Errorf("got %q", res.Text)
	}
}

func TestSecretsDoNotLeak(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-secret")
	res := call(t, New(), `{"command": "env"}`)
	if strings.Contains(res.Text, "sk-secret") {
		t.Errorf("a host secret reached the command: %q", res.Text)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"command":"ls"}`, `{"command":"ls","timeout_seconds":"5"}`, `{"command":" ","max_length":-1}`, `{"working_directory":"/"}`, `{"command":"x","timeout_seconds":1e308}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := Decode(raw, "/")
		if err != nil {
			if err.Problem == "" || validationResult(err).Kind != tool.KindValidation {
				t.Fatalf("unusable error: %#v", err)
			}
			return
		}
		if in.Command == "" || in.TimeoutSeconds < 1 || in.TimeoutSeconds > MaxTimeoutSeconds || in.MaxLength < 1 || in.MaxLength > MaxMaxLength {
			t.Fatalf("accepted out of range input: %+v", in)
		}
	})
}
