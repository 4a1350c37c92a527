// Package observe is agentexec's observability: Prometheus metrics and
// OpenTelemetry traces of tool calls. It is the only package that imports
// github.com/prometheus/client_golang and go.opentelemetry.io/otel; the
// engine knows it only through the narrow tool.Observer interface, so a
// library user who sets no Observer links none of it and pays nothing.
//
// An Observer built by New implements tool.Observer: set it as a
// registry's Observer (the MCP server then also opens a span per request).
// Metrics are served by ServeMetrics on a listener of their own; traces go
// to an OTLP/HTTP collector configured by the standard OTEL_* variables.
//
// No metric label carries a command, a path, an id or a URL: labels are
// tool names (of the registry; any other name is "unknown"), fixed
// outcome and result words, policy rule names from the configuration, and
// sandbox layer names. Span attributes carry a command's text only with
// Options.RecordCommands.
package observe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Options configure an Observer. The zero value observes nothing.
type Options struct {
	// Metrics keeps Prometheus metrics (served by ServeMetrics).
	Metrics bool
	// Traces exports spans: to Exporter when set, else over OTLP/HTTP to
	// the collector the OTEL_EXPORTER_OTLP_* variables name.
	Traces bool
	// Exporter receives spans instead of an OTLP collector (tests, or a
	// program with an exporter of its own). Spans are then exported
	// synchronously as they end.
	Exporter sdktrace.SpanExporter
	// RecordCommands puts each command's text (or argv) on its process
	// span. Off by default: commands can carry secrets.
	RecordCommands bool
	// Version is agentexec's version, for build_info and the trace
	// resource.
	Version string
	// Tools are the registry's tool names; a name outside them is
	// labelled "unknown" (a client can send any name).
	Tools []string
	// Jobs and Sessions count the live background jobs and interactive
	// sessions, read at each scrape; nil reads 0.
	Jobs, Sessions func() int
	// Layers are the sandbox layers and whether this system has them.
	Layers map[string]bool
}

// Observer records metrics and traces of tool calls. Build it with New,
// set it as the registry's Observer, and Shutdown it when the server ends
// (it flushes the spans not yet exported).
type Observer struct {
	o     Options
	tools map[string]bool
	m     *metrics // nil without Options.Metrics
	tr    *tracing // nil without Options.Traces
}

var _ tool.Observer = (*Observer)(nil)

// New builds an Observer. With Options.Traces and no Exporter it sets up
// the OTLP/HTTP exporter from the environment (which does not connect
// yet: spans are sent in batches, in the background).
func New(ctx context.Context, o Options) (*Observer, error) {
	ob := &Observer{o: o, tools: map[string]bool{}}
	for _, t := range o.Tools {
		ob.tools[t] = true
	}
	if o.Metrics {
		ob.m = newMetrics(o)
	}
	if o.Traces {
		tr, err := newTracing(ctx, o)
		if err != nil {
			return nil, err
		}
		ob.tr = tr
	}
	return ob, nil
}

// TracesWanted reports whether traces are to be exported: forced (the
// --otel flag or the configuration), or an OTLP endpoint set in the
// environment (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); never when OTEL_SDK_DISABLED is
// true, the standard switch that turns OpenTelemetry off.
func TracesWanted(forced bool, getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return forced || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// toolLabel is name when the registry has it, else "unknown".
func (ob *Observer) toolLabel(name string) string {
	if ob.tools[name] {
		return name
	}
	return "unknown"
}

// StartRequest opens the SERVER span of one MCP request (see tracing.go).
func (ob *Observer) StartRequest(ctx context.Context, r tool.RequestInfo) (context.Context, func(tool.RequestEnd)) {
	if ob.tr == nil {
		return ctx, func(tool.RequestEnd) {}
	}
	if r.Tool != "" {
		r.Tool = ob.toolLabel(r.Tool)
	}
	return ob.tr.startRequest(ctx, r)
}

// Decided counts a policy decision and notes it on the request's span.
func (ob *Observer) Decided(ctx context.Context, name string, d policy.Decision) {
	if ob.m != nil {
		ob.m.decision(d)
	}
	if ob.tr != nil {
		ob.tr.decided(ctx, d)
	}
}

// Approval counts an approval's result and notes it on the request's span.
func (ob *Observer) Approval(ctx context.Context, name, result string) {
	if ob.m != nil {
		ob.m.approvals.WithLabelValues(result).Inc()
	}
	if ob.tr != nil {
		ob.tr.approval(ctx, result)
	}
}

// StartRun counts a running process and opens its span.
func (ob *Observer) StartRun(ctx context.Context, name string, req policy.Request) (context.Context, func(*tool.Result)) {
	var endSpan func(*tool.Result)
	if ob.tr != nil {
		ctx, endSpan = ob.tr.startRun(ctx, ob.toolLabel(name), req, ob.o.RecordCommands)
	}
	if ob.m != nil {
		ob.m.running.Inc()
	}
	return ctx, func(res *tool.Result) {
		if ob.m != nil {
			ob.m.running.Dec()
		}
		if endSpan != nil {
			endSpan(res)
		}
	}
}

// Ended counts a call by tool and outcome, with its duration, and its
// output's truncation.
func (ob *Observer) Ended(ctx context.Context, name string, res *tool.Result, elapsed time.Duration) {
	if ob.m == nil {
		return
	}
	ob.m.ended(ob.toolLabel(name), res, elapsed)
}

// TraceID returns the trace id of ctx's span, or "".
func (ob *Observer) TraceID(ctx context.Context) string {
	if ob.tr == nil {
		return ""
	}
	return traceID(ctx)
}

// MetricsHandler serves the metrics in the Prometheus text format; nil
// without Options.Metrics.
func (ob *Observer) MetricsHandler() http.Handler {
	if ob.m == nil {
		return nil
	}
	return ob.m.handler()
}

// ServeMetrics serves GET /metrics on ln until ctx is done, then closes
// it.
func (ob *Observer) ServeMetrics(ctx context.Context, ln net.Listener) error {
	if ob.m == nil {
		ln.Close()
		return errors.New("observe: metrics are off (Options.Metrics)")
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", ob.m.handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("observe: metrics listener: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	<-errc
	return nil
}

// Shutdown exports the spans not yet sent (within ctx) and stops the
// exporter. Metrics stay readable.
func (ob *Observer) Shutdown(ctx context.Context) error {
	if ob.tr == nil {
		return nil
	}
	return ob.tr.shutdown(ctx)
}
