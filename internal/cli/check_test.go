//go:build linux

package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		args []string
		code int
		out  string // substring
	}{
		{[]string{"check", "ls -la"}, 0, "decision: allow"},
		{[]string{"check", "git push --force"}, 1, "rule: git-push-force"},
		{[]string{"check", "$cmd -rf /"}, 3, "not analysable (dynamic-command)"},
		{[]string{"check", "--profile", "strict", "make"}, 3, "rule: strict-allowlist"},
		{[]string{"check", "--profile", "open", "git push -f"}, 0, "decision: allow"},
		{[]string{"check", `echo "x`}, 1, "parse error: cannot parse the script"},
		{[]string{"check"}, 2, ""},
		{[]string{"check", "a", "b"}, 2, ""},
		{[]string{"check", "--profile", "paranoid", "ls"}, 2, ""},
		{[]string{"check", "--bogus", "ls"}, 2, ""},
	}
	for _, c := range cases {
		code, stdout, stderr := runCLIStdin(t, "", c.args...)
		if code != c.code || !strings.Contains(stdout, c.out) {
			t.Errorf("%q: got %d %q %q, want %d and %q", c.args, code, stdout, stderr, c.code, c.out)
		}
	}
	code, stdout, _ := runCLIStdin(t, "", "check", "--json", `sudo env FOO=1 bash -c 'git add -A' | tee x`)
	var res map[string]any
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 1 {
		t.Fatalf("%d %v %q", code, err, stdout)
	}
	for _, k := range []string{"decision", "rule", "reason", "alternative", "commands"} {
		if _, ok := res[k]; !ok {
			t.Errorf("no %q in %v", k, res)
		}
	}
	cmds := res["commands"].([]any)
	first := cmds[0].(map[string]any)
	second := cmds[1].(map[string]any)
	if second["name"] != "git" || strings.Join(toStrings(second["wrappers"]), ",") != "sudo,env,bash -c" {
		t.Errorf("nested command %v", second)
	}
	if res["decision"] != "deny" || res["rule"] != "git-add-blind" || first["name"] != "bash" ||
		strings.Join(toStrings(first["wrappers"]), ",") != "sudo,env" || strings.Join(toStrings(first["assigns"]), ",") != "FOO" {
		t.Errorf("json %s", stdout)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestCheckWithConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a.toml")
	os.WriteFile(cfg, []byte("[[rules]]\nid = \"no-publish\"\naction = \"deny\"\nprefix = \"npm publish\"\nreason = \"publishing is for people\"\n"), 0o644)
	code, stdout, _ := runCLIStdin(t, "", "check", "--config", cfg, "npm publish")
	if code != 1 || !strings.Contains(stdout, "rule: no-publish") || !strings.Contains(stdout, "reason: publishing is for people") {
		t.Errorf("%d %q", code, stdout)
	}
	os.WriteFile(cfg, []byte("profle = \"x\"\n"), 0o644)
	code, _, stderr := runCLIStdin(t, "", "check", "--config", cfg, "ls")
	if code != 2 || !strings.Contains(stderr, cfg+":1: profle: unknown key") {
		t.Errorf("bad config: %d %q", code, stderr)
	}
}

func TestHookClaudeCode(t *testing.T) {
	input := func(tool, command string) string {
		b, _ := json.Marshal(map[string]any{"session_id": "s1", "hook_event_name": "PreToolUse", "tool_name": tool, "cwd": "/tmp", "tool_input": map[string]any{"command": command}})
		return string(b)
	}
	type out struct {
		HookSpecificOutput struct{ HookEventName, PermissionDecision, PermissionDecisionReason string }
	}
	cases := []struct {
		stdin, decision, reason string
		args                    []string
	}{
		{input("Bash", "git push --force"), "deny", "permission denied: git push --force is not allowed", nil},
		{input("Bash", "eval \"$X\""), "ask", "agentexec (nested-script)", nil},
		{input("Bash", "$X y"), "ask", "agentexec (dynamic-command): the program $X is only known at run time. To allow it without asking, add to the agentexec configuration:\n[[rules]]\nid = \"allow-dynamic-command\"", nil},
		{input("Bash", "ls"), "", "", nil},
		{input("Bash", "ls"), "allow", "agentexec: no rule objects", []string{"--allow"}},
		{input("Write", "rm -rf /"), "", "", nil},
	}
	for _, c := range cases {
		code, stdout, stderr := runCLIStdin(t, c.stdin, append([]string{"hook", "claude-code"}, c.args...)...)
		if code != 0 {
			t.Errorf("%s: exit %d %q", c.stdin, code, stderr)
			continue
		}
		if c.decision == "" {
			if stdout != "" {
				t.Errorf("%s: printed %q", c.stdin, stdout)
			}
			continue
		}
		var o out
		if err := json.Unmarshal([]byte(stdout), &o); err != nil || o.HookSpecificOutput.HookEventName != "PreToolUse" ||
			o.HookSpecificOutput.PermissionDecision != c.decision || !strings.HasPrefix(o.HookSpecificOutput.PermissionDecisionReason, c.reason) {
			t.Errorf("%s: %q", c.stdin, stdout)
		}
	}
}

