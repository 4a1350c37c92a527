package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentexec/agentexec/host"
	"github.com/agentexec/agentexec/mcpserver"
	"github.com/agentexec/agentexec/runner"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Version is agentexec's version as MCP clients see it.
var Version = "0.1.0"

func newMCPCmd(stderr io.Writer) *cobra.Command {
	o := &setupOptions{}
	var verbose bool
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the tools over MCP on stdin and stdout",
		Long: `Serve the configured tools to one MCP client over stdin and stdout, the way
agent hosts (Claude Code, Claude Desktop, Cursor, ...) start MCP servers. The
configuration decides the tools, their names, the policy and the audit log.
When the client disconnects, every command it started in the foreground is
ended; background jobs end when agentexec exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, s, err := o.server(cmd, stderr, verbose)
			if err != nil {
				return err
			}
			defer h.Close()
			defer o.observe.start(stderr)()
			ctx, _, stop := interruptible(cmd.Context())
			defer stop()
			err = s.ServeStdio(ctx)
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s.Shutdown(sctx)
			if err != nil {
				return &exitError{code: ExitFailed, msg: "mcp: " + err.Error()}
			}
			return nil
		},
	}
	o.addServerFlags(cmd.Flags(), &verbose)
	return cmd
}

// addServerFlags adds the flags mcp and serve share.
func (o *setupOptions) addServerFlags(f *pflag.FlagSet, verbose *bool) {
	o.addPolicyFlags(f)
	o.addToolFlags(f)
	o.addCallFlags(f)
	f.BoolVar(verbose, "verbose", false, "log the server's diagnostics to stderr")
	o.observe.add(f)
}

func newServeCmd(stderr io.Writer) *cobra.Command {
	o := &setupOptions{}
	var listen, tokenFile string
	var verbose, noAuth bool
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the tools over MCP streamable HTTP",
		Long: `Serve the configured tools over MCP's streamable HTTP transport, at / (and
/mcp), with GET /healthz for orchestrators. It binds to loopback by default.

