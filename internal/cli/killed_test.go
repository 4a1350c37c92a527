//go:build linux

package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
)

// TestKilledServerLeavesNothing starts a real `agentexec mcp`, has it run
// a foreground bash command whose tree has several shapes (a child, a
// setsid escapee, a double fork), kills the server with SIGKILL, and
// checks by process listing that nothing the command started survives a
// few seconds later, with cgroup tracking on and off.
func TestKilledServerLeavesNothing(t *testing.T) {
	for _, cg := range []string{"off", "auto"} {
		t.Run("cgroup="+cg, func(t *testing.T) {
			dir := t.TempDir()
			token := proctest.Token(t)
			name, value, _ := strings.Cut(token, "=")
			config := filepath.Join(dir, "agentexec.toml")
			os.WriteFile(config, fmt.Appendf(nil, "[env]\nset = { %s = %q }\n[tools]\ncgroup = %q\n", name, value, cg), 0o600)
			ready := filepath.Join(dir, "up")
			argv, helper := proctest.HelperArgv(t, "cli", "mcp", "--config", config, "--audit-log", "off",
				"--state-dir", filepath.Join(dir, "jobs"), "--cwd", dir)
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), helper)
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			command := fmt.Sprintf("sleep 600 & setsid sleep 600 & (sleep 600 &); touch %s; sleep 600", ready)
			for _, line := range []string{
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":%q,"mode":"slow"}}}`, command),
			} {
				stdin.Write([]byte(line + "\n"))
			}
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if _, err := os.Stat(ready); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal("the command never started")
			}
			// Four sleeps (bash executes the last one in its own place), once the
			// forks have run. A scan can miss a process in the middle of its
			// exec (its environment is briefly unreadable), so the most seen
			// by any scan counts.
			most := 0
			for time.Now().Before(deadline) && most < 4 {
				most = max(most, len(proctest.Survivors(token)))
				time.Sleep(10 * time.Millisecond)
			}
			if most < 4 {
				t.Errorf("at most %d processes carried the token before the kill, want 4", most)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			for deadline := time.Now().Add(8 * time.Second); len(proctest.Survivors(token)) > 0 && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			proctest.NoSurvivors(t, token)
		})
	}
}
