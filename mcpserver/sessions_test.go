//go:build linux

package mcpserver

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/config"
	"github.com/agentexec/agentexec/host"
	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionHost builds a host with the interactive session tools enabled
// (under the default workspace-write sandbox).
func sessionHost(t *testing.T, token string) *host.Host {
	t.Helper()
	name, value, _ := strings.Cut(token, "=")
	cfg, err := config.Parse("test.toml", fmt.Sprintf(`
[env]
set = { %s = %q }
[tools]
enabled = ["exec_command", "write_stdin"]
grace = "200ms"
[audit]
path = "off"
`, name, value))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workspace = t.TempDir()
	cfg.Jobs.StateDir = t.TempDir()
	h, err := host.New(cfg, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

var sessionIDRE = regexp.MustCompile(`Process running with session ID ([0-9a-f]+)`)

func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return text(res), res.IsError
}

// ptyFDs counts this process's descriptors on a pseudo-terminal.
func ptyFDs(t testing.TB) int { return proctest.PTYDescriptors(t) }

// TestInteractiveSessionOverMCP drives a Python REPL through exec_command
// and write_stdin over MCP, then checks that a session still running when
// the client goes away is ended with its conversation.
func TestInteractiveSessionOverMCP(t *testing.T) {
	token := proctest.Token(t)
	h := sessionHost(t, token)
	pts := ptyFDs(t)
	s := New(h, Options{})
	cs := connect(t, s, nil)
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, " ") != "exec_command session_kill session_list write_stdin" {
		t.Errorf("tools %v", names)
	}

	out, isErr := callText(t, cs, "exec_command", map[string]any{"cmd": "python3 -i -q", "tty": true, "yield_time_ms": 2000})
	m := sessionIDRE.FindStringSubmatch(out)
	if isErr || m == nil {
		t.Fatalf("exec_command: %q", out)
	}
	id := m[1]
	for tries := 0; !strings.Contains(out, ">>> "); tries++ {
		more, _ := callText(t, cs, "write_stdin", map[string]any{"session_id": id})
		out += more
		if tries > 5 {
			t.Fatalf("no prompt: %q", out)
		}
	}
	out, isErr = callText(t, cs, "write_stdin", map[string]any{"session_id": id, "chars": "print(6*7)\n", "yield_time_ms": 1000})
	for tries := 0; !isErr && !strings.Contains(out, "42\n>>> "); tries++ {
		more, _ := callText(t, cs, "write_stdin", map[string]any{"session_id": id})
		out += more
		if tries > 5 {
			break
		}
	}
	if isErr || !strings.Contains(out, "42\n>>> ") {
		t.Fatalf("write_stdin: %q", out)
	}
	out, _ = callText(t, cs, "write_stdin", map[string]any{"session_id": id, "chars": "\u0004", "yield_time_ms": 5000})
	if !strings.Contains(out, "Process exited with code 0") {
		t.Fatalf("Ctrl-D: %q", out)
	}

	out, _ = callText(t, cs, "exec_command", map[string]any{"cmd": "sleep 100 & sleep 100", "tty": true, "yield_time_ms": 250})
	if sessionIDRE.FindStringSubmatch(out) == nil {
		t.Fatalf("exec_command: %q", out)
	}
	cs.Close()
	deadline := time.Now().Add(20 * time.Second)
	for len(proctest.Survivors(token)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the conversation's session outlived it: survivors %v", proctest.Survivors(token))
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Shutdown(context.Background())
	if n := ptyFDs(t); n > pts {
		t.Errorf("descriptors on a pseudo-terminal: %d before, %d after", pts, n)
	}
}
