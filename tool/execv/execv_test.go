//go:build linux

package execv

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
	"github.com/agentexec/agentexec/sandbox"
	"github.com/agentexec/agentexec/tool"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	sandbox.Main()
	goleak.VerifyTestMain(m)
}

// granted are grants that allow Exec on the system's programs and /tmp.
func granted() *tool.Grants {
	return &tool.Grants{Tools: []string{"Exec"}, FS: []tool.FSGrant{{Mode: "r", Path: "/usr"}, {Mode: "r", Path: "/bin"}, {Mode: "r", Path: os.TempDir()}}}
}

func dispatch(t *testing.T, g *tool.Grants, input string) (*tool.Result, *audit.Memory) {
	t.Helper()
	r := tool.NewRegistry()
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	mem := &audit.Memory{}
	r.Audit = mem
	return r.Dispatch(context.Background(), &tool.Call{Grants: g, WorkDir: os.TempDir()}, Name, json.RawMessage(input)), mem
}

func decodeResult(t *testing.T, res *tool.Result) Result {
	t.Helper()
	var out Result
	if err := json.Unmarshal([]byte(res.Text), &out); err != nil {
		t.Fatalf("result text is not the JSON result: %q", res.Text)
	}
	return out
}

// Acceptance 1: Exec is opt-in.
func TestAcceptance1_OptIn(t *testing.T) {
	r := tool.NewRegistry()
	if _, ok := r.Lookup("Exec"); ok {
		t.Fatal("a new registry has Exec")
	}
	Register(r)
	if _, ok := r.Lookup("Exec"); !ok {
		t.Fatal("Register did not add Exec")
	}
}

// Acceptance 2: argv validation.
func TestAcceptance2_ArgvValidation(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"not a list", `{"argv": "/bin/echo hi"}`, "argv: must be an array of strings, not a string"},
		{"list with non-str", `{"argv": ["/bin/echo", 1]}`, "argv[1]: must be a string, not a number"},
		{"null element", `{"argv": ["/bin/echo", null]}`, "argv[1]: must be a string, not null"},
		{"empty list", `{"argv": []}`, "argv: must not be empty"},
		{"missing", `{}`, "argv: is required"},
		{"empty string", `{"argv": ["/bin/echo", ""]}`, "argv[1]: must not be empty"},
		{"relative", `{"argv": ["echo", "hi"]}`, `argv[0]: must be an absolute path (no PATH lookup)`},
		{"dot relative", `{"argv": ["./echo"]}`, `argv[0]: must be an absolute path`},
		{"non-existent", `{"argv": ["/no/such/program"]}`, "argv[0]: /no/such/program does not exist"},
		{"directory", `{"argv": ["/usr/bin"]}`, "argv[0]: /usr/bin is not a regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, _ := dispatch(t, granted(), c.in)
			if res.Kind != tool.KindValidation || res.Run != nil || !strings.Contains(res.Text, c.want) {
				t.Errorf("got %+v, want %q", res, c.want)
			}
		})
	}
}

// Acceptance 3: no shell; metacharacters are literal.
func TestAcceptance3_NoShell(t *testing.T) {
	res, _ := dispatch(t, granted(), `{"argv": ["/bin/echo", "; pwd"]}`)
	if out := decodeResult(t, res); out.Stdout != "; pwd\n" || out.ExitCode != 0 {
		t.Errorf("got %+v", out)
	}
	res, _ = dispatch(t, granted(), `{"argv": ["/bin/echo", "$HOME", "*", "$(id)", "a|b"]}`)
	if out := decodeResult(t, res); out.Stdout != "$HOME * $(id) a|b\n" {
		t.Errorf("got %q", out.Stdout)
	}
}

// Acceptance 4: no "Exec" tool grant: permission_denied.
func TestAcceptance4_CapabilityDenied(t *testing.T) {
	for name, g := range map[string]*tool.Grants{
		"no grants":   nil,
		"other tools": {Tools: []string{"Read"}, FS: granted().FS},
	} {
		res, mem := dispatch(t, g, `{"argv": ["/bin/echo", "hi"]}`)
		if res.Kind != tool.KindPermissionDenied || res.Run != nil {
			t.Errorf("%s: got %+v", name, res)
		}
		var v map[string]string
		json.Unmarshal([]byte(res.Text), &v)
		if v["error"] != "permission_denied" {
			t.Errorf("%s: text %q", name, res.Text)
		}
		if ev := mem.Events(); len(ev) != 1 || ev[0].Type != audit.Denied {
			t.Errorf("%s: events %+v", name, ev)
		}
	}
}

