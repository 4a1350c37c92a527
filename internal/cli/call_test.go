//go:build linux

package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/internal/proctest"
)

// callEnv points the audit log and job state of in-process calls into the
// test's directory.
func callEnv(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(dir, "run"))
	return dir
}

func runCLIStdin(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCallContracts(t *testing.T) {
	dir := callEnv(t)
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string
	}{
		{"exec", []string{"call", "--tools", "exec", "exec", `{"command": "echo hello"}`}, 0, "[Exit Code: 0]\n\nhello\n"},
		{"exec error", []string{"call", "--tools", "exec", "exec", `{"command": ""}`}, 1, "Parameter 'command' is required and cannot be empty\n"},
		{"bash", []string{"call", "bash", `{"command": "echo out; echo err >&2"}`}, 0, "out\nerr\n"},
		{"bash failed", []string{"call", "bash", `{"command": "exit 4"}`}, 1, "[command failed: exit code 4]\n"},
		{"shell.exec", []string{"call", "--tools", "shell.exec", "shell.exec", `{"executable": "echo", "argv": ["a b"]}`}, 0, `{"stdout":"a b\n","stderr":"","success":true,"exit_code":0}` + "\n"},
		{"renamed", []string{"call", "--tools", "shell.exec", "--name", "shell.exec=shell_exec", "shell_exec", `{"executable": "true"}`}, 0, `{"stdout":"","stderr":"","success":true,"exit_code":0}` + "\n"},
		{"Exec not registered", []string{"call", "Exec", `{"argv": ["/bin/true"]}`}, ExitFailed, ""},
		{"unknown tool", []string{"call", "zsh", `{}`}, ExitFailed, ""},
		{"Exec granted", []string{"call", "--tools", "Exec", "--grant-tool", "Exec", "--grant-fs", "r:/usr", "--grant-fs", "r:/bin", "Exec", `{"argv": ["/bin/echo", "; pwd"]}`}, 0, ""},
		{"Exec without grant", []string{"call", "--tools", "Exec", "Exec", `{"argv": ["/bin/true"]}`}, 1, ""},
		{"deny-exe", []string{"call", "--tools", "shell.exec", "--deny-exe", "rm", "shell.exec", `{"executable": "/bin/rm", "argv": ["-rf", "` + dir + `/x"]}`}, 1, ""},
		{"unknown field", []string{"call", "bash", `{"command": "ls", "cwd": "/"}`}, 1, "invalid input: cwd: is not a known field; the accepted fields are command, mode\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLIStdin(t, "", c.args...)
			if code != c.code || (c.stdout != "" && stdout != c.stdout) {
				t.Errorf("got %d %q %q; want %d %q", code, stdout, stderr, c.code, c.stdout)
			}
		})
	}
	code, stdout, _ := runCLIStdin(t, "", "call", "--tools", "Exec", "--grant-tool", "Exec", "--grant-fs", "r:/usr", "--grant-fs", "r:/bin", "Exec", `{"argv": ["/bin/echo", "; pwd"]}`)
	var r map[string]any
	if json.Unmarshal([]byte(stdout), &r); code != 0 || r["stdout"] != "; pwd\n" || r["timed_out"] != false {
		t.Errorf("Exec: %d %q", code, stdout)
	}
	code, stdout, _ = runCLIStdin(t, "", "call", "--tools", "Exec", "Exec", `{"argv": ["/bin/true"]}`)
	if code != 1 || !strings.Contains(stdout, `"error":"permission_denied"`) {
		t.Errorf("Exec without grant: %d %q", code, stdout)
	}
	// The audit log recorded every call, with no env value.
	evs := readAudit(t, filepath.Join(dir, "state", "agentexec", "audit.jsonl"))
	if len(evs) < len(cases) {
		t.Errorf("%d audit events for %d calls", len(evs), len(cases)+2)
	}
}

func readAudit(t *testing.T, path string) []audit.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []audit.Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e audit.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("bad audit line %q", sc.Text())
		}
		evs = append(evs, e)
	}
	return evs
}

