//go:build linux

package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/config"
	"github.com/agentexec/agentexec/host"
	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/jobs"
	"github.com/agentexec/agentexec/sandbox"
	"github.com/agentexec/agentexec/tool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	sandbox.Main()
	jobs.Main()
	proctest.RunHelpers(map[string]proctest.Helper{"stdio": helperStdio})
	goleak.VerifyTestMain(m)
}

// testConfig is TOML for the tests: every contract, Exec granted, a rule
// that asks before touch.
func testConfig(token string) string {
	name, value, _ := strings.Cut(token, "=")
	return fmt.Sprintf(`
[env]
set = { %s = %q }
[tools]
enabled = ["exec", "bash", "Exec", "shell.exec"]
names = { "shell.exec" = "shell_exec" }
grace = "200ms"
[grants]
tools = ["exec", "bash", "Exec", "shell.exec", "shell_exec", "job_list", "job_output", "job_kill", "job_wait"]
fs = ["r:/usr", "r:/bin", "r:/tmp"]
[audit]
path = "off"
[[rules]]
id = "ask-touch"
action = "ask"
executables = ["touch"]
reason = "touch changes files"
`, name, value)
}

// newHost builds a host from testConfig with its audit in memory.
func newHost(t testing.TB, token string) (*host.Host, *audit.Memory) {
	t.Helper()
	return newHostWith(t, token, "")
}

// newHostWith is newHost with extra appended to the configuration.
func newHostWith(t testing.TB, token, extra string) (*host.Host, *audit.Memory) {
	t.Helper()
	cfg, err := config.Parse("test.toml", testConfig(token)+extra)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workspace = t.TempDir()
	cfg.Jobs.StateDir = t.TempDir()
	h, err := host.New(cfg, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mem := &audit.Memory{}
	h.Registry.Audit = mem
	return h, mem
}

// connect serves s in memory and returns a connected client session.
func connect(t testing.TB, s *Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.ServeTransport(ctx, st); close(done) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-done
	})
	return cs
}

func text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "")
}

func TestListTools(t *testing.T) {
	h, _ := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	cs := connect(t, s, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		got[tl.Name] = tl
	}
	for _, e := range h.Registry.List() {
		tl, ok := got[e.Name]
		if !ok {
			t.Errorf("%s is not listed", e.Name)
			continue
		}
		want, _ := json.Marshal(mustJSON(e.Tool.InputSchema()))
		have, _ := json.Marshal(tl.InputSchema)
		if string(want) != string(have) {
			t.Errorf("%s: schema %s, want %s", e.Name, have, want)
		}
		if tl.Annotations == nil || tl.Annotations.DestructiveHint == nil || *tl.Annotations.DestructiveHint == tl.Annotations.ReadOnlyHint || tl.Description == "" {
			t.Errorf("%s: annotations %+v", e.Name, tl.Annotations)
		}
		_, structured := e.Tool.(tool.OutputSchemer)
		if structured != (tl.OutputSchema != nil) {
			t.Errorf("%s: output schema %v", e.Name, tl.OutputSchema)
		}
	}
	if len(got) != 8 || got["shell_exec"] == nil || got["job_output"] == nil || !strings.Contains(got["bash"].Description, "<pwd>"+h.Workspace+"</pwd>") {
		t.Errorf("tools %v", got)
	}
}

func mustJSON(raw json.RawMessage) any {
	var v any
	json.Unmarshal(raw, &v)
	return v
}