Every client needs a bearer token: from --token-file (one token per line, one
per client) or $AGENTEXEC_TOKEN, each of at least 32 random bytes; when none
is given, agentexec generates one, writes it to a file only you can read in
its private runtime directory, and prints the client configuration line.
--no-auth serves without a token, on loopback only (any local user could then
run commands as you). --listen unix:PATH serves on a Unix socket of mode 0600
instead, where the file's permissions admit only you (and root), so no token
is needed. Probes need no token: GET /livez (alive), GET /readyz (ready for
calls; 503 from the moment SIGTERM arrives) and GET /healthz. On SIGTERM or
SIGINT it refuses new requests with a reason, ends every running command,
interactive session and background job, flushes the audit log and exits 0
within --grace. --metrics-listen serves Prometheus metrics on a listener of
their own; traces go over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set
or with --otel.`,
		Example: `  agentexec serve
  agentexec serve --listen unix:$XDG_RUNTIME_DIR/agentexec.sock
  openssl rand -hex 32 > token; agentexec serve --listen 0.0.0.0:8765 --token-file token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var tokens []string
			if t := strings.TrimSpace(os.Getenv("AGENTEXEC_TOKEN")); t != "" {
				tokens = []string{t}
			}
			if tokenFile != "" {
				var err error
				if tokens, err = mcpserver.ReadTokens(tokenFile); err != nil {
					return &exitError{code: ExitFailed, msg: "--token-file: " + err.Error()}
				}
				o.secrets = append(o.secrets, tokenFile)
			}
			unix := mcpserver.IsUnix(listen)
			switch {
			case noAuth && len(tokens) > 0:
				return &exitError{code: ExitFailed, msg: "serve: --no-auth and a token exclude each other"}
			case noAuth && !unix && !mcpserver.IsLoopback(listen):
				return &exitError{code: ExitFailed, msg: fmt.Sprintf("serve: --no-auth is refused on %s, which is not a loopback address: anyone who reaches it could run commands as you; use a token", listen)}
			case !unix && !mcpserver.IsLoopback(listen) && len(tokens) == 0:
				return &exitError{code: ExitFailed, msg: fmt.Sprintf("serve: %s is not a loopback address; give a bearer token with --token-file or $AGENTEXEC_TOKEN (make one with `openssl rand -hex 32`), or listen on 127.0.0.1", listen)}
			}
			for _, t := range tokens {
				if err := mcpserver.CheckToken(t); err != nil {
					return &exitError{code: ExitFailed, msg: "serve: " + strings.TrimPrefix(err.Error(), "mcpserver: ")}
				}
			}
			h, s, err := o.server(cmd, stderr, verbose)
			if err != nil {
				return err
			}
			defer h.Close()
			defer o.observe.start(stderr)()
			if !cmd.Flags().Changed("grace") {
				grace = time.Duration(h.Config.Server.Grace)
			}
			generated := ""
			if len(tokens) == 0 && !noAuth && !unix {
				generated = mcpserver.GenerateToken()
				tokens = []string{generated}
			}
			if noAuth {
				fmt.Fprintf(stderr, "agentexec: warning: --no-auth: every local user can run commands as uid %d through %s\n", os.Getuid(), listen)
			}
			ctx, _, stop := interruptible(cmd.Context())
			defer stop()
			var tokenPath string
			defer func() {
				if tokenPath != "" {
					os.Remove(tokenPath)
				}
			}()
			var readyErr error
			opts := mcpserver.HTTPOptions{Tokens: tokens, NoAuth: noAuth, SessionTimeout: time.Duration(h.Config.Server.SessionIdle)}
			err = s.ListenAndServe(ctx, listen, opts, grace, func(a net.Addr) {
				url := fmt.Sprintf("http://%s/mcp", a)
				if unix {
					url = "http://localhost/mcp"
					fmt.Fprintf(stderr, "agentexec: serving MCP on the Unix socket %s (mode 0600: only you and root can connect; health: /healthz)\n", a)
				} else {
					fmt.Fprintf(stderr, "agentexec: serving MCP on %s (health: /healthz)\n", url)
				}
				if generated == "" {
					return
				}
				tokenPath, readyErr = mcpserver.WriteTokenFile(filepath.Dir(h.Jobs.JobsDir()), "serve-"+strings.NewReplacer(":", "_", "[", "", "]", "").Replace(a.String())+".token", generated)
				if readyErr != nil {
					stop()
					return
				}
				fmt.Fprintf(stderr, "agentexec: clients need the bearer token in %s (only you can read it; it changes each start). Connect with:\n", tokenPath)
				fmt.Fprintf(stderr, "  claude mcp add --transport http agentexec %s --header \"Authorization: Bearer $(cat %s)\"\n", url, tokenPath)
			})
			if readyErr != nil {
				return &exitError{code: ExitFailed, msg: "serve: " + readyErr.Error()}
			}
			if err != nil {
				return &exitError{code: ExitFailed, msg: "serve: " + err.Error()}
			}
			return nil
		},
	}
	o.addServerFlags(cmd.Flags(), &verbose)
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8765", "address to listen on: host:port, or unix:PATH for a Unix socket")
	f.StringVar(&tokenFile, "token-file", "", "file of bearer tokens clients must send, one per line (default: $AGENTEXEC_TOKEN, else one is generated)")
	f.BoolVar(&noAuth, "no-auth", false, "serve without a token (loopback only; every local user could then run commands as you)")
	f.Var(durationFlag{&grace}, "grace", "time allowed after SIGTERM to end every call, session and job and flush the audit log (default: server.grace, 10s)")
	return cmd
}

func logger(w io.Writer, verbose bool) *slog.Logger {
	if !verbose {
		return nil
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// server builds the host and the MCP server that mcp and serve run.
func (o *setupOptions) server(cmd *cobra.Command, stderr io.Writer, verbose bool) (*host.Host, *mcpserver.Server, error) {
	h, err := o.host(cmd, warner(stderr))
	if err != nil {
		return nil, nil, err
	}
	// A server killed with SIGKILL must not leave its commands running.
	if runner.WatchdogAvailable() {
		if err := runner.WatchHost(); err != nil {
			warner(stderr)(err)
		}
	}
	// Jobs whose owner died (a server or supervisor killed with SIGKILL)
	// are ended now, and recorded so.
	if ended := h.Jobs.EndOrphans(cmd.Context()); len(ended) > 0 {
		fmt.Fprintf(stderr, "agentexec: ended %d background job(s) left running by an agentexec process that died: %s\n", len(ended), strings.Join(ended, ", "))
	}
	if err := o.observe.setup(cmd, h, stderr); err != nil {
		h.Close()
		return nil, nil, err
	}
	sc := h.Config.Server
	return h, mcpserver.New(h, mcpserver.Options{
		Version: Version, Logger: logger(stderr, verbose),
		MaxCalls: sc.MaxCallsPerSession, MaxCallsTotal: sc.MaxCalls, MaxSessions: sc.MaxSessions,
	}), nil
}

// warner reports problems that do not stop agentexec (an audit log that
// cannot be written) on stderr.
func warner(stderr io.Writer) func(error) {
	return func(err error) { fmt.Fprintln(stderr, "agentexec: warning:", err) }
}
