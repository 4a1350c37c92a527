//go:build linux

package observe_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads /metrics with the Prometheus text parser.
func (f *fixture) scrape(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := f.client.Get(f.metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: HTTP %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// value is the value of the series of family name with exactly the given
// labels (a counter, gauge or untyped value; a histogram's count), or -1
// when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	fam := fams[name]
	if fam == nil {
		return -1
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range fam.Metric {
		if len(m.Label) != len(want) {
			continue
		}
		for _, l := range m.Label {
			if want[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			return m.Untyped.GetValue()
		}
	}
	return -1
}

// waitFor scrapes until cond holds (a readiness signal: the server's own
// count), failing after a generous deadline.
func (f *fixture) waitFor(t testing.TB, what string, cond func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		fams := f.scrape(t)
		if cond(fams) {
			return fams
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// TestEveryMetricFromRealCalls: each metric the issue names moves with a
// real call over HTTP, scraped from the metrics listener and parsed with
// the Prometheus text parser.
func TestEveryMetricFromRealCalls(t *testing.T) {
	token := proctest.Token(t)
	t.Cleanup(func() { proctest.NoSurvivors(t, token) }) // after the server's shutdown
	f := setup(t, token, true, false)

	fams := f.scrape(t)
	if v := value(fams, "agentexec_build_info", "version", "9.9.9-test", "goversion", runtimeVersion()); v != 1 {
		t.Errorf("build_info: %v", v)
	}
	if fams["agentexec_sandbox_layer_available"] == nil || len(fams["agentexec_sandbox_layer_available"].Metric) < 3 {
		t.Errorf("sandbox layers: %v", fams["agentexec_sandbox_layer_available"])
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "process_cpu_seconds_total", "process_open_fds"} {
		if fams[name] == nil {
			t.Errorf("%s is missing (Go and process collectors)", name)
		}
	}
	for _, name := range []string{"agentexec_processes_running", "agentexec_jobs_live", "agentexec_sessions_live"} {
		if v := value(fams, name); v != 0 {
			t.Errorf("%s at start: %v", name, v)
		}
	}

	// One call per outcome.
	calls := []struct {
		tool    string
		args    map[string]any
		outcome string
	}{
		{"bash", map[string]any{"command": "true"}, "exited"},
		{"bash", map[string]any{"command": "exit 3"}, "failed"},
		{"bash", map[string]any{"command": "kill -KILL $$"}, "signaled"},
		{"shell_exec", map[string]any{"executable": "sleep", "argv": []string{"30"}, "timeout_ms": 300}, "timeout"},
		{"bash", map[string]any{"command": "shutdown -h now"}, "denied"},
		{"bash", map[string]any{"command": "   "}, "error"},
	}
	for _, c := range calls {
		f.mustCall(t, c.tool, c.args)
	}
	// Cancelled: the client gives up a running call (its HTTP request).
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.call(ctx, t, "bash", map[string]any{"command": "sleep 600"}, nil)
		done <- err
	}()
	f.waitFor(t, "the call to run", func(m map[string]*dto.MetricFamily) bool { return value(m, "agentexec_processes_running") == 1 })
	cancel()
	<-done
	fams = f.waitFor(t, "the cancelled call to be counted", func(m map[string]*dto.MetricFamily) bool {
		return value(m, "agentexec_commands_total", "tool", "bash", "outcome", "cancelled") == 1
	})
	if v := value(fams, "agentexec_processes_running"); v != 0 {
		t.Errorf("processes_running after the calls: %v", v)
	}
	for _, c := range calls {
		if v := value(fams, "agentexec_commands_total", "tool", c.tool, "outcome", c.outcome); v != 1 {
			t.Errorf("commands_total{%s,%s} = %v", c.tool, c.outcome, v)
		}
		if v := value(fams, "agentexec_command_duration_seconds", "tool", c.tool, "outcome", c.outcome); v != 1 {
			t.Errorf("command_duration_seconds{%s,%s} count = %v", c.tool, c.outcome, v)
		}
	}
	if v := value(fams, "agentexec_policy_decisions_total", "decision", "deny", "rule", "no-shutdown"); v != 1 {
		t.Errorf("policy_decisions_total{deny,no-shutdown} = %v", v)
	}

	// An approval: the 2026-07-28 client is asked (the answer comes with
	// a retry), so the result is pending.
	r := f.mustCall(t, "bash", map[string]any{"command": "touch x"})
	fams = f.scrape(t)
	if v := value(fams, "agentexec_approvals_total", "result", "pending"); v != 1 {
		t.Errorf("approvals_total{pending} = %v (answer %q)", v, r.text())
	}
	if v := value(fams, "agentexec_policy_decisions_total", "decision", "ask", "rule", "ask-touch"); v != 1 {
		t.Errorf("policy_decisions_total{ask,ask-touch} = %v", v)
	}

	// Truncated output.
	f.mustCall(t, "bash", map[string]any{"command": "head -c 300000 /dev/zero | tr '\\0' a"})
	if v := value(f.scrape(t), "agentexec_output_truncated_total", "tool", "bash"); v != 1 {
		t.Errorf("output_truncated_total{bash} = %v", v)
	}

	// A background job and an interactive session are live until killed.
	f.mustCall(t, "bash", map[string]any{"command": "exec sleep 600", "mode": "background"})
	f.mustCall(t, "exec_command", map[string]any{"cmd": "exec sleep 600", "yield_time_ms": 100})
	fams = f.scrape(t)
	if v := value(fams, "agentexec_jobs_live"); v != 1 {
		t.Errorf("jobs_live = %v", v)
	}
	if v := value(fams, "agentexec_sessions_live"); v != 1 {
		t.Errorf("sessions_live = %v", v)
	}

	// No label carries a command, a path, an id or a URL.
	allowed := map[string]bool{"tool": true, "outcome": true, "decision": true, "rule": true, "result": true, "layer": true, "version": true, "goversion": true}
	for name, fam := range f.scrape(t) {
		if !strings.HasPrefix(name, "agentexec_") {
			continue
		}
		for _, m := range fam.Metric {
			for _, l := range m.Label {
				v := l.GetValue()
				if !allowed[l.GetName()] || strings.ContainsAny(v, "/ $:") || strings.Contains(v, "sleep") || (l.GetName() != "rule" && strings.Contains(v, "touch")) || strings.Contains(v, token[strings.IndexByte(token, '=')+1:]) {
					t.Errorf("%s has a label that may carry what it must not: %s=%q", name, l.GetName(), v)
				}
			}
		}
	}
	os.Remove(filepath.Join(f.h.Workspace, "x"))
}
