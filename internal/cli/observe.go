package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/agentexec/agentexec/host"
	"github.com/agentexec/agentexec/observe"
	"github.com/agentexec/agentexec/sandbox"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// observeFlags are the metrics and tracing flags of mcp and serve.
type observeFlags struct {
	metricsListen  string
	otel           bool
	recordCommands bool

	obs *observe.Observer // nil when nothing is observed
	ln  net.Listener      // the metrics listener, or nil
}

func (p *observeFlags) add(f *pflag.FlagSet) {
	f.StringVar(&p.metricsListen, "metrics-listen", "", "serve Prometheus metrics (GET /metrics) on this host:port, such as 127.0.0.1:9464 (default: server.metrics_listen, off)")
	f.BoolVar(&p.otel, "otel", false, "export OpenTelemetry traces over OTLP/HTTP, configured by the OTEL_* variables (on anyway when OTEL_EXPORTER_OTLP_ENDPOINT is set)")
	f.BoolVar(&p.recordCommands, "otel-record-commands", false, "put each command's text on its trace span (commands can carry secrets)")
}

// setup builds the observer the flags and the configuration ask for, sets
// it as the registry's, and opens the metrics listener. It does nothing
// when neither metrics nor traces are wanted.
func (p *observeFlags) setup(cmd *cobra.Command, h *host.Host, stderr io.Writer) error {
	sc := h.Config.Server
	listen := sc.MetricsListen
	if cmd.Flags().Changed("metrics-listen") {
		listen = p.metricsListen
	}
	traces := observe.TracesWanted(p.otel || sc.Otel, os.Getenv)
	if listen == "" && !traces {
		return nil
	}
	layers := map[string]bool{}
	for _, l := range sandbox.StatusOf(h.Sandbox) {
		layers[l.Name] = l.Available
	}
	obs, err := observe.New(cmd.Context(), observe.Options{
		Metrics: listen != "", Traces: traces, RecordCommands: p.recordCommands || sc.OtelRecordCommands,
		Version: Version, Tools: h.Registry.Names(), Jobs: h.Jobs.Live, Sessions: h.Sessions.Live, Layers: layers,
	})
	if err != nil {
		return &exitError{code: ExitFailed, msg: err.Error()}
	}
	if listen != "" {
		if p.ln, err = net.Listen("tcp", listen); err != nil {
			obs.Shutdown(context.Background())
			return &exitError{code: ExitFailed, msg: fmt.Sprintf("--metrics-listen: %v", err)}
		}
		fmt.Fprintf(stderr, "agentexec: Prometheus metrics on http://%s/metrics\n", p.ln.Addr())
	}
	if traces {
		fmt.Fprintln(stderr, "agentexec: exporting OpenTelemetry traces over OTLP/HTTP (OTEL_* variables)")
	}
	p.obs = obs
	h.Registry.Observer = obs
	return nil
}

// start serves the metrics until the returned function is called; that
// function also exports the spans not yet sent, within a few seconds.
func (p *observeFlags) start(stderr io.Writer) func() {
	if p.obs == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if p.ln != nil {
			if err := p.obs.ServeMetrics(ctx, p.ln); err != nil {
				warner(stderr)(err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		if err := p.obs.Shutdown(sctx); err != nil {
			warner(stderr)(fmt.Errorf("traces: %w", err))
		}
	}
}