// TestHookClaudeCodeFailsClosed: input the hook cannot judge blocks the
// call (exit 2, the reason on stderr), never lets it through.
func TestHookClaudeCodeFailsClosed(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("profile = \"paranoid\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, stdin string
		args        []string
		reason      string
	}{
		{"not json", "not json", nil, "not Claude Code's PreToolUse hook JSON"},
		{"empty", "", nil, "not Claude Code's PreToolUse hook JSON"},
		{"truncated", `{"tool_name": "Bash", "tool_input": {"command": "rm -rf /"`, nil, "not Claude Code's PreToolUse hook JSON"},
		{"command not a string", `{"tool_name": "Bash", "tool_input": {"command": ["rm", "-rf", "/"]}}`, nil, "not Claude Code's PreToolUse hook JSON"},
		{"no command", `{"tool_name": "Bash", "tool_input": {}}`, nil, "has no command"},
		{"broken configuration", `{"tool_name": "Bash", "tool_input": {"command": "ls"}}`, []string{"--config", bad}, "configuration cannot be used: config: " + bad + ":1: profile"},
	}
	for _, c := range cases {
		code, stdout, stderr := runCLIStdin(t, c.stdin, append([]string{"hook", "claude-code"}, c.args...)...)
		if code != ExitHookDeny || stdout != "" || !strings.Contains(stderr, "denied") || !strings.Contains(stderr, c.reason) {
			t.Errorf("%s: exit %d %q %q; want 2 and stderr with %q", c.name, code, stdout, stderr, c.reason)
		}
	}
}

func TestConfigCommands(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agentexec.toml")
	code, stdout, _ := runCLIStdin(t, "", "config", "init", path)
	if code != 0 || !strings.Contains(stdout, "wrote "+path) {
		t.Fatalf("init: %d %q", code, stdout)
	}
	if code, _, stderr := runCLIStdin(t, "", "config", "init", path); code != ExitFailed || !strings.Contains(stderr, "exists; use --force") {
		t.Errorf("init twice: %d %q", code, stderr)
	}
	b, _ := os.ReadFile(path)
	os.WriteFile(path, append(b, []byte("\n[[rules]]\nid = \"x\"\naction = \"ask\"\nexecutables = [\"docker\"]\n")...), 0o644)
	code, stdout, stderr := runCLIStdin(t, "", "config", "show", "--config", path)
	if code != 0 || !strings.Contains(stdout, "# configuration file: "+path) || !strings.Contains(stdout, `profile = "guarded"`) ||
		!strings.Contains(stdout, "# "+path+":") || !strings.Contains(stdout, `executables = ["docker"]`) {
		t.Errorf("show: %d %q %q", code, stdout, stderr)
	}
}

func TestPromptApprover(t *testing.T) {
	req := tool.ApprovalRequest{Tool: "bash", Request: policy.Request{Command: "docker run x", Cwd: "/w", Conversation: "c"},
		Decision: policy.Decision{Verdict: policy.Ask, Rule: "ask-docker", Reason: "docker asks"}}
	for answer, want := range map[string]tool.Approval{
		"y\n":      {Approved: true},
		"always\n": {Approved: true, Remember: true},
		"n\n":      {Reason: "declined at the terminal"},
		"\n":       {Reason: "declined at the terminal"},
	} {
		var out strings.Builder
		a, err := (&promptApprover{in: strings.NewReader(answer), out: &out}).Approve(context.Background(), req)
		if err != nil || a != want {
			t.Errorf("%q: %+v %v", answer, a, err)
		}
		if !strings.Contains(out.String(), "docker run x") || !strings.Contains(out.String(), "rule ask-docker: docker asks") {
			t.Errorf("prompt %q", out.String())
		}
		// A refusal shows what to change in the configuration.
		if hint := strings.Contains(out.String(), `the configured rule "ask-docker" decides this`); hint != !want.Approved {
			t.Errorf("%q: rule hint %v in %q", answer, hint, out.String())
		}
	}
	// Always: the second ask for the same rule is not put to the person.
	asked := 0
	s := &tool.SessionApprover{Inner: tool.ApproverFunc(func(context.Context, tool.ApprovalRequest) (tool.Approval, error) {
		asked++
		return tool.Approval{Approved: true, Remember: true}, nil
	})}
	s.Approve(context.Background(), req)
	if a, _ := s.Approve(context.Background(), req); !a.Approved || asked != 1 {
		t.Errorf("remembered: %+v asked %d", a, asked)
	}
	other := req
	other.Request.Conversation = "other"
	s.Approve(context.Background(), other)
	if asked != 2 {
		t.Error("an approval leaked into another conversation")
	}
}

