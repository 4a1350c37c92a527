//go:build linux

package mcpserver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveHTTP serves s on a loopback port until the test ends, and fails
// the test if serving ended with an error.
func serveHTTP(t testing.TB, s *Server, o HTTPOptions) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.ListenAndServe(ctx, "127.0.0.1:0", o, 5*time.Second, func(a net.Addr) { addrc <- a })
	}()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		http.DefaultClient.CloseIdleConnections()
	})
	return "http://" + addr.String()
}

// busy starts n calls of sleep 600 in cs and waits until they run.
func busy(t *testing.T, ctx context.Context, cs *mcp.ClientSession, token string, n, already int, wg *sync.WaitGroup) {
	t.Helper()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 600"}})
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); len(proctest.Survivors(token)) < already+n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls running, want %d", len(proctest.Survivors(token)), already+n)
		}
	}
}

// TestServerWideCallLimit: the calls of all sessions together are capped,
// the refusal says which limit, and refusals are audited (per session and
// server-wide).
func TestServerWideCallLimit(t *testing.T) {
	token := proctest.Token(t)
	h, mem := newHost(t, token)
	s := New(h, Options{MaxCalls: 2, MaxCallsTotal: 3})
	defer s.Shutdown(context.Background())
	a, b := connect(t, s, nil), connect(t, s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	busy(t, ctx, a, token, 2, 0, &wg)
	res, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "server.max_calls_per_session") {
		t.Errorf("per session: %v %q", err, text(res))
	}
	busy(t, ctx, b, token, 1, 2, &wg)
	res, err = b.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "server.max_calls)") || !strings.Contains(text(res), "all its clients") {
		t.Errorf("server-wide: %v %q", err, text(res))
	}
	cancel()
	wg.Wait()
	s.calls.Wait() // the server's side of the cancelled calls
	rules := map[string]bool{}
	for _, e := range mem.Events() {
		if e.Type == audit.Denied && e.ErrorKind == "limit" {
			rules[e.Rule] = true
			if e.Conversation == "" || e.Tool != "bash" || e.CallID == "" {
				t.Errorf("refusal event %+v", e)
			}
		}
	}
	if !rules["session_call_limit"] || !rules["server_call_limit"] {
		t.Errorf("audited refusals: %v", rules)
	}
	// Once the calls ended, calls run again, and a command started right
	// after cancelled ones runs normally. (Under CPU load the cancelled
	// trees can outlast the grace and be ended with cgroup.kill; the runner
	// once reused such a cgroup, and Linux then killed this echo at birth.)
	res, err = b.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo ok"}})
	if err != nil || res.IsError || text(res) != "ok\n" {
		t.Errorf("after: %v %q", err, text(res))
	}
	proctest.NoSurvivors(t, token)
}

// TestHTTPSessionLimit: a new client beyond max_sessions is refused with
// the reason, even when many arrive at once; an ended session frees its
// place.
func TestHTTPSessionLimit(t *testing.T) {
	h, _ := newHost(t, proctest.Token(t))
	s := New(h, Options{MaxSessions: 3})
	defer s.Shutdown(context.Background())
	url := serveHTTP(t, s, HTTPOptions{Token: testToken})
	var mu sync.Mutex
	var ok []*mcp.ClientSession
	refused := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token: testToken, next: tr}}, DisableStandaloneSSE: true}, legacy)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if !strings.Contains(err.Error(), "too many sessions") && !strings.Contains(err.Error(), "503") && !strings.Contains(err.Error(), "Service Unavailable") {
					t.Errorf("refusal: %v", err)
				}
				refused++
				return
			}
			ok = append(ok, cs)
		}()
	}
	wg.Wait()
	if len(ok) != 3 || refused != 5 {
		t.Fatalf("%d sessions, %d refused", len(ok), refused)
	}
	// The refusal as a client sees it.
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "server.max_sessions") {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
	for _, cs := range ok {
		cs.Close()
	}
	for deadline := time.Now().Add(10 * time.Second); s.sessionCount() > 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	httpClient(t, url, testToken)
}

// TestHTTPIdleSessionExpires: a session unused for session_idle is closed;
// its id then gets a clear error.
func TestHTTPIdleSessionExpires(t *testing.T) {
	h, _ := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	url := serveHTTP(t, s, HTTPOptions{Token: testToken, SessionTimeout: 300 * time.Millisecond})
	cs := httpClient(t, url, testToken)
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); s.sessionCount() > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the idle session was never closed")
		}
	}
	if _, err := cs.ListTools(context.Background(), nil); err == nil {
		t.Error("an expired session still answered")
	}
}

// failingSink fails while broken is set.
type failingSink struct {
	mu     sync.Mutex
	broken bool
}

func (f *failingSink) Write(audit.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken {
		return errors.New("no space left on device")
	}
	return nil
}

// TestHealthDegradedWhileAuditFails: with fail-closed auditing and an
// audit log that cannot be written, /healthz says degraded (503) while
// calls are refused, and ok again once the log can be written.
func TestHealthDegradedWhileAuditFails(t *testing.T) {
	h, _ := newHost(t, proctest.Token(t))
	sink := &failingSink{broken: true}
	h.Registry.Audit = sink
	h.Registry.FailClosed = true
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	url := serveHTTP(t, s, HTTPOptions{Token: testToken})
	health := func() (int, string) {
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := health(); code != 200 {
		t.Errorf("before any call: %d %q", code, body)
	}
	cs := httpClient(t, url, testToken)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo hi"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "audit log cannot be written") {
		t.Fatalf("%v %q", err, text(res))
	}
	if code, body := health(); code != http.StatusServiceUnavailable || !strings.Contains(body, "degraded") || !strings.Contains(body, "no space left") {
		t.Errorf("while failing: %d %q", code, body)
	}
	sink.mu.Lock()
	sink.broken = false
	sink.mu.Unlock()
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo hi"}})
	if err != nil || res.IsError {
		t.Fatalf("after: %v %q", err, text(res))
	}
	if code, body := health(); code != 200 {
		t.Errorf("after: %d %q", code, body)
	}
}

// TestConcurrentBackgroundCap: 16 background calls at once in one session,
// with a cap of 8 live jobs, start exactly 8.
func TestConcurrentBackgroundCap(t *testing.T) {
	token := proctest.Token(t)
	h, _ := newHost(t, token)
	h.Jobs.MaxLive = 8
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	cs := connect(t, s, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	started, refused := 0, 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 600", "mode": "background"}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case !res.IsError:
				started++
			case strings.Contains(text(res), "too many running jobs"):
				refused++
			default:
				t.Errorf("%q", text(res))
			}
		}()
	}
	wg.Wait()
	if started != 8 || refused != 8 {
		t.Errorf("%d started, %d refused", started, refused)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h.Jobs.StopAll(ctx)
	proctest.NoSurvivors(t, token)
}
