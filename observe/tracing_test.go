//go:build linux

package observe_test

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/observe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const (
	parentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentSpan  = "00f067aa0ba902b7"
	traceparent = "00-" + parentTrace + "-" + parentSpan + "-01"
	tracestate  = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
)

// attrs maps a span's attributes by key.
func attrs(s tracetest.SpanStub) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// spansOf returns the ended spans of one trace by name.
func spansOf(f *fixture, traceID string) map[string]tracetest.SpanStub {
	out := map[string]tracetest.SpanStub{}
	for _, s := range f.exp.GetSpans() {
		if s.SpanContext.TraceID().String() == traceID {
			out[s.Name] = s
		}
	}
	return out
}

// TestSpansOfACall: a tools/call carrying traceparent and tracestate in
// params._meta gets a SERVER span named "tools/call bash", a child of the
// client's span, with the attributes of the MCP semantic conventions, and
// a child span for its process; the audit events carry the trace id; the
// command's text is on no span.
func TestSpansOfACall(t *testing.T) {
	token := proctest.Token(t)
	t.Cleanup(func() { proctest.NoSurvivors(t, token) })
	f := setup(t, token, false, true)
	r, err := f.call(t.Context(), t, "bash", map[string]any{"command": "echo secret-ish-text"}, map[string]any{"traceparent": traceparent, "tracestate": tracestate})
	if err != nil || r.text() != "secret-ish-text\n" {
		t.Fatalf("%v %v", r, err)
	}
	spans := spansOf(f, parentTrace)
	srv, ok := spans["tools/call bash"]
	if !ok {
		t.Fatalf("no span tools/call bash in the client's trace: %v", f.exp.GetSpans())
	}
	if srv.SpanKind != trace.SpanKindServer || srv.Parent.SpanID().String() != parentSpan || !srv.Parent.IsRemote() {
		t.Errorf("kind %v, parent %v (remote %v)", srv.SpanKind, srv.Parent.SpanID(), srv.Parent.IsRemote())
	}
	if got := srv.SpanContext.TraceState().String(); got != tracestate {
		t.Errorf("tracestate %q", got)
	}
	a := attrs(srv)
	want := map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "bash", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "1", "network.transport": "tcp", "mcp.protocol.version": "2026-07-28",
	}
	for k, v := range want {
		if a[k].AsString() != v {
			t.Errorf("%s = %q, want %q", k, a[k].AsString(), v)
		}
	}
	if _, ok := a["error.type"]; ok || srv.Status.Code == codes.Error {
		t.Errorf("a successful call has error.type %v, status %v", a["error.type"], srv.Status)
	}
	proc, ok := spans["process bash"]
	if !ok {
		t.Fatalf("no process span: %v", spans)
	}
	if proc.Parent.SpanID() != srv.SpanContext.SpanID() {
		t.Errorf("the process span's parent is %v, not the request's span %v", proc.Parent.SpanID(), srv.SpanContext.SpanID())
	}
	pa := attrs(proc)
	if pa["process.exit.code"].AsInt64() != 0 || pa[observe.AttrTimedOut].Type() != attribute.BOOL || pa[observe.AttrTimedOut].AsBool() ||
		pa[observe.AttrTruncated].Type() != attribute.BOOL || pa[observe.AttrSandbox].AsString() == "" || pa["process.pid"].AsInt64() <= 0 {
		t.Errorf("process span attributes: %v", proc.Attributes)
	}
	for _, s := range f.exp.GetSpans() {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.Emit(), "secret-ish-text") {
				t.Errorf("span %s records the command in %s without --otel-record-commands", s.Name, kv.Key)
			}
		}
	}
	var traced int
	for _, e := range f.mem.Events() {
		if e.Type == audit.Dispatched || e.Type == audit.Finished {
			if e.TraceID != parentTrace {
				t.Errorf("audit %s has trace id %q", e.Type, e.TraceID)
			}
			traced++
		}
	}
	if traced != 2 {
		t.Errorf("%d audit events", traced)
	}
}

