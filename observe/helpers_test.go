//go:build linux

package observe_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/config"
	"github.com/agentexec/agentexec/host"
	"github.com/agentexec/agentexec/mcpserver"
	"github.com/agentexec/agentexec/observe"
	"github.com/agentexec/agentexec/sandbox"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// testToken is the bearer token of the test servers.
var testToken = mcpserver.GenerateToken()

// testConfig: bash, shell.exec (sleep allowed) and the interactive tools;
// a rule that asks before touch and one that denies shutdown.
func testConfig(token string) string {
	name, value, _ := strings.Cut(token, "=")
	return fmt.Sprintf(`
profile = "guarded"
[env]
set = { %s = %q }
[tools]
enabled = ["bash", "shell.exec", "exec_command", "write_stdin"]
names = { "shell.exec" = "shell_exec" }
grace = "200ms"
[tools.shell_exec]
allow_executables = ["sleep", "true"]
[sandbox]
profile = "off"
[audit]
path = "off"
[[rules]]
id = "ask-touch"
action = "ask"
executables = ["touch"]
reason = "touch changes files"
[[rules]]
id = "no-shutdown"
action = "deny"
executables = ["shutdown"]
reason = "shutdown stops the machine"
`, name, value)
}

// fixture is a served host with an Observer.
type fixture struct {
	h       *host.Host
	s       *mcpserver.Server
	obs     *observe.Observer
	exp     *tracetest.InMemoryExporter
	mem     *audit.Memory
	url     string // MCP endpoint
	metrics string // metrics endpoint, or ""
	client  *http.Client
	seq     atomic.Int64
}

// setup serves a host over HTTP with metrics and/or traces on (traces to
// an in-memory exporter).
func setup(t testing.TB, token string, metrics, traces bool, adjust ...func(*observe.Options)) *fixture {
	t.Helper()
	cfg, err := config.Parse("test.toml", testConfig(token))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workspace = t.TempDir()
	cfg.Jobs.StateDir = t.TempDir()
	h, err := host.New(cfg, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{h: h, mem: &audit.Memory{}, client: &http.Client{Transport: &http.Transport{}}}
	h.Registry.Audit = f.mem
	if metrics || traces {
		layers := map[string]bool{}
		for _, l := range sandbox.StatusOf(h.Sandbox) {
			layers[l.Name] = l.Available
		}
		o := observe.Options{Metrics: metrics, Traces: traces, Version: "9.9.9-test", Tools: h.Registry.Names(),
			Jobs: h.Jobs.Live, Sessions: h.Sessions.Live, Layers: layers}
		if traces {
			f.exp = tracetest.NewInMemoryExporter()
			o.Exporter = f.exp
		}
		for _, a := range adjust {
			a(&o)
		}
		if f.obs, err = observe.New(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		h.Registry.Observer = f.obs
	}
	f.s = mcpserver.New(h, mcpserver.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- f.s.ListenAndServe(ctx, "127.0.0.1:0", mcpserver.HTTPOptions{Token: testToken}, 5*time.Second, func(a net.Addr) { addrc <- a })
	}()
	select {
	case a := <-addrc:
		f.url = "http://" + a.String() + "/mcp"
	case err := <-done:
		t.Fatal(err)
	}
	var mdone chan error
	if metrics {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		f.metrics = "http://" + ln.Addr().String() + "/metrics"
		mdone = make(chan error, 1)
		go func() { mdone <- f.obs.ServeMetrics(ctx, ln) }()
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if mdone != nil {
			if err := <-mdone; err != nil {
				t.Error(err)
			}
		}
		if f.obs != nil {
			f.obs.Shutdown(context.Background())
		}
		f.client.CloseIdleConnections()
		h.Close()
	})
	return f
}

// rpcResult is the part of a JSON-RPC answer the tests read.
type rpcResult struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (r *rpcResult) text() string {
	if r.Result == nil {
		if r.Error != nil {
			return r.Error.Message
		}
		return ""
	}
	var b strings.Builder
	for _, c := range r.Result.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// call sends one tools/call over protocol 2026-07-28 (no session), with
// meta as params._meta, and returns the answer.
func (f *fixture) call(ctx context.Context, t testing.TB, tool string, args map[string]any, meta map[string]any) (*rpcResult, error) {
	id := f.seq.Add(1)
	m := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    mcpserver.FirstStatelessVersion,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "observe-test", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}
	for k, v := range meta {
		m[k] = v
	}
	params := map[string]any{"name": tool, "arguments": args, "_meta": m}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	req, _ := http.NewRequestWithContext(ctx, "POST", f.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpserver.FirstStatelessVersion)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	var payloads [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				payloads = append(payloads, []byte(d))
			}
		}
	} else {
		b, _ := io.ReadAll(resp.Body)
		payloads = append(payloads, b)
	}
	for _, p := range payloads {
		var r rpcResult
		if json.Unmarshal(p, &r) == nil && string(r.ID) == fmt.Sprint(id) {
			return &r, nil
		}
	}
	return nil, fmt.Errorf("no answer to request %d in %q", id, payloads)
}

// mustCall is call that fails the test on a transport error.
func (f *fixture) mustCall(t testing.TB, tool string, args map[string]any) *rpcResult {
	t.Helper()
	r, err := f.call(context.Background(), t, tool, args, nil)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return r
}
