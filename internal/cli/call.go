package cli

import (
	"slices"

	"encoding/json"
	"fmt"
	"github.com/agentexec/agentexec/config"
	"io"
	"strings"

	"github.com/agentexec/agentexec/tool"
	"github.com/spf13/cobra"
)

// ExitToolError is `agentexec call`'s exit status when the result is an
// error result (the model would see an error).
const ExitToolError = 1

type callOptions struct {
	setupOptions
	json         bool
	conversation string
}

func newCallCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	o := &callOptions{}
	cmd := &cobra.Command{
		Use:   "call TOOL [JSON]",
		Short: "Run one tool call and print exactly what the model would see",
		Long: `Run one call of a registered tool, with JSON input given as an argument or on
stdin, and print the text the model would see. --json prints the whole result:
text, structured value, error kind and what ran.

Every call passes the policy (the configuration's profile and rules, the
built-in guardrails) before anything starts. When the policy asks, agentexec
asks on the terminal; with no terminal the call is refused with a message
saying how to allow it. Every call is recorded in the audit log (JSON lines;
environment variable names only, never their values).

A background job's id (for agentexec jobs) is printed on stderr, and is
"job_id" in the --json result's "run".

Exit status: 0 for a result the model would read as success, 1 for an error
result (invalid input, refused, failed command), 125 when agentexec itself
failed or was used wrongly (a bad flag, no such tool, no input).`,
		Example: `  agentexec call bash '{"command": "make test", "mode": "slow"}'
  agentexec call --tools exec exec '{"command": "ls -la"}'
  echo '{"executable": "git", "argv": ["status"]}' | agentexec call --tools shell.exec shell.exec
  agentexec call --tools Exec --grant-tool Exec --grant-fs r:/usr Exec '{"argv": ["/usr/bin/id"]}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return &exitError{code: ExitFailed, msg: `call: give a tool name and its JSON input, such as: agentexec call bash '{"command": "ls"}'`}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, args, stdin, stdout, stderr)
		},
	}
	o.addPolicyFlags(cmd.Flags())
	o.addToolFlags(cmd.Flags())
	o.addCallFlags(cmd.Flags())
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print the whole result as JSON")
	f.StringVar(&o.conversation, "conversation", "cli", "conversation id recorded with the call")
	return cmd
}

func (o *callOptions) run(cmd *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	h, err := o.host(cmd, warner(stderr))
	if err != nil {
		return err
	}
	defer h.Close()
	if h.Egress != nil {
		h.Egress.Ask = ttyNetworkAsker // on_unknown = "ask"
	}
	var input []byte
	if len(args) == 2 && args[1] != "-" {
		input = []byte(args[1])
	} else {
		input, err = io.ReadAll(io.LimitReader(stdin, tool.MaxInputBytes+1))
		if err != nil {
			return &exitError{code: ExitFailed, msg: "reading the input from stdin: " + err.Error()}
		}
	}
	if _, ok := h.Registry.Lookup(args[0]); !ok {
		// A usage mistake, not a result the model would see.
		if slices.Contains(config.Contracts, args[0]) {
			return &exitError{code: ExitFailed, msg: fmt.Sprintf("call: the %s tool is not enabled; enable it with --tools %s or tools.enabled in the configuration (enabled: %s)",
				args[0], args[0], strings.Join(h.Registry.Names(), ", "))}
		}
		return &exitError{code: ExitFailed, msg: fmt.Sprintf("call: no tool is registered as %q; the registered tools are %s (agentexec tools lists them)",
			args[0], strings.Join(h.Registry.Names(), ", "))}
	}
	h.Jobs.OneShot = true // background jobs outlive this call, watched by their supervisors
	call := h.Call(o.conversation)
	if tty, err := openTTY(); err == nil {
		defer tty.Close()
		call.Approver = &tool.SessionApprover{Inner: &promptApprover{in: tty, out: tty}}
	}

	ctx, _, stop := interruptible(cmd.Context())
	defer stop()
	res := h.Registry.Dispatch(ctx, call, args[0], input)
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(res); err != nil {
			return &exitError{code: ExitFailed, msg: "writing the result: " + err.Error()}
		}
	} else {
		fmt.Fprint(stdout, res.Text)
		if res.Text != "" && !strings.HasSuffix(res.Text, "\n") {
			fmt.Fprintln(stdout)
		}
	}
	if res.Run != nil && res.Run.JobID != "" && !o.json {
		fmt.Fprintf(stderr, "agentexec: running as job %s (pid %d); follow it with `agentexec jobs logs %s -f`, stop it with `agentexec jobs kill %s`\n",
			res.Run.JobID, res.Run.Pid, res.Run.JobID, res.Run.JobID)
	}
	// Jobs detached from this call belong to this process: it stays until
	// they end (or are stopped with agentexec jobs kill).
	h.Jobs.WaitAttached()
	if res.IsError {
		return &exitError{code: ExitToolError}
	}
	return nil
}
