//go:build linux

package shellexec

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/tool"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func dispatch(t *testing.T, tl *Tool, c *tool.Call, input string) (*tool.Result, *audit.Memory) {
	t.Helper()
	r := tool.NewRegistry()
	r.Register(tl)
	mem := &audit.Memory{}
	r.Audit = mem
	if c == nil {
		c = &tool.Call{WorkDir: t.TempDir()}
	}
	return r.Dispatch(context.Background(), c, Name, json.RawMessage(input)), mem
}

func output(t *testing.T, res *tool.Result) Output {
	t.Helper()
	var out Output
	if err := json.Unmarshal([]byte(res.Text), &out); err != nil {
		t.Fatalf("not the JSON result: %q", res.Text)
	}
	return out
}

func TestSchema(t *testing.T) {
	var s struct {
		Properties map[string]struct {
			Type  string
			Items *struct{ Type string }
		}
		Required []string
	}
	if err := json.Unmarshal(New().InputSchema(), &s); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"executable": "string", "argv": "array", "cwd": "string", "env": "object", "timeout_ms": "integer"}
	for k, v := range want {
		if s.Properties[k].Type != v {
			t.Errorf("%s: %q, want %q", k, s.Properties[k].Type, v)
		}
	}
	if len(s.Properties) != 5 || strings.Join(s.Required, ",") != "executable" || s.Properties["argv"].Items.Type != "string" {
		t.Errorf("schema %+v", s)
	}
	golden, _ := os.ReadFile("testdata/golden/result.json")
	code := 0
	got, _ := json.Marshal(Output{Stdout: "...", Stderr: "...", Success: true, ExitCode: &code})
	if string(got) != string(golden) {
		t.Errorf("result %s", got)
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	res, _ := dispatch(t, New(), nil, `{"executable": "sh", "argv": ["-c", "echo $FOO; pwd; echo err >&2; exit 3"], "cwd": "`+dir+`", "env": {"FOO": "bar"}}`)
	out := output(t, res)
	if res.IsError || out.Stdout != "bar\n"+dir+"\n" || out.Stderr != "err\n" || out.Success || out.ExitCode == nil || *out.ExitCode != 3 {
		t.Errorf("got %+v %+v", res, out)
	}
	res, _ = dispatch(t, New(), nil, `{"executable": "echo", "argv": ["$HOME", ";", "*"]}`)
	if out := output(t, res); out.Stdout != "$HOME ; *\n" || !out.Success {
		t.Errorf("literal args: %+v", out)
	}
	res, _ = dispatch(t, New(), nil, `{"executable": "sh", "argv": ["-c", "kill -9 $$"]}`)
	if out := output(t, res); out.ExitCode != nil || out.Success || !strings.Contains(res.Text, `"exit_code":null`) {
		t.Errorf("signal: %s", res.Text)
	}
	res, _ = dispatch(t, New(), nil, `{"executable": "no-such-program-xyz"}`)
	if res.Kind != tool.KindExecution || !strings.Contains(res.Text, "was not found on PATH") {
		t.Errorf("not found: %+v", res)
	}
	// A relative cwd is taken from the workspace; a relative executable
	// from the cwd.
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "sub", "hello"), []byte("#!/bin/sh\necho hi from $(pwd)\n"), 0o755)
	res, _ = dispatch(t, New(), &tool.Call{WorkDir: ws}, `{"executable": "./hello", "cwd": "sub"}`)
	if out := output(t, res); out.Stdout != "hi from "+filepath.Join(ws, "sub")+"\n" {
		t.Errorf("relative: %+v %s", out, res.Text)
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	token := proctest.Token(t)
	tl := &Tool{Env: append(runner.SafeEnv(), token), Grace: 100 * time.Millisecond}
	res, _ := dispatch(t, tl, nil, `{"executable": "sh", "argv": ["-c", "echo before; sleep 30 & sleep 30"], "timeout_ms": 300}`)
	if res.Kind != tool.KindTimeout || !strings.HasPrefix(res.Text, "shell.exec timed out after 300 ms; sh was killed. Output so far:\n") ||
		!strings.Contains(res.Text, `"stdout":"before\n"`) {
		t.Errorf("timeout: %+v", res)
	}
	r := tool.NewRegistry()
	r.Register(tl)
	ctx, cancel := context.WithCancel(context.Background())
	c := &tool.Call{WorkDir: t.TempDir(), OnOutput: func(string, []byte) { cancel() }}
	res = r.Dispatch(ctx, c, Name, json.RawMessage(`{"executable": "sh", "argv": ["-c", "echo go; sleep 30"]}`))
	if res.Kind != tool.KindCancelled || !strings.HasPrefix(res.Text, "shell.exec cancelled; sh was killed.") {
		t.Errorf("cancel: %+v", res)
	}
	proctest.NoSurvivors(t, token)
}

