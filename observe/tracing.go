package observe

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Names of the attributes agentexec puts on spans beyond the semantic
// conventions' own.
const (
	AttrOutcome   = "agentexec.outcome"
	AttrSignal    = "agentexec.process.signal"
	AttrTimedOut  = "agentexec.process.timed_out"
	AttrTruncated = "agentexec.output.truncated"
	AttrSandbox   = "agentexec.sandbox.profile"
	AttrJobID     = "agentexec.job.id"
)

// tracing holds the tracer provider and the W3C propagator that reads a
// client's traceparent and tracestate from params._meta.
type tracing struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// newTracing builds the provider: spans go to o.Exporter synchronously, or
// in batches to the OTLP/HTTP exporter, which reads its endpoint, headers,
// timeout, compression and TLS settings from the standard OTEL_EXPORTER_OTLP_*
// variables. The sampler follows OTEL_TRACES_SAMPLER (default: parent-based,
// always on), the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func newTracing(ctx context.Context, o Options) (*tracing, error) {
	version := o.Version
	if version == "" {
		version = "dev"
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "agentexec"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("observe: trace resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if o.Exporter != nil {
		opts = append(opts, sdktrace.WithSyncer(o.Exporter))
	} else {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("observe: OTLP exporter: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return &tracing{tp: tp, tracer: tp.Tracer("github.com/agentexec/agentexec"), prop: propagation.TraceContext{}}, nil
}

func (t *tracing) shutdown(ctx context.Context) error { return t.tp.Shutdown(ctx) }

// metaCarrier reads the W3C keys of a request's params._meta.
type metaCarrier map[string]any

func (c metaCarrier) Get(key string) string {
	if v, ok := c[key].(string); ok {
		return v
	}
	return ""
}
func (c metaCarrier) Set(string, string) {}
func (c metaCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// startRequest opens a SERVER span following the OpenTelemetry semantic
// conventions for MCP: named "{mcp.method.name} {gen_ai.tool.name}", its
// parent the context in params._meta when the client sent one.
func (t *tracing) startRequest(ctx context.Context, r tool.RequestInfo) (context.Context, func(tool.RequestEnd)) {
	if len(r.Meta) > 0 {
		ctx = t.prop.Extract(ctx, metaCarrier(r.Meta))
	}
	name := r.Method
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, attribute.String("mcp.method.name", r.Method))
	if r.Tool != "" {
		name += " " + r.Tool
		attrs = append(attrs, attribute.String("gen_ai.tool.name", r.Tool))
	}
	if r.Method == "tools/call" {
		attrs = append(attrs, attribute.String("gen_ai.operation.name", "execute_tool"))
	}
	if r.ID != "" {
		attrs = append(attrs, attribute.String("jsonrpc.request.id", r.ID))
	}
	if r.ProtocolVersion != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", r.ProtocolVersion))
	}
	if r.Session != "" {
		attrs = append(attrs, attribute.String("mcp.session.id", r.Session))
	}
	switch r.Transport {
	case "tcp", "unix":
		attrs = append(attrs, attribute.String("network.transport", r.Transport), attribute.String("network.protocol.name", "http"))
	case "pipe":
		attrs = append(attrs, attribute.String("network.transport", "pipe"))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx, func(e tool.RequestEnd) {
		if e.ErrorType != "" {
			span.SetAttributes(attribute.String("error.type", e.ErrorType))
			if _, err := strconv.Atoi(e.ErrorType); err == nil {
				span.SetAttributes(attribute.String("rpc.response.status_code", e.ErrorType))
			}
			span.SetStatus(codes.Error, e.Message)
		}
		span.End()
	}
}

// decided notes the policy's decision on the current span.
func (t *tracing) decided(ctx context.Context, d policy.Decision) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	rule := d.Rule
	if rule == "" {
		rule = "default"
	}
	span.AddEvent("policy.decision", trace.WithAttributes(attribute.String("agentexec.policy.decision", d.Verdict.String()), attribute.String("agentexec.policy.rule", rule)))
}

// approval notes an approval's result on the current span.
func (t *tracing) approval(ctx context.Context, result string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("approval", trace.WithAttributes(attribute.String("agentexec.approval.result", result)))
}

// startRun opens the span of one process: "process TOOL", a child of the
// request's span, with how the process ended. The command's text is an
// attribute only when record is set.
func (t *tracing) startRun(ctx context.Context, toolName string, req policy.Request, record bool) (context.Context, func(*tool.Result)) {
	attrs := []attribute.KeyValue{attribute.String("gen_ai.tool.name", toolName)}
	if record {
		switch {
		case req.Command != "":
			attrs = append(attrs, attribute.String("process.command_line", req.Command))
		case req.Executable != "":
			attrs = append(attrs, attribute.StringSlice("process.command_args", append([]string{req.Executable}, req.Args...)))
		}
	}
	ctx, span := t.tracer.Start(ctx, "process "+toolName, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx, func(res *tool.Result) {
		outcome := tool.Outcome(res)
		end := make([]attribute.KeyValue, 0, 9)
		end = append(end, attribute.String(AttrOutcome, outcome))
		if ri := res.Run; ri != nil {
			end = append(end,
				attribute.Int("process.pid", ri.Pid),
				attribute.Bool(AttrTimedOut, ri.Outcome == "timed out"),
				attribute.Bool(AttrTruncated, ri.Truncated),
			)
			if ri.Outcome == "exited" || ri.Outcome == "signaled" || ri.Outcome == "timed out" || ri.Outcome == "cancelled" {
				end = append(end, attribute.Int("process.exit.code", ri.ExitCode))
			}
			if ri.Signal != 0 {
				end = append(end, attribute.Int(AttrSignal, ri.Signal))
			}
			if ri.Sandbox != "" {
				end = append(end, attribute.String(AttrSandbox, ri.Sandbox))
			}
			if ri.JobID != "" {
				end = append(end, attribute.String(AttrJobID, ri.JobID))
			}
		}
		switch outcome {
		case tool.OutcomeExited, tool.OutcomeFailed:
			// A non-zero exit is the command's result, not an error of
			// the call.
		default:
			kind := string(res.Kind)
			if kind == "" {
				kind = outcome
			}
			end = append(end, attribute.String("error.type", kind))
			span.SetStatus(codes.Error, outcome)
		}
		span.SetAttributes(end...)
		span.End()
	}
}

// traceID returns the trace id of ctx's span, or "".
func traceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return strings.ToLower(sc.TraceID().String())
}
