//go:build linux

package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/mcpserver"
)

// mcpProcess is a real `agentexec mcp` with raw access to its stdin and
// stdout.
type mcpProcess struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stdout io.ReadCloser
	state  string
	dir    string // the workspace
}

// startMCP starts `agentexec mcp` (the test binary as the CLI) with its
// job state in the test's directory, and initializes it.
func startMCP(t *testing.T, token string, extra ...string) *mcpProcess {
	t.Helper()
	return startMCPIn(t, token, t.TempDir(), extra...)
}

// startMCPIn is startMCP with its workspace and state in dir.
func startMCPIn(t *testing.T, token, dir string, extra ...string) *mcpProcess {
	t.Helper()
	state := filepath.Join(dir, "jobs")
	// Commands carry the token, so that the test finds what survives.
	name, value, _ := strings.Cut(token, "=")
	config := filepath.Join(dir, "agentexec.toml")
	os.WriteFile(config, fmt.Appendf(nil, "[env]\nset = { %s = %q }\n[tools]\ngrace = \"200ms\"\n", name, value), 0o600)
	args := append([]string{"mcp", "--config", config, "--state-dir", state, "--audit-log", "off", "--cwd", dir}, extra...)
	argv, helper := proctest.HelperArgv(t, "cli", args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helper, token, "GORACE=atexit_sleep_ms=0", "XDG_RUNTIME_DIR="+filepath.Join(dir, "run"))
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &mcpProcess{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), stdout: out, state: state, dir: dir}
	t.Cleanup(p.stop)
	p.send(t, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r := p.recv(t); r["id"] != "init" || r["result"] == nil {
		t.Fatalf("initialize: %v", r)
	}
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return p
}

// stop closes the server's stdin and waits for it to exit (killing it
// after 20 s).
func (p *mcpProcess) stop() {
	p.in.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

func (p *mcpProcess) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		t.Fatalf("the server stopped reading: %v", err)
	}
}

// recv reads the next message the server wrote, skipping notifications.
func (p *mcpProcess) recv(t *testing.T) map[string]any {
	t.Helper()
	for {
		line, err := p.out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("the server's stdout ended: %v (%q)", err, line)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("the server wrote %q: %v", line, err)
		}
		if m["method"] != nil && m["id"] == nil {
			continue
		}
		return m
	}
}

// call makes a tools/call and returns the text of its answer.
func (p *mcpProcess) call(t *testing.T, id int, tool, args string) (string, map[string]any) {
	t.Helper()
	p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
	r := p.recv(t)
	if r["id"] != float64(id) {
		t.Fatalf("answer to %d: %v", id, r)
	}
	res, _ := r["result"].(map[string]any)
	if res == nil {
		return "", r
	}
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return "", r
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	return text, r
}

// TestMCPStdioMalformedLines: each malformed line is answered with the
// JSON-RPC error it deserves and the server keeps serving: the normal call
// after it succeeds, in the same real `agentexec mcp` process.
func TestMCPStdioMalformedLines(t *testing.T) {
	token := proctest.Token(t)
	p := startMCP(t, token)
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	cases := []struct {
		name, line string
		code       float64
		id         any
	}{
		{"garbage", "this is not json", -32700, nil},
		{"truncated", `{"jsonrpc":"2.0","id":5,"method":"tools/ca`, -32700, nil},
		{"bare number", "12345", -32600, nil},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":99,"method":"tools/list"}`, -32600, float64(99)},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, -32600, nil},
		{"batch", `[{"jsonrpc":"2.0","id":98,"method":"tools/list"}]`, -32600, nil},
		{"deep nesting", deep, -32700, nil},
		// Just over the limit: the reader keeps the limit's worth, then
		// skips the rest. (It was 50 MB: 20 to 30 s under the race
		// detector for the same check.)
		{"line over the limit", `{"jsonrpc":"2.0","id":97,"method":"tools/call","params":{"name":"bash","arguments":{"command":"` + strings.Repeat("a", mcpserver.DefaultMaxLineBytes+1<<20) + `"}}}`, -32600, nil},
		{"binary", "\x00\x01\x02\xff\xfe", -32700, nil},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p.send(t, c.line)
			r := p.recv(t)
			e, _ := r["error"].(map[string]any)
			if e == nil || e["code"] != c.code || r["id"] != c.id {
				t.Fatalf("answer %v, want code %v id %v", r, c.code, c.id)
			}
			if msg, _ := e["message"].(string); msg == "" || len(msg) > 400 {
				t.Errorf("message %q", msg)
			}
			text, r := p.call(t, 1000+i, "bash", `{"command":"echo still serving"}`)
			if text != "still serving\n" {
				t.Fatalf("the call after the bad line: %v", r)
			}
		})
	}
}

// TestMCPStdioDuplicateID: a request reusing the id of a request still
// running is answered with an error; the first request still gets its
// own answer.
func TestMCPStdioDuplicateID(t *testing.T) {
	token := proctest.Token(t)
	p := startMCP(t, token)
	// The first call runs until the test lets it go; the reader registers
	// its id before it reads the next line.
	p.send(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bash","arguments":{"command":"while [ ! -e go ]; do sleep 0.02; done; echo first"}}}`)
	p.send(t, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	r := p.recv(t)
	if e, _ := r["error"].(map[string]any); e == nil || e["code"] != float64(-32600) || r["id"] != float64(7) {
		t.Fatalf("duplicate: %v", r)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r = p.recv(t)
	res, _ := r["result"].(map[string]any)
	if r["id"] != float64(7) || res == nil || !strings.Contains(fmt.Sprint(res["content"]), "first") {
		t.Fatalf("first call: %v", r)
	}
	// Once answered, the id may be used again.
	p.send(t, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	if r := p.recv(t); r["result"] == nil {
		t.Fatalf("reuse after the answer: %v", r)
	}
	p.stop()
	proctest.NoSurvivors(t, token)
}

// TestMCPStdioClientClosesReadEnd: a client that closes only its reading
// end (the server's stdout) ends its running call, and the server exits,
// though stdin stays open.
func TestMCPStdioClientClosesReadEnd(t *testing.T) {
	token := proctest.Token(t)
	p := startMCP(t, token)
	p.send(t, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo started > started; exec sleep 600"}}}`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(p.dir, "started")); len(b) > 0 && len(proctest.Survivors(token)) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call did not start")
		}
	}
	p.stdout.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the server still runs 20 s after its client closed its stdout")
	}
	proctest.NoSurvivors(t, token)
}