// TestSameTextAsCall: every contract answers over MCP exactly what the
// registry (and so `agentexec call`) answers.
func TestSameTextAsCall(t *testing.T) {
	h, _ := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	cs := connect(t, s, nil)
	calls := []struct{ name, args string }{
		{"exec", `{"command": "echo out; echo err >&2; exit 3"}`},
		{"bash", `{"command": "printf 'a\\nb\\n'; exit 2"}`},
		{"Exec", `{"argv": ["/bin/echo", "; pwd"]}`},
		{"shell_exec", `{"executable": "echo", "argv": ["x"]}`},
		{"bash", `{"command": "git push --force"}`},
		{"exec", `{"command": 5}`},
	}
	for _, c := range calls {
		direct := h.Registry.Dispatch(context.Background(), h.Call("direct"), c.name, json.RawMessage(c.args))
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.name, Arguments: json.RawMessage(c.args)})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if dropDuration(text(res)) != dropDuration(direct.Text) || res.IsError != direct.IsError {
			t.Errorf("%s %s: MCP %q (error %v), direct %q (error %v)", c.name, c.args, text(res), res.IsError, direct.Text, direct.IsError)
		}
		if c.name == "Exec" || c.name == "shell_exec" {
			b, _ := json.Marshal(res.StructuredContent)
			if !json.Valid(b) || string(b) == "null" || !strings.Contains(direct.Text, strings.Trim(string(b), "{}")[:10]) {
				t.Errorf("%s: structured %s", c.name, b)
			}
		}
	}
}

// TestAcceptance9_EndToEndAudit is seed 003's criterion 9: a call through
// the server, with the dispatched audit event present.
func TestAcceptance9_EndToEndAudit(t *testing.T) {
	h, mem := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	cs := connect(t, s, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "Exec", Arguments: map[string]any{"argv": []string{"/usr/bin/id", "-u"}}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	var dispatched *audit.Event
	for _, e := range mem.Events() {
		if e.Type == audit.Dispatched && e.Tool == "Exec" {
			dispatched = &e
		}
	}
	if dispatched == nil || strings.Join(dispatched.Argv, " ") != "/usr/bin/id -u" || !strings.HasPrefix(dispatched.Conversation, "mcp-") {
		t.Errorf("dispatched event %+v in %+v", dispatched, mem.Events())
	}
}

func TestProgress(t *testing.T) {
	h, _ := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	cs := connect(t, s, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		got = append(got, r.Params)
		mu.Unlock()
	}})
	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "for i in $(seq 1 12); do echo line$i; sleep 0.1; done"}}
	params.SetProgressToken("p1")
	start := time.Now()
	if _, err := cs.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	n := len(got)
	notes := append([]*mcp.ProgressNotificationParams(nil), got...)
	mu.Unlock()
	if n < 2 || float64(n) > elapsed.Seconds()*4+1 {
		t.Errorf("%d notifications in %v", n, elapsed)
	}
	for i, p := range notes {
		if p.ProgressToken != "p1" || !strings.Contains(p.Message, "bytes of output") || (i > 0 && p.Progress <= notes[i-1].Progress) {
			t.Errorf("notification %d: %+v", i, p)
		}
	}
	if n > 0 && !strings.Contains(notes[n-1].Message, "line") {
		t.Errorf("no output lines in %q", notes[n-1].Message)
	}
	mu.Lock()
	got = nil
	mu.Unlock()
	cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 0.6; echo x"}})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 0 {
		t.Errorf("%d notifications without a token", len(got))
	}
}

func TestCancel(t *testing.T) {
	token := proctest.Token(t)
	h, _ := newHost(t, token)
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	cs := connect(t, s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 600 & sleep 600"}})
	if err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("cancelled call: %v after %v", err, time.Since(start))
	}
	proctest.NoSurvivors(t, token)
}

