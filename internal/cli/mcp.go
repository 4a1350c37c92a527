package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/agentexec/agentexec/host"
	"github.com/agentexec/agentexec/mcpserver"
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
}

func newServeCmd(stderr io.Writer) *cobra.Command {
	o := &setupOptions{}
	var listen, tokenFile string
	var verbose bool
	var grace time.Duration = 5 * time.Second
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the tools over MCP streamable HTTP",
		Long: `Serve the configured tools over MCP's streamable HTTP transport, at / (and
/mcp), with GET /healthz for orchestrators. It binds to loopback by default;
any other address needs a bearer token, read from --token-file or
$AGENTEXEC_TOKEN, and agentexec refuses to start without one. On SIGTERM or
SIGINT it stops accepting requests, ends running commands and background
jobs, flushes the audit log and exits within --grace.`,
		Example: `  agentexec serve
  AGENTEXEC_TOKEN=$(cat token) agentexec serve --listen 0.0.0.0:8765`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			token := os.Getenv("AGENTEXEC_TOKEN")
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return &exitError{code: ExitFailed, msg: "--token-file: " + err.Error()}
				}
				token = strings.TrimSpace(string(b))
				o.secrets = append(o.secrets, tokenFile)
			}
			if !mcpserver.IsLoopback(listen) && token == "" {
				return &exitError{code: ExitFailed, msg: fmt.Sprintf("serve: %s is not a loopback address; give a bearer token with --token-file or $AGENTEXEC_TOKEN, or listen on 127.0.0.1", listen)}
			}
			h, s, err := o.server(cmd, stderr, verbose)
			if err != nil {
				return err
			}
			defer h.Close()
			ctx, _, stop := interruptible(cmd.Context())
			defer stop()
			err = s.ListenAndServe(ctx, listen, mcpserver.HTTPOptions{Token: token}, grace, func(a net.Addr) {
				fmt.Fprintf(stderr, "agentexec: serving MCP on http://%s/ (health: /healthz)\n", a)
			})
			if err != nil {
				return &exitError{code: ExitFailed, msg: "serve: " + err.Error()}
			}
			return nil
		},
	}
	o.addServerFlags(cmd.Flags(), &verbose)
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8765", "address to listen on")
	f.StringVar(&tokenFile, "token-file", "", "file holding the bearer token clients must send (default: $AGENTEXEC_TOKEN)")
	f.Var(durationFlag{&grace}, "grace", "time allowed for a clean shutdown")
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
	return h, mcpserver.New(h, mcpserver.Options{Version: Version, Logger: logger(stderr, verbose)}), nil
}

// warner reports problems that do not stop agentexec (an audit log that
// cannot be written) on stderr.
func warner(stderr io.Writer) func(error) {
	return func(err error) { fmt.Fprintln(stderr, "agentexec: warning:", err) }
}