// TestPolicy covers seed 004's CommandPolicy through the tool: deny by name
// also catches paths and symlinks, allow by name only trusts system
// directories, unknown programs ask.
func TestPolicy(t *testing.T) {
	dir := t.TempDir()
	os.Symlink("/bin/rm", filepath.Join(dir, "innocent"))
	os.WriteFile(filepath.Join(dir, "ls"), []byte("#!/bin/sh\necho fake ls\n"), 0o755)
	marker := filepath.Join(dir, "victim")
	pol := policy.CommandPolicy{Allow: []string{"ls", "cat", "git", "echo"}, Deny: []string{"rm", "dd", "mkfs"}, RequireApprovalForUnknown: true}
	approve := tool.ApproverFunc(func(context.Context, tool.ApprovalRequest) (tool.Approval, error) {
		return tool.Approval{Approved: true}, nil
	})
	cases := []struct {
		name, input string
		approver    tool.Approver
		verdict     string // allow, deny, ask (refused without an approver), approved
	}{
		{"allowed name", `{"executable": "ls", "argv": ["/"]}`, nil, "allow"},
		{"allowed path", `{"executable": "/bin/echo", "argv": ["x"]}`, nil, "allow"},
		{"denied name", `{"executable": "rm", "argv": ["-f", "` + marker + `"]}`, nil, "deny"},
		{"denied path", `{"executable": "/bin/rm", "argv": ["-f", "` + marker + `"]}`, nil, "deny"},
		{"denied usr path", `{"executable": "/usr/bin/rm", "argv": ["-f", "` + marker + `"]}`, nil, "deny"},
		{"denied via symlink", `{"executable": "` + filepath.Join(dir, "innocent") + `", "argv": ["-f", "` + marker + `"]}`, nil, "deny"},
		{"denied even if approved", `{"executable": "rm", "argv": ["-f", "` + marker + `"]}`, approve, "deny"},
		{"fake ls outside system dirs", `{"executable": "` + filepath.Join(dir, "ls") + `"}`, nil, "ask"},
		{"fake ls via PATH", `{"executable": "ls", "env": {"PATH": "` + dir + `"}}`, nil, "ask"},
		{"unknown", `{"executable": "uname"}`, nil, "ask"},
		{"unknown approved", `{"executable": "uname"}`, approve, "approved"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			os.WriteFile(marker, nil, 0o600)
			res, mem := dispatch(t, &Tool{Policy: pol}, &tool.Call{WorkDir: dir, Approver: c.approver}, c.input)
			ev := mem.Events()
			switch c.verdict {
			case "allow", "approved":
				if res.IsError || ev[0].Type != audit.Dispatched || ev[0].Decision != c.verdict {
					t.Errorf("got %+v, event %+v", res, ev[0])
				}
			case "deny":
				if res.Kind != tool.KindPermissionDenied || !strings.Contains(res.Text, "deny_executables") || ev[0].Rule != "deny_executables" {
					t.Errorf("got %+v", res)
				}
			case "ask":
				if res.Kind != tool.KindPermissionDenied || !strings.Contains(res.Text, "needs a person's approval") || ev[0].Rule != "require_approval_for_unknown" {
					t.Errorf("got %+v", res)
				}
			}
			if _, err := os.Stat(marker); err != nil {
				t.Error("a refused rm ran")
			}
		})
	}
}