// TestClientGoneCancels: a client whose connection goes away (as a host
// process that dies closes the pipes) gets its commands ended.
func TestClientGoneCancels(t *testing.T) {
	token := proctest.Token(t)
	h, _ := newHost(t, token)
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	toServerR, toServerW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- s.ServeIO(context.Background(), toServerR, toClientW) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.IOTransport{Reader: toClientR, Writer: toServerW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	called := make(chan struct{})
	go func() {
		cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 600"}})
		close(called)
	}()
	for deadline := time.Now().Add(5 * time.Second); len(proctest.Survivors(token)) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	toServerW.Close() // the client is gone
	toClientR.Close()
	proctest.NoSurvivors(t, token)
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	<-called
}

// approvals: the rule ask-touch asks; the client answers.
func TestApprovals(t *testing.T) {
	h, mem := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	marker := filepath.Join(h.Workspace, "touched")
	args := map[string]any{"command": "touch " + marker}
	answer := "accept"
	var asked []string
	cs := connect(t, s, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = append(asked, r.Params.Message)
		return &mcp.ElicitResult{Action: answer}, nil
	}})

	answer = "decline"
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: args})
	if err != nil || !res.IsError || !strings.Contains(text(res), "the user declined this command") {
		t.Errorf("decline: %v %q", err, text(res))
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a declined command ran")
	}
	answer = "cancel"
	res, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: args})
	if !strings.Contains(text(res), "dismissed") {
		t.Errorf("cancel: %q", text(res))
	}
	answer = "accept"
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("accept: %v %q", err, text(res))
	}
	if _, err := os.Stat(marker); err != nil {
		t.Error("an approved command did not run")
	}
	if len(asked) != 3 || !strings.Contains(asked[0], "touch "+marker) || !strings.Contains(asked[0], `"ask-touch"`) {
		t.Errorf("questions %q", asked)
	}
	found := false
	for _, e := range mem.Events() {
		if e.Type == audit.Dispatched && e.Decision == "approved" {
			found = true
		}
	}
	if !found {
		t.Error("no approved dispatch in the audit log")
	}

	// A forged or tampered state is refused, and nothing runs.
	os.Remove(marker)
	for _, state := range []string{"forged", s.sign(approvalState{Session: "other", Tool: "bash", Args: argsHash(mustMarshal(args)), Rule: "ask-touch", Expires: time.Now().Add(time.Hour).Unix()}) + "x"} {
		res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: args, RequestState: state,
			InputResponses: mcp.InputResponseMap{inputID: &mcp.ElicitResult{Action: "accept"}}})
		if err != nil || !res.IsError || !strings.Contains(text(res), "not issued by this agentexec server") {
			t.Errorf("forged %q: %v %q", state[:6], err, text(res))
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a forged approval ran the command")
	}
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestNoElicitation(t *testing.T) {
	h, _ := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	defer s.Shutdown(context.Background())
	cs := connect(t, s, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "touch x"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "does not support elicitation") || !strings.Contains(text(res), "agentexec configuration") {
		t.Errorf("%v %q", err, text(res))
	}
}

func TestSessionLimit(t *testing.T) {
	token := proctest.Token(t)
	h, _ := newHost(t, token)
	s := New(h, Options{MaxCalls: 2})
	defer s.Shutdown(context.Background())
	cs := connect(t, s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 600"}})
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); len(proctest.Survivors(token)) < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "too many calls are running in this session (the limit is 2, server.max_calls_per_session)") {
		t.Errorf("%v %q", err, text(res))
	}
	cancel()
	wg.Wait()
	proctest.NoSurvivors(t, token)
}

// TestShutdownStopsJobs: background jobs belong to the server.
func TestShutdownStopsJobs(t *testing.T) {
	h, _ := newHost(t, proctest.Token(t))
	s := New(h, Options{})
	cs := connect(t, s, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo up; sleep 600", "mode": "background"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %q", err, text(res))
	}
	file := strings.TrimSuffix(strings.SplitN(text(res), "<output_file>", 2)[1], "")
	file = strings.SplitN(file, "</output_file>", 2)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Shutdown(ctx)
	b, _ := os.ReadFile(file)
	if !strings.Contains(string(b), "[background process failed: stopped because agentexec shut down]") {
		t.Errorf("output file %q", b)
	}
}

// dropDuration removes Exec's duration_s, which differs between two runs.
func dropDuration(s string) string {
	if i := strings.Index(s, `"duration_s":`); i >= 0 {
		if j := strings.IndexByte(s[i:], ','); j > 0 {
			return s[:i] + s[i+j+1:]
		}
	}
	return s
}