// Acceptance 5: fs grants must cover argv[0] and cwd.
func TestAcceptance5_FSDenied(t *testing.T) {
	g := &tool.Grants{Tools: []string{"Exec"}, FS: []tool.FSGrant{{Mode: "r", Path: "/etc"}}}
	res, mem := dispatch(t, g, `{"argv": ["/usr/bin/id"]}`)
	if res.Kind != tool.KindFSDenied || !strings.Contains(res.Text, `"error":"fs_denied"`) || !strings.Contains(res.Text, "/usr/bin/id (argv[0])") {
		t.Errorf("argv[0]: %+v", res)
	}
	if ev := mem.Events(); len(ev) != 1 || ev[0].Type != audit.Denied || ev[0].ErrorKind != "fs_denied" {
		t.Errorf("events %+v", ev)
	}
	g.FS = append(g.FS, tool.FSGrant{Mode: "r", Path: "/usr"})
	dir := t.TempDir()
	res, _ = dispatch(t, g, `{"argv": ["/usr/bin/id"], "cwd": "`+dir+`"}`)
	if res.Kind != tool.KindFSDenied || !strings.Contains(res.Text, "(cwd)") {
		t.Errorf("cwd: %+v", res)
	}
	// A symlink inside a granted tree does not reach outside it.
	link := filepath.Join(dir, "id")
	os.Symlink("/usr/bin/id", link)
	g = &tool.Grants{Tools: []string{"Exec"}, FS: []tool.FSGrant{{Mode: "r", Path: dir}}}
	res, _ = dispatch(t, g, `{"argv": ["`+link+`"]}`)
	if res.Kind != tool.KindFSDenied {
		t.Errorf("symlink: %+v", res)
	}
}

// Acceptance 6: the env scrub.
func TestAcceptance6_EnvScrub(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
	t.Setenv("CC_INTERNAL", "kernel")
	res, _ := dispatch(t, granted(), `{"argv": ["/usr/bin/env"]}`)
	out := decodeResult(t, res)
	for _, s := range []string{"sk-ant-secret", "aws-secret", "CC_INTERNAL"} {
		if strings.Contains(out.Stdout, s) {
			t.Errorf("%s reached the child", s)
		}
	}
	want := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "USER=" + currentUser(), "TERM=dumb", "SHELL=/bin/sh"}
	lines := strings.Split(strings.TrimSpace(out.Stdout), "\n")
	if strings.Join(lines[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Errorf("env %q", lines)
	}
	// The caller's env goes on top, and may override the safe list.
	res, _ = dispatch(t, granted(), `{"argv": ["/usr/bin/env"], "env": {"FOO": "bar", "HOME": "/home/x", "CC_X": "passed"}}`)
	out = decodeResult(t, res)
	for _, s := range []string{"FOO=bar", "HOME=/home/x", "CC_X=passed"} {
		if !strings.Contains(out.Stdout, s+"\n") {
			t.Errorf("%s missing: %q", s, out.Stdout)
		}
	}
	if strings.Contains(out.Stdout, "HOME=/tmp") {
		t.Error("HOME was not overridden")
	}
	res, _ = dispatch(t, granted(), `{"argv": ["/usr/bin/env"], "env": {"_KERNEL": "x"}}`)
	if res.Kind != tool.KindValidation || !strings.Contains(res.Text, "env._KERNEL: keys starting with _ are reserved") {
		t.Errorf("_ key: %+v", res)
	}
	res, _ = dispatch(t, granted(), `{"argv": ["/usr/bin/env"], "env": {"A": null}}`)
	if res.Kind != tool.KindValidation || !strings.Contains(res.Text, "env.A: must be a string, not null") {
		t.Errorf("null value: %+v", res)
	}
	res, _ = dispatch(t, granted(), `{"argv": ["/usr/bin/env"], "env": {"A": {"b": 1}}}`)
	if res.Kind != tool.KindValidation || !strings.Contains(res.Text, "env.A: must be a string, not an object") {
		t.Errorf("object value: %+v", res)
	}
}

// Acceptance 7: timeout in under 5 seconds, whole group killed.
func TestAcceptance7_Timeout(t *testing.T) {
	token := proctest.Token(t)
	start := time.Now()
	res, _ := dispatch(t, granted(), `{"argv": ["/bin/sh", "-c", "sleep 10 & sleep 10"], "timeout_s": 1, "env": {"PROCTEST_TOKEN": "`+strings.TrimPrefix(token, "PROCTEST_TOKEN=")+`"}}`)
	if d := time.Since(start); d >= 5*time.Second {
		t.Errorf("took %v", d)
	}
	out := decodeResult(t, res)
	if !out.TimedOut || out.ExitCode != -15 || out.DurationS < 1 {
		t.Errorf("got %+v", out)
	}
	proctest.NoSurvivors(t, token)
}

// Acceptance 8: output cap, tail kept.
func TestAcceptance8_OutputCap(t *testing.T) {
	res, _ := dispatch(t, granted(), `{"argv": ["/bin/sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' x; echo END"], "max_output_bytes": 1024}`)
	out := decodeResult(t, res)
	if !out.StdoutTruncated || len(out.Stdout) > 1024 || !strings.HasSuffix(out.Stdout, "xxEND\n") || out.StderrTruncated {
		t.Errorf("truncated %v, %d bytes, ends %q", out.StdoutTruncated, len(out.Stdout), out.Stdout[max(0, len(out.Stdout)-10):])
	}
	// Invalid UTF-8 is replaced, one U+FFFD per bad byte.
	res, _ = dispatch(t, granted(), `{"argv": ["/usr/bin/printf", "a\\377b"]}`)
	if out := decodeResult(t, res); out.Stdout != "a\uFFFDb" {
		t.Errorf("replacement: %q", out.Stdout)
	}
}

