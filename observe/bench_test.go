//go:build linux

package observe_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/observe"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// discardExporter drops spans (the cost measured is ours and the SDK's,
// not a collector's).
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkBashTrueOverHTTP: a bash call of `true` over streamable HTTP,
// with metrics and traces off (the baseline) and on (every metric kept,
// every span recorded and exported). The target: on at most 5% slower.
func BenchmarkBashTrueOverHTTP(b *testing.B) {
	for _, c := range []struct {
		name string
		on   bool
	}{{"off", false}, {"on", true}} {
		b.Run(c.name, func(b *testing.B) {
			f := setup(b, proctest.Token(b), c.on, c.on, func(o *observe.Options) { o.Exporter = discardExporter{} })
			args := map[string]any{"command": "true"}
			meta := map[string]any{"traceparent": traceparent}
			f.mustCall(b, "bash", args)
			b.ResetTimer()
			for b.Loop() {
				r, err := f.call(context.Background(), b, "bash", args, meta)
				if err != nil || r.Result == nil || r.Result.IsError {
					b.Fatalf("%v %v", r, err)
				}
			}
		})
	}
}

// BenchmarkBashTrueOverHTTPInterleaved is the same comparison with the two
// servers called in turn (the order alternating), so that the load of a
// shared machine falls on both alike. It reports each side's time per
// call and their ratio, on/off: the total, and the median of the pairs.
func BenchmarkBashTrueOverHTTPInterleaved(b *testing.B) {
	off := setup(b, proctest.Token(b), false, false)
	on := setup(b, proctest.Token(b), true, true, func(o *observe.Options) { o.Exporter = discardExporter{} })
	args := map[string]any{"command": "true"}
	meta := map[string]any{"traceparent": traceparent}
	timed := func(f *fixture) time.Duration {
		start := time.Now()
		r, err := f.call(context.Background(), b, "bash", args, meta)
		if err != nil || r.Result == nil || r.Result.IsError {
			b.Fatalf("%v %v", r, err)
		}
		return time.Since(start)
	}
	timed(off)
	timed(on)
	var sumOn, sumOff time.Duration
	var ratios []float64
	i := 0
	for b.Loop() {
		var dOn, dOff time.Duration
		if i%2 == 0 {
			dOff, dOn = timed(off), timed(on)
		} else {
			dOn, dOff = timed(on), timed(off)
		}
		i++
		sumOn += dOn
		sumOff += dOff
		ratios = append(ratios, float64(dOn)/float64(dOff))
	}
	sort.Float64s(ratios)
	b.ReportMetric(float64(sumOff.Nanoseconds())/float64(i), "off-ns/call")
	b.ReportMetric(float64(sumOn.Nanoseconds())/float64(i), "on-ns/call")
	b.ReportMetric(float64(sumOn)/float64(sumOff), "on/off")
	b.ReportMetric(ratios[len(ratios)/2], "on/off-median")
}

// BenchmarkHooks is the observer's own cost per call, without the
// process: one request span, a policy decision, a process span and the
// call's metrics, against the same calls with no observer (the baseline:
// a nil check per hook).
func BenchmarkHooks(b *testing.B) {
	ob, err := observe.New(context.Background(), observe.Options{Metrics: true, Traces: true, Exporter: discardExporter{}, Tools: []string{"bash"}})
	if err != nil {
		b.Fatal(err)
	}
	defer ob.Shutdown(context.Background())
	res := &tool.Result{Text: "ok", Run: &tool.RunInfo{Pid: 1, Outcome: "exited", Sandbox: "off"}}
	req := policy.Request{Tool: "bash", Command: "true"}
	info := tool.RequestInfo{Method: "tools/call", Tool: "bash", ID: "1", Meta: map[string]any{"traceparent": traceparent}, Transport: "tcp"}
	for _, c := range []struct {
		name string
		obs  tool.Observer
	}{{"none", nil}, {"metrics+traces", ob}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				if c.obs == nil {
					continue
				}
				rctx, end := c.obs.StartRequest(ctx, info)
				c.obs.Decided(rctx, "bash", policy.Decision{})
				pctx, ran := c.obs.StartRun(rctx, "bash", req)
				ran(res)
				c.obs.Ended(pctx, "bash", res, time.Millisecond)
				_ = c.obs.TraceID(rctx)
				end(tool.RequestEnd{})
			}
		})
	}
}
