//go:build linux

package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/mcpserver"
)

// postCall sends one tools/call to a serve process (protocol 2026-07-28,
// no session) and returns the HTTP status and body.
func postCall(ctx context.Context, client *http.Client, url, token, tool string, args map[string]any) (int, string, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": tool, "arguments": args, "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    mcpserver.FirstStatelessVersion,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "drain-test", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		}}})
	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpserver.FirstStatelessVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestServeDrainsOnSIGTERM: a real `agentexec serve` running a command
// that ignores SIGTERM (and its child), a background job and an
// interactive session gets SIGTERM: /readyz turns 503 at once while /livez
// stays 200, a new call is refused with a reason, every process tree is
// gone within --grace, the audit log holds the ended call, and the
// process exits 0. The metrics listener counts the running command.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and waits for a command's grace")
	}
	dir := t.TempDir()
	token := proctest.Token(t)
	tokName, tokValue, _ := strings.Cut(token, "=")
	auditPath := filepath.Join(dir, "audit.jsonl")
	cfgPath := filepath.Join(dir, "agentexec.toml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
profile = "open"
[env]
set = { %s = %q }
[tools]
enabled = ["bash", "exec_command", "write_stdin"]
grace = "2s"
[sandbox]
profile = "off"
[audit]
path = %q
[server]
grace = "8s"
`, tokName, tokValue, auditPath)), 0o600)
	bearer := mcpserver.GenerateToken()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte(bearer+"\n"), 0o600)
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)

	argv, helper := proctest.HelperArgv(t, "cli", "serve", "--config", cfgPath, "--listen", "127.0.0.1:0", "--token-file", tokenFile,
		"--metrics-listen", "127.0.0.1:0", "--state-dir", filepath.Join(dir, "state"), "--cwd", work)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helper, "GORACE=atexit_sleep_ms=0", "AGENTEXEC_TOKEN=", "OTEL_EXPORTER_OTLP_ENDPOINT=")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var stderrText syncBuffer
	var mcpURL, metricsURL string
	sc := bufio.NewScanner(stderr)
	startDeadline := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	for (mcpURL == "" || metricsURL == "") && sc.Scan() {
		line := sc.Text()
		stderrText.Write([]byte(line + "\n"))
		if m := regexp.MustCompile(`Prometheus metrics on (http://\S+)`).FindStringSubmatch(line); m != nil {
			metricsURL = m[1]
		}
		if m := regexp.MustCompile(`serving MCP on (http://\S+)`).FindStringSubmatch(line); m != nil {
			mcpURL = m[1]
		}
	}
	startDeadline.Stop()
	go func() {
		io.Copy(&stderrText, stderr)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		proctest.NoSurvivors(t, token)
	})
	if mcpURL == "" || metricsURL == "" {
		cmd.Process.Kill()
		<-exited
		t.Fatalf("serve did not start: %s", stderrText.String())
	}
	base := strings.TrimSuffix(mcpURL, "/mcp")
	client := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	get := func(url string) (int, string) {
		resp, err := client.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/livez", "/readyz", "/healthz"} {
		if code, body := get(base + p); code != http.StatusOK {
			t.Fatalf("%s before SIGTERM: %d %q", p, code, body)
		}
	}

	// A background job and an interactive session, then a foreground
	// command whose tree ignores SIGTERM.
	if code, body, err := postCall(t.Context(), client, mcpURL, bearer, "bash", map[string]any{"command": "exec sleep 600", "mode": "background"}); code != 200 || err != nil {
		t.Fatalf("background: %d %q %v", code, body, err)
	}
	if code, body, err := postCall(t.Context(), client, mcpURL, bearer, "exec_command", map[string]any{"cmd": "exec sleep 600", "yield_time_ms": 100}); code != 200 || err != nil {
		t.Fatalf("session: %d %q %v", code, body, err)
	}
	pids := filepath.Join(work, "pids")
	call := make(chan string, 1)
	go func() {
		_, body, err := postCall(context.Background(), client, mcpURL, bearer, "bash", map[string]any{
			"command": "trap '' TERM; sleep 600 & echo $! > pids.tmp; echo $$ >> pids.tmp; mv pids.tmp pids; wait"})
		call <- fmt.Sprint(body, err)
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, metrics := get(metricsURL)
		if _, err := os.Stat(pids); err == nil && strings.Contains(metrics, "\nagentexec_processes_running 1\n") &&
			strings.Contains(metrics, "\nagentexec_jobs_live 1\n") && strings.Contains(metrics, "\nagentexec_sessions_live 1\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command did not start: %s", metrics)
		}
	}
	if n := len(proctest.Survivors(token)); n < 4 {
		t.Fatalf("%d processes carry the token before SIGTERM; want at least 4", n)
	}

	sent := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	ready := 0
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if ready, _ = get(base + "/readyz"); ready == http.StatusServiceUnavailable {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("serve exited (%v) before /readyz said 503 (last %d)", err, ready)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after SIGTERM", ready)
		}
	}
	// The command's tree ignores SIGTERM: it lives until tools.grace, so
	// the server is still draining here.
	if code, _ := get(base + "/livez"); code != http.StatusOK {
		t.Errorf("/livez while draining: %d", code)
	}
	if code, body, _ := postCall(t.Context(), client, mcpURL, bearer, "bash", map[string]any{"command": "true"}); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("a new call while draining: %d %q", code, body)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve exited with %v after SIGTERM; want 0. stderr:\n%s", err, stderrText.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit within 30s of SIGTERM")
	}
	took := time.Since(sent)
	if took > 8*time.Second+5*time.Second {
		t.Errorf("serve took %v to exit; --grace is 8s", took)
	}
	t.Logf("SIGTERM to exit: %v", took)
	if left := proctest.Survivors(token); len(left) > 0 {
		t.Errorf("processes outlived the drain: %v", left)
	}
	<-call
	b, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev struct {
			Event, Command, Outcome string
		}
		json.Unmarshal([]byte(line), &ev)
		if ev.Event == "tool.call.finished" && strings.Contains(ev.Command, "trap") {
			found = ev.Outcome == "cancelled"
			if !found {
				t.Errorf("the drained call's audit event: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("the audit log has no finished event for the drained call:\n%s", b)
	}
}

// syncBuffer is a buffer one goroutine writes while another reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