func TestRangeValidation(t *testing.T) {
	cases := []struct{ in, want string }{
		{`"timeout_s": 0`, "timeout_s: must be between 1 and 600; got 0"},
		{`"timeout_s": 601`, "timeout_s: must be between 1 and 600; got 601"},
		{`"timeout_s": -1`, "timeout_s: must be between 1 and 600"},
		{`"timeout_s": "10"`, "timeout_s: must be a number, not a string"},
		{`"timeout_s": 1e999`, "timeout_s: must be a number within range"},
		{`"max_output_bytes": 1023`, "max_output_bytes: must be between 1024 (1 KB) and 4194304 (4 MB); got 1023"},
		{`"max_output_bytes": 4194305`, "max_output_bytes: must be between 1024"},
		{`"max_output_bytes": 2048.5`, "max_output_bytes: must be a whole number"},
		{`"max_output_bytes": 9223372036854775807`, "max_output_bytes: must be between"},
		{`"cwd": "relative"`, `cwd: must be an absolute path; got "relative"`},
		{`"cwd": "/no/such/dir"`, "cwd: /no/such/dir is not a directory"},
		{`"cwd": 5`, "cwd: must be a string, not a number"},
		{`"env": ["A=B"]`, "env: must be an object of strings, not an array"},
		{`"env": {"A=B": "c"}`, "env.A=B: keys must be non-empty and contain neither '=' nor NUL"},
		{`"shell": true`, "shell: is not a known field"},
		{`"env": {"BIG": "` + strings.Repeat("z", 10<<20) + `"}`, "env.BIG: is 10485764 bytes"},
	}
	for _, c := range cases {
		res, _ := dispatch(t, granted(), `{"argv": ["/bin/true"], `+c.in+`}`)
		var v map[string]string
		json.Unmarshal([]byte(res.Text), &v)
		if res.Kind != tool.KindValidation || v["error"] != "validation_error" || !strings.HasPrefix(v["message"], c.want) {
			t.Errorf("%s: got %q", c.in[:min(len(c.in), 60)], v["message"])
		}
	}
	in, err := Decode(json.RawMessage(`{"argv":["/bin/true"],"timeout_s":1.5,"max_output_bytes":1024}`))
	if err != nil || in.TimeoutS != 1.5 || in.MaxOutputBytes != 1024 {
		t.Errorf("valid edges: %+v %v", in, err)
	}
}

func TestGoldenResult(t *testing.T) {
	want, _ := os.ReadFile("testdata/golden/result.json")
	got, _ := json.Marshal(Result{Stdout: "...", Stderr: "...", DurationS: 0.123})
	if string(got) != string(want) {
		t.Errorf("got %s", got)
	}
	var schema struct{ Required []string }
	json.Unmarshal((&Tool{}).OutputSchema(), &schema)
	if strings.Join(schema.Required, ",") != "exit_code,stdout,stderr,stdout_truncated,stderr_truncated,duration_s,timed_out" {
		t.Errorf("output schema %v", schema.Required)
	}
}

func TestSeedLimits(t *testing.T) {
	r := tool.NewRegistry()
	Register(r)
	tl, _ := r.Lookup("Exec")
	act, res := tl.Prepare(&tool.Call{Grants: granted()}, json.RawMessage(`{"argv":["/bin/true"],"timeout_s":30}`))
	if res != nil {
		t.Fatal(res.Text)
	}
	want := Limits{CPUSeconds: 30, MemoryBytes: 512 << 20, FsizeBytes: 64 << 20, Nofile: 256, WallSeconds: 30}
	if got := act.(*Action).Limits; got != want {
		t.Errorf("limits %+v", got)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"argv":["/bin/true"]}`, `{"argv":["/bin/echo","x"],"env":{"A":"b"},"timeout_s":5}`, `{"argv":[]}`, `{"argv":["/bin/true"],"cwd":"/"}`, `{"argv":["/bin/true"],"max_output_bytes":1024}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := Decode(raw)
		if err != nil {
			return
		}
		if len(in.Argv) == 0 || !filepath.IsAbs(in.Argv[0]) || in.TimeoutS < 1 || in.TimeoutS > MaxTimeoutS ||
			in.MaxOutputBytes < MinMaxOutputBytes || in.MaxOutputBytes > MaxMaxOutputBytes {
			t.Fatalf("accepted %+v", in)
		}
		for k := range in.Env {
			if strings.HasPrefix(k, "_") || strings.Contains(k, "=") {
				t.Fatalf("accepted env key %q", k)
			}
		}
	})
}
