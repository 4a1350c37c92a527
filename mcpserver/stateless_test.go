//go:build linux

package mcpserver

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// client2026 connects a Go client that speaks protocol 2026-07-28 (the
// SDK's default when the server offers it).
func client2026(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token: token, next: tr}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callIn(t *testing.T, cs *mcp.ClientSession, handle, tool string, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if handle != "" {
		p.Meta = mcp.Meta{MetaConversation: handle}
	}
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	h, _ := res.Meta[MetaConversation].(string)
	return res, h
}

// TestStateless2026: a 2026-07-28 client is served without a session; the
// handle in each answer keeps its conversation (its jobs) across requests;
// without one a call starts a new conversation; a forged, foreign or
// expired handle is refused with the reason.
func TestStateless2026(t *testing.T) {
	token := proctest.Token(t)
	h, _ := newHost(t, token)
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	other := GenerateToken()
	url := serveHTTP(t, s, HTTPOptions{Token: testToken, Tokens: []string{other}})
	cs := client2026(t, url, testToken)
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" || cs.ID() != "" {
		t.Fatalf("protocol %q, session %q", v, cs.ID())
	}
	res, handle := callIn(t, cs, "", "bash", map[string]any{"command": "echo stateless"})
	if text(res) != "stateless\n" || !strings.HasPrefix(handle, "agx1.") {
		t.Fatalf("%q %q", text(res), handle)
	}
	res, again := callIn(t, cs, handle, "bash", map[string]any{"command": "echo up; exec sleep 600", "mode": "background"})
	if res.IsError || again != handle {
		t.Fatalf("background: %q %q", text(res), again)
	}
	res, _ = callIn(t, cs, handle, "job_list", map[string]any{})
	if !strings.Contains(text(res), "sleep 600") {
		t.Errorf("the conversation's jobs: %q", text(res))
	}
	res, fresh := callIn(t, cs, "", "job_list", map[string]any{})
	if !strings.Contains(text(res), "No background jobs") || fresh == handle {
		t.Errorf("a new conversation: %q", text(res))
	}
	for bad, want := range map[string]string{
		"agx1." + base64.RawURLEncoding.EncodeToString([]byte("conv-z.9999999999")) + ".AAAA": "not issued by this server",
		"hello": "is not an agentexec conversation handle",
		s.mintHandle("conv-x", "token-0", time.Now().Add(-time.Minute)): "expired at",
		s.mintHandle("conv-y", "token-1", time.Now().Add(time.Hour)):    "not issued by this server to this client",
	} {
		res, _ := callIn(t, cs, bad, "job_list", map[string]any{})
		if !res.IsError || !strings.Contains(text(res), want) {
			t.Errorf("handle %q: %q", bad, text(res))
		}
	}
	// The handle is bound to the token that obtained it.
	thief := client2026(t, url, other)
	res, _ = callIn(t, thief, handle, "job_list", map[string]any{})
	if !res.IsError || strings.Contains(text(res), "sleep 600") {
		t.Errorf("another token with the handle: %q", text(res))
	}
	res, _ = callIn(t, cs, handle, "job_list", map[string]any{})
	id := strings.Fields(text(res))[0]
	res, _ = callIn(t, cs, handle, "job_kill", map[string]any{"job_id": id})
	if res.IsError {
		t.Errorf("kill: %q", text(res))
	}
	proctest.NoSurvivors(t, token)
	// No session is kept for it once its requests are answered.
	for deadline := time.Now().Add(10 * time.Second); s.sessionCount() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions kept for a stateless client", s.sessionCount())
		}
	}
}

// TestHandleOnSessions: on a session (legacy HTTP here; stdio alike) the
// answers carry the session conversation's handle, and the handle reaches
// the same conversation from another session of the same client.
func TestHandleOnSessions(t *testing.T) {
	token := proctest.Token(t)
	h, _ := newHost(t, token)
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	url := serveHTTP(t, s, HTTPOptions{Token: testToken})
	a := httpClient(t, url, testToken)
	res, handle := callIn(t, a, "", "bash", map[string]any{"command": "echo up; exec sleep 600", "mode": "background"})
	if res.IsError || handle == "" {
		t.Fatalf("%q %q", text(res), handle)
	}
	b := httpClient(t, url, testToken)
	res, _ = callIn(t, b, "", "job_list", map[string]any{})
	if strings.Contains(text(res), "sleep 600") {
		t.Errorf("another session saw the job without the handle: %q", text(res))
	}
	res, _ = callIn(t, b, handle, "job_list", map[string]any{})
	if !strings.Contains(text(res), "sleep 600") {
		t.Errorf("with the handle: %q", text(res))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.Jobs.StopAll(ctx)
	proctest.NoSurvivors(t, token)
}