// TestPreflightRequest: the permission request carries executable, argv,
// cwd and env keys, never env values.
func TestPreflightRequest(t *testing.T) {
	var got policy.Request
	r := tool.NewRegistry()
	r.Register(New())
	r.Checkers = []policy.Checker{policy.CheckerFunc(func(req policy.Request) policy.Decision { got = req; return policy.Allowed })}
	mem := &audit.Memory{}
	r.Audit = mem
	dir := t.TempDir()
	r.Dispatch(context.Background(), &tool.Call{WorkDir: dir}, Name, json.RawMessage(`{"executable": "env", "argv": ["-0"], "env": {"AWS_SECRET_ACCESS_KEY": "s3cr3t", "B": "x"}}`))
	if got.Executable != "env" || got.ResolvedPath == "" || strings.Join(got.Args, " ") != "-0" || got.Cwd != dir ||
		strings.Join(got.EnvKeys, ",") != "AWS_SECRET_ACCESS_KEY,B" || got.Tool != Name {
		t.Errorf("request %+v", got)
	}
	for _, e := range mem.Events() {
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), "s3cr3t") {
			t.Errorf("env value in audit: %s", b)
		}
	}
}

func TestInvalidInput(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"missing", `{}`, "invalid input: executable: is required and cannot be empty"},
		{"empty", `{"executable": ""}`, "invalid input: executable: is required and cannot be empty"},
		{"number", `{"executable": 5}`, "invalid input: executable: must be a string, not a number"},
		{"argv string", `{"executable": "ls", "argv": "-la"}`, "invalid input: argv: must be an array of strings, not a string"},
		{"argv null elem", `{"executable": "ls", "argv": [null]}`, "invalid input: argv[0]: must be a string, not null"},
		{"env array", `{"executable": "ls", "env": ["A=1"]}`, "invalid input: env: must be an object of strings"},
		{"env number", `{"executable": "ls", "env": {"A": 1}}`, "invalid input: env.A: must be a string, not a number"},
		{"env bad key", `{"executable": "ls", "env": {"A=B": "1"}}`, "invalid input: env.A=B: keys must be non-empty"},
		{"timeout negative", `{"executable": "ls", "timeout_ms": -1}`, "invalid input: timeout_ms: must be between 1 and 86400000; got -1"},
		{"timeout zero", `{"executable": "ls", "timeout_ms": 0}`, "invalid input: timeout_ms: must be between 1"},
		{"timeout huge", `{"executable": "ls", "timeout_ms": 1e18}`, "invalid input: timeout_ms: must be between 1"},
		{"timeout fraction", `{"executable": "ls", "timeout_ms": 1.5}`, "invalid input: timeout_ms: must be a whole number"},
		{"timeout string", `{"executable": "ls", "timeout_ms": "100"}`, "invalid input: timeout_ms: must be a number, not a string"},
		{"cwd missing dir", `{"executable": "ls", "cwd": "/no/such"}`, "invalid input: cwd: /no/such is not an existing directory"},
		{"extra", `{"executable": "ls", "shell": true}`, "invalid input: shell: is not a known field"},
		{"NUL", `{"executable": "l\u0000s"}`, "invalid input: executable: contains a NUL byte"},
		{"10 MB arg", `{"executable": "ls", "argv": ["` + strings.Repeat("a", 10<<20) + `"]}`, "invalid input: argv[0]: is 10485760 bytes"},
		{"bad UTF-8", "{\"executable\": \"ls\", \"argv\": [\"\xfe\"]}", "invalid input: argv: is not valid UTF-8"},
	}
	for _, c := range cases {
		res, mem := dispatch(t, New(), nil, c.in)
		if res.Kind != tool.KindValidation || !strings.HasPrefix(res.Text, c.want) || res.Run != nil {
			t.Errorf("%s: got %q", c.name, res.Text[:min(200, len(res.Text))])
		}
		if ev := mem.Events(); len(ev) != 1 || ev[0].Type != audit.Finished || ev[0].ErrorKind != "validation_error" {
			t.Errorf("%s: events %+v", c.name, ev)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"executable":"ls"}`, `{"executable":"ls","argv":["-l"],"env":{"A":"b"},"timeout_ms":100}`, `{"executable":"/bin/ls","cwd":"/"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := Decode(raw, "/", MaxTimeout)
		if err != nil {
			return
		}
		if in.Executable == "" || in.Timeout < 0 || in.Timeout > MaxTimeout || !filepath.IsAbs(in.Cwd) {
			t.Fatalf("accepted %+v", in)
		}
	})
}
