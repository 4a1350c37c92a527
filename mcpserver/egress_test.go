//go:build linux

package mcpserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/agentexec/agentexec/config"
	"github.com/agentexec/agentexec/host"
	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestNetworkAsk: with on_unknown = "ask", a sandboxed command's
// connection to a host no rule names waits while the client's user is
// asked (MCP elicitation); accept lets it through, decline refuses it with
// the reason.
func TestNetworkAsk(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	if !sandbox.Probe().UserNS {
		t.Skip("no namespaces here")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello through the proxy") })}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	defer func() {
		srv.Close()
		<-served
	}()
	cfg, err := config.Parse("test.toml", testConfig(proctest.Token(t))+"\n[sandbox.network]\nmode = \"allowlist\"\nallow_private = true\non_unknown = \"ask\"\n")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workspace = t.TempDir()
	cfg.Jobs.StateDir = t.TempDir()
	h, err := host.New(cfg, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	var mu sync.Mutex
	answer, asked, always := "decline", []string{}, false
	// A client of the last revision with server requests during a call
	// (2025-11-25); under 2026-07-28 a request cannot be held for an
	// answer, and the refusal says so (below).
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.ServeTransport(ctx, st); close(done) }()
	defer func() {
		cancel()
		<-done
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, r.Params.Message)
		if always && answer == "accept" {
			return &mcp.ElicitResult{Action: answer, Content: map[string]any{"always": true}}, nil
		}
		return &mcp.ElicitResult{Action: answer}, nil
	}}).Connect(context.Background(), ct, legacy)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func() string {
		t.Helper()
		args := map[string]any{"command": "curl -sS --noproxy '' --max-time 30 http://" + ln.Addr().String() + "/ 2>&1"}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return text(res)
	}
	if got := call(); !strings.Contains(got, "the user declined network access to "+ln.Addr().String()) {
		t.Errorf("declined: %q", got)
	}
	mu.Lock()
	answer = "accept"
	mu.Unlock()
	if got := call(); !strings.Contains(got, "hello through the proxy") {
		t.Errorf("accepted: %q", got)
	}
	// "For the rest of the session": the next call is not asked, and the
	// approval stays with this client (the client below is not let through).
	mu.Lock()
	always, before := true, len(asked)
	mu.Unlock()
	if got := call(); !strings.Contains(got, "hello through the proxy") {
		t.Errorf("accepted for the session: %q", got)
	}
	if got := call(); !strings.Contains(got, "hello through the proxy") {
		t.Errorf("after the session's approval: %q", got)
	}
	mu.Lock()
	if n := len(asked) - before; n != 1 {
		t.Errorf("asked %d times for two calls after allowing for the session, want 1", n)
	}
	mu.Unlock()
	// The client of 2026-07-28 cannot be asked mid-call: refused, saying so
	// (and not let through by the first client's approval for its session).
	cs2 := connect(t, s, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}})
	res, err := cs2.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "curl -sS --noproxy '' --max-time 30 http://" + ln.Addr().String() + "/ 2>&1"}})
	if err != nil || !strings.Contains(text(res), "asking failed") {
		t.Errorf("2026-07-28 client: %v %q", err, text(res))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 3 || !strings.Contains(asked[0], "127.0.0.1 port") {
		t.Errorf("questions: %q", asked)
	}
}