// TestSpanOutcomes: a failing command marks the request's span with
// error.type tool_error (the semantic conventions' word for isError) but
// not its process span; a timeout, a signal and a refusal are recorded on
// the spans; a call without traceparent starts a trace of its own; a tool
// name the server does not have is not put in a span name.
func TestSpanOutcomes(t *testing.T) {
	token := proctest.Token(t)
	t.Cleanup(func() { proctest.NoSurvivors(t, token) })
	f := setup(t, token, false, true)
	traceOf := func(i int) string {
		return strings.Repeat("0", 31) + string(rune('1'+i))
	}
	cases := []struct {
		tool      string
		args      map[string]any
		errorType string // of the request span
		process   map[string]any
		noProcess bool
	}{
		{tool: "bash", args: map[string]any{"command": "exit 3"}, errorType: "tool_error", process: map[string]any{"process.exit.code": int64(3), observe.AttrOutcome: "failed"}},
		{tool: "shell_exec", args: map[string]any{"executable": "sleep", "argv": []string{"30"}, "timeout_ms": 200}, errorType: "tool_error",
			process: map[string]any{observe.AttrTimedOut: true, observe.AttrOutcome: "timeout", "error.type": "timeout"}},
		{tool: "bash", args: map[string]any{"command": "kill -KILL $$"}, errorType: "tool_error", process: map[string]any{observe.AttrSignal: int64(9), observe.AttrOutcome: "signaled"}},
		{tool: "bash", args: map[string]any{"command": "shutdown -h now"}, errorType: "tool_error", noProcess: true},
		{tool: "bash", args: map[string]any{"command": "head -c 300000 /dev/zero"}, process: map[string]any{observe.AttrTruncated: true, observe.AttrOutcome: "exited"}},
	}
	for i, c := range cases {
		tp := "00-" + traceOf(i) + "-" + parentSpan + "-01"
		if _, err := f.call(t.Context(), t, c.tool, c.args, map[string]any{"traceparent": tp}); err != nil {
			t.Fatal(err)
		}
		spans := spansOf(f, traceOf(i))
		srv, ok := spans["tools/call "+c.tool]
		if !ok {
			t.Errorf("%v: no request span in %v", c.args, spans)
			continue
		}
		if got := attrs(srv)["error.type"].AsString(); got != c.errorType {
			t.Errorf("%v: error.type %q, want %q", c.args, got, c.errorType)
		}
		if (c.errorType != "") != (srv.Status.Code == codes.Error) {
			t.Errorf("%v: status %v", c.args, srv.Status)
		}
		proc, ok := spans["process "+c.tool]
		if ok == c.noProcess {
			t.Errorf("%v: process span %v, want none: %v", c.args, ok, c.noProcess)
			continue
		}
		pa := attrs(proc)
		for k, v := range c.process {
			if got := pa[k].AsInterface(); got != v {
				t.Errorf("%v: process %s = %v, want %v", c.args, k, got, v)
			}
		}
	}

	// No traceparent: a new trace, the request span its root.
	before := len(f.exp.GetSpans())
	f.mustCall(t, "bash", map[string]any{"command": "true"})
	for _, s := range f.exp.GetSpans()[before:] {
		if s.Name == "tools/call bash" && (s.Parent.IsValid() || !s.SpanContext.IsValid()) {
			t.Errorf("a call without traceparent has parent %v", s.Parent)
		}
	}

	// An unknown tool: the name a client made up is not a span name.
	before = len(f.exp.GetSpans())
	f.call(t.Context(), t, "no-such-tool-7f3a", map[string]any{}, nil)
	found := false
	for _, s := range f.exp.GetSpans()[before:] {
		if strings.Contains(s.Name, "7f3a") {
			t.Errorf("span named %q", s.Name)
		}
		if s.Name == "tools/call unknown" {
			found = true
			if attrs(s)["error.type"].AsString() == "" {
				t.Errorf("the unknown tool's span has no error.type: %v", s.Attributes)
			}
			t.Logf("unknown tool: %v %v", s.Attributes, s.Status)
		}
	}
	if !found {
		t.Error("no span tools/call unknown")
	}
}

// TestRecordCommands: with RecordCommands the process span carries the
// command's text.
func TestRecordCommands(t *testing.T) {
	token := proctest.Token(t)
	f := setup(t, token, false, true, func(o *observe.Options) { o.RecordCommands = true })
	f.mustCall(t, "bash", map[string]any{"command": "echo recorded"})
	f.mustCall(t, "shell_exec", map[string]any{"executable": "true", "argv": []string{"a", "b"}})
	var line string
	var args []string
	for _, s := range f.exp.GetSpans() {
		a := attrs(s)
		if v, ok := a["process.command_line"]; ok {
			line = v.AsString()
		}
		if v, ok := a["process.command_args"]; ok {
			args = v.AsStringSlice()
		}
	}
	if line != "echo recorded" || strings.Join(args, " ") != "true a b" {
		t.Errorf("command_line %q, command_args %q", line, args)
	}
}

// TestStdioSpan: over stdio the request span has the JSON-RPC id (a
// string id here) and network.transport pipe, and its parent from _meta.
func TestStdioSpan(t *testing.T) {
	token := proctest.Token(t)
	f := setup(t, token, false, true)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- f.s.ServeIO(t.Context(), inR, outW) }()
	lines := bufio.NewScanner(outR)
	send := func(msg string) {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		if !lines.Scan() {
			t.Fatalf("no answer: %v", lines.Err())
		}
		return lines.Text()
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	read()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":"req-7","method":"tools/call","params":{"name":"bash","arguments":{"command":"echo piped"},"_meta":{"traceparent":"` + traceparent + `","io.agentexec/jsonrpc-id":"forged"}}}`)
	if answer := read(); !strings.Contains(answer, "piped") || !strings.Contains(answer, `"req-7"`) {
		t.Fatalf("answer %s", answer)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	outR.Close()
	srv, ok := spansOf(f, parentTrace)["tools/call bash"]
	if !ok {
		t.Fatalf("no span: %v", f.exp.GetSpans())
	}
	a := attrs(srv)
	if a["jsonrpc.request.id"].AsString() != "req-7" || a["network.transport"].AsString() != "pipe" || srv.Parent.SpanID().String() != parentSpan {
		t.Errorf("stdio span: %v, parent %v", srv.Attributes, srv.Parent.SpanID())
	}
}
