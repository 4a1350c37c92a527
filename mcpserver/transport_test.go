//go:build linux

package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioClient starts the test binary as a real stdio server.
func stdioClient(t testing.TB, token string) *mcp.ClientSession {
	t.Helper()
	argv, helper := proctest.HelperArgv(t, "stdio")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helper, "AGENTEXEC_TEST_CONFIG="+testConfig(token), "AGENTEXEC_TEST_WORKSPACE="+t.TempDir(), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestStdioServer(t *testing.T) {
	token := proctest.Token(t)
	cs := stdioClient(t, token)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 8 {
		t.Fatalf("%v %d", err, len(tools.Tools))
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo hi from stdio"}})
	if err != nil || text(res) != "hi from stdio\n" {
		t.Errorf("%v %q", err, text(res))
	}
	// A cancelled call ends its command in the server process.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 600"}})
	proctest.NoSurvivors(t, token)
}

// httpServer serves the test host on a loopback port.
func httpServer(t testing.TB, token string, o HTTPOptions) (url string) {
	t.Helper()
	h, _ := newHost(t, token)
	return serveHTTP(t, New(h, Options{}), o)
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func httpClient(t testing.TB, url, token string) *mcp.ClientSession {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: bearer{token: token, next: tr}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, legacy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestHTTP(t *testing.T) {
	url := httpServer(t, proctest.Token(t), HTTPOptions{Token: testToken, MaxBodyBytes: 64 << 10})
	resp, err := http.Get(url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", err, resp)
	}
	resp.Body.Close()
	for _, auth := range []string{"", "Bearer wrong", "Basic " + testToken + ""} {
		req, _ := http.NewRequest("POST", url+"/", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("auth %q: %v %v", auth, err, resp.Status)
		}
		resp.Body.Close()
	}
	req, _ := http.NewRequest("POST", url+"/", bytes.NewReader(make([]byte, 128<<10)))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("big body: %v %v", err, resp.Status)
	}
	resp.Body.Close()

	cs := httpClient(t, url, testToken)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo over http"}})
	if err != nil || text(res) != "over http\n" {
		t.Errorf("%v %q", err, text(res))
	}
}

// TestHTTPClientGone: a long call ends with its whole tree when the client
// deletes its session, and when the client's connections drop without a
// word.
func TestHTTPClientGone(t *testing.T) {
	for _, how := range []string{"session deleted", "connection dropped"} {
		t.Run(how, func(t *testing.T) {
			token := proctest.Token(t)
			url := httpServer(t, token, HTTPOptions{Token: testToken})
			var mu sync.Mutex
			var conns []net.Conn
			tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err == nil {
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}
				return c, err
			}}
			defer tr.CloseIdleConnections()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token: testToken, next: tr}}, DisableStandaloneSSE: true}, legacy)
			if err != nil {
				t.Fatal(err)
			}
			called := make(chan struct{})
			go func() {
				defer close(called)
				cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 600 & sleep 600", "mode": "slow"}})
			}()
			for deadline := time.Now().Add(5 * time.Second); len(proctest.Survivors(token)) < 3 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if n := len(proctest.Survivors(token)); n != 3 {
				t.Fatalf("%d processes running, want bash and its 2 sleeps", n)
			}
			start := time.Now()
			if how == "session deleted" {
				req, _ := http.NewRequest(http.MethodDelete, url+"/", nil)
				req.Header.Set("Authorization", "Bearer "+testToken)
				req.Header.Set("Mcp-Session-Id", cs.ID())
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					t.Errorf("DELETE: %s %s", resp.Status, b)
				}
			}
			mu.Lock()
			for _, c := range conns {
				c.Close()
			}
			mu.Unlock()
			proctest.NoSurvivors(t, token)
			t.Logf("tree ended %v after the client went", time.Since(start))
			<-called
			cs.Close()
		})
	}
}

func TestHTTPNeedsTokenBeyondLoopback(t *testing.T) {
	h, _ := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	err := s.ListenAndServe(context.Background(), "0.0.0.0:0", HTTPOptions{}, time.Second, nil)
	if !errors.Is(err, ErrTokenRequired) {
		t.Errorf("got %v", err)
	}
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, "0.0.0.0:1": false, "10.1.2.3:1": false, ":8765": false} {
		if IsLoopback(addr) != want {
			t.Errorf("IsLoopback(%q) != %v", addr, want)
		}
	}
}

// TestHTTPConcurrent: 200 calls from 8 clients all complete. (Without the
// sandbox, which is not what this tests: under the race detector each
// sandboxed call also starts a race-built trampoline, and the 200 calls
// took 40 to 55 s on a loaded machine.)
func TestHTTPConcurrent(t *testing.T) {
	token := proctest.Token(t)
	h, _ := newHostWith(t, token, "\n[sandbox]\nprofile = \"off\"\n")
	url := serveHTTP(t, New(h, Options{}), HTTPOptions{Token: testToken})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for c := range 8 {
		cs := httpClient(t, url, testToken)
		for i := range 25 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				want := fmt.Sprintf("c%d-%d", c, i)
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo " + want}})
				switch {
				case err != nil:
					errs <- err
				case text(res) != want+"\n":
					errs <- fmt.Errorf("got %q, want %q", text(res), want)
				}
			}()
			if i%8 == 7 {
				wg.Wait() // at most 8 at once per client: the session limit is 16
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	proctest.NoSurvivors(t, token)
}

// BenchmarkCall: one bash call of `true` through the in-memory MCP
// transport, beside the same call through the registry directly.
func BenchmarkCall(b *testing.B) {
	token := "PROCTEST_TOKEN=bench"
	h, _ := newHost(b, token)
	args := []byte(`{"command": "true"}`)
	b.Run("baseline=registry", func(b *testing.B) {
		for b.Loop() {
			if res := h.Registry.Dispatch(context.Background(), h.Call("bench"), "bash", args); res.IsError {
				b.Fatal(res.Text)
			}
		}
	})
	b.Run("mcp-inmemory", func(b *testing.B) {
		s := New(h, Options{})
		cs := connect(b, s, nil)
		for b.Loop() {
			if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}}); err != nil || res.IsError {
				b.Fatal(err)
			}
		}
	})
	b.Run("mcp-stdio", func(b *testing.B) {
		cs := stdioClient(b, token)
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo hi"}}); err != nil || res.IsError {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	})
}

// testToken is a bearer token strong enough for ListenAndServe.
const testToken = "3f9c0b7e5a1d4c8e9b2f6a0d7c3e1b5a9f4d2c8e0b6a3f7d1c5e9b2a4f8d0c6e"

// legacy makes a Go client speak the last revision with sessions (the
// SDK's client otherwise speaks 2026-07-28 to a server that offers it).
var legacy = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
