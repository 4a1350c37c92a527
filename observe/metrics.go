package observe

import (
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DurationBuckets are the buckets of agentexec_command_duration_seconds:
// from 5 ms (a `true`) to 10 minutes (the longest foreground timeout).
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// metrics are the Prometheus collectors, in a registry of their own (not
// the global one, so that a library user's metrics and ours never clash).
type metrics struct {
	reg       *prometheus.Registry
	commands  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	decisions *prometheus.CounterVec
	approvals *prometheus.CounterVec
	truncated *prometheus.CounterVec
	running   prometheus.Gauge
}

func newMetrics(o Options) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.commands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentexec_commands_total",
		Help: "Tool calls answered, by tool and outcome (exited, failed, signaled, timeout, cancelled, denied, error).",
	}, []string{"tool", "outcome"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentexec_command_duration_seconds",
		Help:    "Time to answer a tool call (policy, approval and the command), by tool and outcome.",
		Buckets: DurationBuckets,
	}, []string{"tool", "outcome"})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentexec_policy_decisions_total",
		Help: "Policy decisions (allow, ask, deny) by the rule that made them (\"default\" for none).",
	}, []string{"decision", "rule"})
	m.approvals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentexec_approvals_total",
		Help: "Approvals asked of a person, by result (approved, declined, pending, error).",
	}, []string{"result"})
	m.truncated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentexec_output_truncated_total",
		Help: "Tool calls whose output the model saw cut, by tool.",
	}, []string{"tool"})
	m.running = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "agentexec_processes_running",
		Help: "Commands of tool calls running in the foreground now (background jobs and sessions are counted apart).",
	})
	count := func(f func() int) func() float64 {
		return func() float64 {
			if f == nil {
				return 0
			}
			return float64(f())
		}
	}
	jobs := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentexec_jobs_live",
		Help: "Background jobs this server started that are still running.",
	}, count(o.Jobs))
	sessions := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentexec_sessions_live",
		Help: "Interactive sessions (exec_command) still running.",
	}, count(o.Sessions))
	layers := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentexec_sandbox_layer_available",
		Help: "1 when this system offers the sandbox layer (named as in `agentexec sandbox status`, spaces as underscores), 0 when it is missing.",
	}, []string{"layer"})
	for name, ok := range o.Layers {
		v := 0.0
		if ok {
			v = 1
		}
		layers.WithLabelValues(strings.ReplaceAll(name, " ", "_")).Set(v)
	}
	version := o.Version
	if version == "" {
		version = "dev"
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentexec_build_info",
		Help: "Always 1; the labels say which agentexec this is.",
	}, []string{"version", "goversion"})
	build.WithLabelValues(version, runtime.Version()).Set(1)
	m.reg.MustRegister(m.commands, m.duration, m.decisions, m.approvals, m.truncated, m.running, jobs, sessions, layers, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

func (m *metrics) decision(d policy.Decision) {
	rule := d.Rule
	if rule == "" {
		rule = "default"
	}
	m.decisions.WithLabelValues(d.Verdict.String(), rule).Inc()
}

func (m *metrics) ended(toolName string, res *tool.Result, elapsed time.Duration) {
	outcome := tool.Outcome(res)
	if outcome == "" {
		return // an approval pending: the retry is the call
	}
	m.commands.WithLabelValues(toolName, outcome).Inc()
	m.duration.WithLabelValues(toolName, outcome).Observe(elapsed.Seconds())
	if res != nil && res.Run != nil && res.Run.Truncated {
		m.truncated.WithLabelValues(toolName).Inc()
	}
}
