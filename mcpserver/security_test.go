//go:build linux

package mcpserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestTokenStrength(t *testing.T) {
	cases := []struct {
		token string
		ok    bool
	}{
		{"", false},
		{"t", false},
		{"s3cret", false},
		{strings.Repeat("ab", 40), false}, // few distinct characters
		{"0123456789abcdef0123456789abcdef", false}, // 128 bits of hex
		{testToken, true}, // 256 bits of hex
		{GenerateToken(), true},
		{"Zx8_kP2-qL9mW4vN7rT1yB6cH3jF5dG0sA8eU2iO4pQ", true}, // 43 base64url characters
		{"correct horse battery staple and more words", false},
		{"Password123!Password123!", false},
		{strings.Repeat("x", 10) + "\x00" + testToken, false},
	}
	for _, c := range cases {
		err := CheckToken(c.token)
		if (err == nil) != c.ok {
			t.Errorf("CheckToken(%q) = %v, want ok=%v (%.0f bits)", c.token, err, c.ok, TokenBits(c.token))
		}
		if err != nil && (!errors.Is(err, ErrWeakToken) || !strings.Contains(err.Error(), "openssl rand -hex 32")) {
			t.Errorf("message %v", err)
		}
	}
}

// TestListenRefusals: no token over TCP, --no-auth beyond loopback, and a
// weak token are each refused before anything listens.
func TestListenRefusals(t *testing.T) {
	h, _ := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	cases := []struct {
		addr string
		o    HTTPOptions
		want error
	}{
		{"127.0.0.1:0", HTTPOptions{}, ErrTokenRequired},
		{"0.0.0.0:0", HTTPOptions{NoAuth: true}, ErrNoAuthBeyondLoopback},
		{"127.0.0.1:0", HTTPOptions{Token: "s3cret"}, ErrWeakToken},
		{"127.0.0.1:0", HTTPOptions{Token: testToken, Tokens: []string{"short"}}, ErrWeakToken},
	}
	for _, c := range cases {
		if err := s.ListenAndServe(context.Background(), c.addr, c.o, time.Second, nil); !errors.Is(err, c.want) {
			t.Errorf("%s %+v: got %v, want %v", c.addr, c.o, err, c.want)
		}
	}
}

// rawPost sends body to url with the headers given, returning the status
// and body.
func rawPost(t *testing.T, url, body string, headers ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSessionBoundToCredential: a session id presented with another
// client's token is refused; the session's own client goes on.
func TestSessionBoundToCredential(t *testing.T) {
	other := GenerateToken()
	h, _ := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	url := serveHTTP(t, s, HTTPOptions{Token: testToken, Tokens: []string{other}})
	cs := httpClient(t, url, testToken)
	list := `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`
	code, body := rawPost(t, url, list, "Authorization", "Bearer "+other, "Mcp-Session-Id", cs.ID())
	if code != http.StatusForbidden || !strings.Contains(body, "another client") {
		t.Errorf("stolen id: %d %q", code, body)
	}
	code, body = rawPost(t, url, list, "Authorization", "Bearer "+testToken, "Mcp-Session-Id", cs.ID())
	if code != http.StatusOK || !strings.Contains(body, "bash") {
		t.Errorf("own id: %d %q", code, body)
	}
	// Nor may the thief delete it.
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Authorization", "Bearer "+other)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("delete by another: %s", resp.Status)
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Errorf("the session's own client: %v", err)
	}
}

// TestSessionIDNeverRecorded: the audit log and the job records hold a
// conversation id that is not the session id (a bearer secret).
func TestSessionIDNeverRecorded(t *testing.T) {
	h, mem := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	url := serveHTTP(t, s, HTTPOptions{Token: testToken})
	cs := httpClient(t, url, testToken)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo hi", "mode": "background"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %q", err, text(res))
	}
	h.Jobs.WaitSupervisors()
	id := cs.ID()
	if len(id) < 8 {
		t.Fatalf("session id %q", id)
	}
	var conv string
	for _, e := range mem.Events() {
		conv = e.Conversation
		if strings.Contains(fmt.Sprintf("%+v", e), id) {
			t.Errorf("the audit event holds the session id: %+v", e)
		}
	}
	if !strings.HasPrefix(conv, "mcp-") {
		t.Errorf("conversation %q", conv)
	}
	filepath.Walk(filepath.Dir(h.Jobs.JobsDir()), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), id) {
				t.Errorf("%s holds the session id", p)
			}
		}
		return nil
	})
}

// TestRequestShapes: an absolute-form request URI and a cross-origin
// Origin are refused; a same-origin Origin is not.
func TestRequestShapes(t *testing.T) {
	h, _ := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	url := serveHTTP(t, s, HTTPOptions{Token: testToken})
	host := strings.TrimPrefix(url, "http://")
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

	// Absolute form, naming this server in the URI and another host in
	// the Host header (which Go would otherwise drop).
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST http://%s/ HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", host, testToken, len(init), init)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "absolute-form") {
		t.Errorf("absolute form: %d %q", resp.StatusCode, b)
	}

	for origin, want := range map[string]int{"http://evil.example": 403, "null": 403, "http://" + host: 200, "http://localhost.evil.example:1": 403} {
		code, body := rawPost(t, url, init, "Authorization", "Bearer "+testToken, "Origin", origin)
		if code != want {
			t.Errorf("Origin %s: %d %q", origin, code, body)
		}
	}
	// A foreign Host header in origin form: the SDK's rebinding guard.
	req, _ := http.NewRequest("POST", url, strings.NewReader(init))
	req.Host = "evil.example"
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: %s", resp.Status)
	}
}

// TestUnixSocket: --listen unix:PATH makes a 0600 socket of this user and
// serves over it without a token.
func TestUnixSocket(t *testing.T) {
	token := proctest.Token(t)
	h, _ := newHost(t, token)
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	path := filepath.Join(t.TempDir(), "agentexec.sock")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.ListenAndServe(ctx, "unix:"+path, HTTPOptions{}, 5*time.Second, func(net.Addr) { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if _, err := os.Lstat(path); err == nil {
			t.Error("the socket was left behind")
		}
	}()
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v %v", fi.Mode(), err)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}
	defer tr.CloseIdleConnections()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: "http://localhost/", HTTPClient: &http.Client{Transport: tr}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo over a socket"}})
	if err != nil || text(res) != "over a socket\n" {
		t.Errorf("%v %q", err, text(res))
	}
	cs.Close()
}