// TestCallDeniedSpawnsNothing: end to end through `agentexec call bash`.
func TestCallDeniedSpawnsNothing(t *testing.T) {
	dir := callEnv(t)
	marker := filepath.Join(dir, "ran")
	openTTY = func() (*os.File, error) { return nil, os.ErrNotExist }
	code, stdout, _ := runCLIStdin(t, "", "call", "--cwd", dir, "bash", `{"command": "touch `+marker+` && git push --force"}`)
	if code != 1 || stdout != "permission denied: git push --force is not allowed. Use --force-with-lease for safer force pushes, or push without force\n" {
		t.Errorf("%d %q", code, stdout)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the refused command ran")
	}
	evs := readAudit(t, filepath.Join(dir, "state", "agentexec", "audit.jsonl"))
	if last := evs[len(evs)-1]; last.Type != "tool.call.denied" || last.Rule != "git-push-force" || last.Command == "" {
		t.Errorf("audit %+v", last)
	}
	// An "ask" with no terminal is refused with how to allow it.
	code, stdout, _ = runCLIStdin(t, "", "call", "--cwd", dir, "bash", `{"command": "$X"}`)
	if code != 1 || !strings.Contains(stdout, "no one can be asked here") || !strings.Contains(stdout, "configuration") {
		t.Errorf("ask: %d %q", code, stdout)
	}
}

func TestServeNeedsToken(t *testing.T) {
	t.Setenv("AGENTEXEC_TOKEN", "")
	code, _, stderr := runCLIStdin(t, "", "serve", "--listen", "0.0.0.0:0")
	if code != ExitFailed || !strings.Contains(stderr, "not a loopback address; give a bearer token") {
		t.Errorf("%d %q", code, stderr)
	}
}

func TestSandboxFlags(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	code, stdout, stderr := runCLIStdin(t, "", "run", "--sandbox", "workspace-write", "--cwd", ws,
		"echo in > in.txt && cat in.txt; echo out > "+outside+"/x 2>/dev/null || echo denied")
	if code != 0 || stdout != "in\ndenied\n" {
		t.Errorf("run --sandbox: %d %q %q", code, stdout, stderr)
	}
	code, _, stderr = runCLIStdin(t, "", "run", "--sandbox", "nope", "true")
	if code != ExitFailed || !strings.Contains(stderr, `--sandbox: "nope" is not a sandbox profile`) {
		t.Errorf("bad profile: %d %q", code, stderr)
	}
	callEnv(t)
	code, stdout, _ = runCLIStdin(t, "", "call", "--sandbox", "no-network", "--cwd", ws, "bash", `{"command": "exec 3<>/dev/tcp/127.0.0.1/9 2>&1 || echo no network"}`)
	if !strings.Contains(stdout, "no network") {
		t.Errorf("call --sandbox no-network: %d %q", code, stdout)
	}
	code, stdout, _ = runCLIStdin(t, "", "sandbox", "status")
	if code != 0 || !strings.Contains(stdout, "landlock") || !strings.Contains(stdout, "profile strict") ||
		!strings.Contains(stdout, "cgroup limits") || !strings.Contains(stdout, "outer runtime") {
		t.Errorf("status: %d %q", code, stdout)
	}
}

// FuzzHookInput: whatever Claude Code (or anything else) writes to the
// hook, it answers with a decision or silence (exit 0) or denies (exit
// 2); it never exits with a status Claude Code reads as "let it through"
// after an error.
func FuzzHookInput(f *testing.F) {
	for _, s := range []string{
		`{"tool_name": "Bash", "tool_input": {"command": "git push -f"}}`,
		`{"tool_name": "Bash", "tool_input": {"command": "ls"}, "cwd": "/tmp"}`,
		`{"tool_name": "Write", "tool_input": {"command": 1}}`,
		`{"tool_name": "Bash"}`, `null`, `[]`, `{`, "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		code, stdout, stderr := runCLIStdin(t, input, "hook", "claude-code")
		switch code {
		case 0:
			if stdout != "" {
				var o claudeHookOutput
				if err := json.Unmarshal([]byte(stdout), &o); err != nil || o.HookSpecificOutput.PermissionDecision == "" {
					t.Fatalf("exit 0 with %q", stdout)
				}
			}
		case ExitHookDeny:
			if stdout != "" || !strings.Contains(stderr, "denied") {
				t.Fatalf("exit 2 with %q %q", stdout, stderr)
			}
		default:
			t.Fatalf("exit %d for %q: %q", code, input, stderr)
		}
	})
}
