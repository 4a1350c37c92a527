//go:build linux

package unifiedexec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentexec/agentexec/sandbox"
)

// TestSandboxedTerminal runs a terminal session under the workspace-write
// profile: the terminal works (prompt, answer, job control), writes outside
// the workspace fail, and input to a program that is not a shell is
// allowed without asking because the sandbox applies.
func TestSandboxedTerminal(t *testing.T) {
	ws := t.TempDir()
	box, err := sandbox.Profile("workspace-write", sandbox.ProfileOptions{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if missing := box.Missing(); len(missing) > 0 {
		t.Skipf("the sandbox cannot run here: %v", missing)
	}
	f := newFixture(t)
	f.exec.Sandbox = &box
	f.write.ProgramInput = "deny" // would refuse input to cat without the sandbox
	outside := filepath.Join(t.TempDir(), "escaped")
	res := f.call(ExecCommandName, map[string]any{"workdir": ws,
		"cmd": "touch inside; touch " + outside + " 2>/dev/null && echo ESCAPED; read -p 'name? ' n; echo hi $n; cat", "tty": true, "yield_time_ms": 2000})
	id := running(t, res)
	got := f.until(id, output(res), "name? ")
	res = f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "bob\n", "yield_time_ms": 1000})
	got += output(res)
	got = f.until(id, got, "hi bob")
	res = f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "to cat\n", "yield_time_ms": 1000})
	if res.IsError {
		t.Fatalf("input to cat in a sandboxed session: %q", res.Text)
	}
	if res.Run == nil || !strings.Contains(res.Run.Sandbox, "workspace-write") {
		t.Errorf("run info %+v", res.Run)
	}
	exited(t, f.call(WriteStdinName, map[string]any{"session_id": id, "chars": "\u0004", "yield_time_ms": 5000}), "0")
	if strings.Contains(got, "ESCAPED") {
		t.Error("a sandboxed session wrote outside its workspace")
	}
	if _, err := os.Stat(filepath.Join(ws, "inside")); err != nil {
		t.Errorf("the workspace is not writable: %v", err)
	}
}