func TestCallInputAndJSON(t *testing.T) {
	callEnv(t)
	code, stdout, _ := runCLIStdin(t, `{"command": "echo from stdin"}`, "call", "bash")
	if code != 0 || stdout != "from stdin\n" {
		t.Errorf("stdin: %d %q", code, stdout)
	}
	code, stdout, _ = runCLIStdin(t, `{"command": "echo dash"}`, "call", "bash", "-")
	if code != 0 || stdout != "dash\n" {
		t.Errorf("-: %d %q", code, stdout)
	}
	code, stdout, _ = runCLIStdin(t, "", "call", "--tools", "shell.exec", "--json", "shell.exec", `{"executable": "sh", "argv": ["-c", "exit 2"]}`)
	var res struct {
		Text       string
		Structured map[string]any
		IsError    bool   `json:"is_error"`
		Kind       string `json:"error_kind"`
		Run        map[string]any
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 0 || res.Structured["exit_code"] != 2.0 || res.Run["exit_code"] != 2.0 {
		t.Errorf("--json: %d %q", code, stdout)
	}
	code, _, stderr := runCLIStdin(t, "", "call")
	if code != ExitFailed || !strings.Contains(stderr, "give a tool name") {
		t.Errorf("no args: %d %q", code, stderr)
	}
	code, _, stderr = runCLIStdin(t, "", "call", "--tools", "zsh", "bash", "{}")
	if code != ExitFailed || !strings.Contains(stderr, `"zsh" is not a contract`) {
		t.Errorf("bad --tools: %d %q", code, stderr)
	}
	code, _, stderr = runCLIStdin(t, "", "call", "--grant-fs", "r:relative", "bash", "{}")
	if code != ExitFailed || !strings.Contains(stderr, `--grant-fs: "r:relative"`) {
		t.Errorf("bad --grant-fs: %d %q", code, stderr)
	}
	code, _, stderr = runCLIStdin(t, "", "call", "--audit-log", "/proc/no/audit.jsonl", "--audit-fail-closed", "bash", `{"command": "true"}`)
	if code != ExitFailed || !strings.Contains(stderr, "audit") {
		t.Errorf("fail closed: %d %q", code, stderr)
	}
}

func TestTools(t *testing.T) {
	ws := t.TempDir()
	code, stdout, _ := runCLIStdin(t, "", "tools", "--json", "--tools", "exec,bash,Exec,shell.exec", "--name", "shell.exec=shell_exec", "--cwd", ws)
	var infos []toolInfo
	if err := json.Unmarshal([]byte(stdout), &infos); err != nil || code != 0 {
		t.Fatalf("%d %v %q", code, err, stdout)
	}
	names := []string{}
	for _, ti := range infos {
		names = append(names, ti.Name+"/"+ti.Contract)
		if !json.Valid(ti.InputSchema) {
			t.Errorf("%s: invalid schema", ti.Name)
		}
	}
	if strings.Join(names, " ") != "Exec/Exec bash/bash exec/exec job_kill/job_kill job_list/job_list job_output/job_output job_wait/job_wait shell_exec/shell.exec" {
		t.Errorf("tools %v", names)
	}
	if !strings.HasSuffix(infos[1].Description, "<pwd>"+ws+"</pwd>") || infos[0].OutputSchema == nil || !infos[0].Annotations.RequiresGrant {
		t.Errorf("bash description or Exec info: %+v", infos[:2])
	}
	code, stdout, _ = runCLIStdin(t, "", "tools")
	if code != 0 || !strings.Contains(stdout, "== bash\n") || !strings.Contains(stdout, "input schema:") || strings.Contains(stdout, "== Exec") {
		t.Errorf("text: %d %q", code, stdout)
	}
}

// TestBackgroundOutlivesOneShotCall: a background job started by a
// one-shot `agentexec call` gets its completion line after that process
// has exited.
func TestBackgroundOutlivesOneShotCall(t *testing.T) {
	dir := t.TempDir()
	token := proctest.Token(t)
	argv, helper := proctest.HelperArgv(t, "cli", "call", "--state-dir", filepath.Join(dir, "jobs"), "--audit-log", "off",
		"bash", `{"command": "sleep 2; echo finished", "mode": "background"}`)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helper, token, "GORACE=atexit_sleep_ms=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m := regexp.MustCompile(`<output_file>(.+)</output_file>`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("answer %q", out)
	}
	if b, _ := os.ReadFile(string(m[1])); len(b) != 0 {
		t.Errorf("the call returned only after the job wrote %q", b)
	}
	var b []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, _ = os.ReadFile(string(m[1])); strings.Contains(string(b), "[background process completed]") {
			break
		}
	}
	if string(b) != "finished\n\n\n[background process completed]\n" {
		t.Errorf("output file %q", b)
	}
	proctest.NoSurvivors(t, token)
}

func TestJobsCommands(t *testing.T) {
	dir := callEnv(t)
	state := filepath.Join(dir, "jobs")
	code, out, _ := runCLIStdin(t, "", "call", "--state-dir", state, "bash", `{"command": "echo hello; sleep 600", "mode": "background"}`)
	if code != 0 {
		t.Fatalf("%d %q", code, out)
	}
	code, table, _ := runCLIStdin(t, "", "jobs", "--state-dir", state)
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "running") || !strings.Contains(lines[1], "sleep 600") {
		t.Fatalf("jobs: %d %q", code, table)
	}
	id := strings.Fields(lines[1])[0]
	var logs string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !strings.Contains(logs, "hello"); time.Sleep(20 * time.Millisecond) {
		_, logs, _ = runCLIStdin(t, "", "jobs", "--state-dir", state, "logs", id)
	}
	if logs != "hello\n" {
		t.Errorf("logs %q", logs)
	}
	code, out, _ = runCLIStdin(t, "", "jobs", "--state-dir", state, "kill", id)
	if code != 0 || out != id+": killed by SIGTERM\n" {
		t.Errorf("kill: %d %q", code, out)
	}
	code, logs, _ = runCLIStdin(t, "", "jobs", "--state-dir", state, "logs", "-f", id)
	if code != 0 || !strings.HasSuffix(logs, "[background process failed: signal: 15 (SIGTERM)]\n") {
		t.Errorf("logs -f: %d %q", code, logs)
	}
	if code, _, _ := runCLIStdin(t, "", "jobs", "--state-dir", state, "rm", id); code != 0 {
		t.Errorf("rm: %d", code)
	}
	if code, _, stderr := runCLIStdin(t, "", "jobs", "--state-dir", state, "logs", "nope"); code != ExitFailed || !strings.Contains(stderr, "no such job") {
		t.Errorf("unknown: %d %q", code, stderr)
	}
}
