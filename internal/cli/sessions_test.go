//go:build linux

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentexec/agentexec/internal/proctest"
)

// TestCallInteractiveTools calls exec_command through `agentexec call`:
// a command that ends answers with its exit code and output; one still
// running at its yield time answers with a session id and is ended when
// the call's process is done with it (nothing survives the CLI).
func TestCallInteractiveTools(t *testing.T) {
	dir := callEnv(t)
	token := proctest.Token(t)
	name, value, _ := strings.Cut(token, "=")
	cfg := filepath.Join(dir, "agentexec.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[env]\nset = { %s = %q }\n[sandbox]\nprofile = \"off\"\n", name, value)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTEXEC_CONFIG", cfg)
	header := regexp.MustCompile(`^Wall time: \d+\.\d seconds\n`)

	code, out, errOut := runCLIStdin(t, "", "call", "--tools", "exec_command,write_stdin", "exec_command", `{"cmd": "echo hi; exit 3"}`)
	if code != 0 || !header.MatchString(out) || !strings.HasSuffix(out, "\nProcess exited with code 3\nOutput:\nhi\n") {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLIStdin(t, "", "call", "--tools", "exec_command,write_stdin", "exec_command", `{"cmd": "echo started; sleep 100", "tty": true, "yield_time_ms": 250}`)
	if code != 0 || !regexp.MustCompile(`\nProcess running with session ID [0-9a-f]{16}\nOutput:\nstarted\n$`).MatchString(out) {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if left := proctest.Survivors(token); len(left) > 0 {
		t.Errorf("processes outlived the call: %v", left)
	}
	code, out, _ = runCLIStdin(t, "", "call", "--tools", "exec_command,write_stdin", "write_stdin", `{"session_id": "0123456789abcdef"}`)
	if code != 1 || !strings.Contains(out, "no session with ID") {
		t.Errorf("write_stdin in a new process: code %d, %q", code, out)
	}
	code, out, _ = runCLIStdin(t, "", "tools", "--tools", "exec_command,write_stdin")
	for _, name := range []string{"== exec_command", "== write_stdin", "== session_list", "== session_kill", "yield_time_ms"} {
		if code != 0 || !strings.Contains(out, name) {
			t.Errorf("tools: no %q in %q", name, out)
		}
	}
}
