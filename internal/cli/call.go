package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/tool"
	"github.com/spf13/cobra"
)

// ExitToolError is `agentexec call`'s exit status when the result is an
// error result (the model would see an error).
const ExitToolError = 1

type callOptions struct {
	toolOptions
	json           bool
	cwd            string
	conversation   string
	grantTools     []string
	grantFS        []string
	auditLog       string
	auditMax       int64
	auditFailClose bool
}

// defaultAuditLog is where `agentexec call` records calls unless told
// otherwise: $XDG_STATE_HOME/agentexec/audit.jsonl, or under ~/.local/state.
func defaultAuditLog() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "agentexec", "audit.jsonl")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "agentexec", "audit.jsonl")
	}
	return ""
}

func newCallCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	o := &callOptions{auditLog: defaultAuditLog()}
	cmd := &cobra.Command{
		Use:   "call TOOL [JSON]",
		Short: "Run one tool call and print exactly what the model would see",
		Long: `Run one call of a registered tool, with JSON input given as an argument or on
stdin, and print the text the model would see. --json prints the whole result:
text, structured value, error kind and what ran.

Every call is recorded in the audit log (JSON lines; environment variable names
only, never their values).

Exit status: 0 for a result the model would read as success, 1 for an error
result (invalid input, refused, failed command), 125 when agentexec itself
failed.`,
		Example: `  agentexec call exec '{"command": "ls -la"}'
  agentexec call bash '{"command": "make test", "mode": "slow"}'
  echo '{"executable": "git", "argv": ["status"]}' | agentexec call shell.exec
  agentexec call --tools Exec --grant-tool Exec --grant-fs r:/usr Exec '{"argv": ["/usr/bin/id"]}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return &exitError{code: ExitFailed, msg: `call: give a tool name and its JSON input, such as: agentexec call exec '{"command": "ls"}'`}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, args, stdin, stdout, stderr)
		},
	}
	o.addFlags(cmd.Flags())
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print the whole result as JSON")
	f.StringVar(&o.cwd, "cwd", "", "workspace: the working directory of the call (default: the current one)")
	f.StringVar(&o.conversation, "conversation", "cli", "conversation id recorded with the call")
	f.StringSliceVar(&o.grantTools, "grant-tool", nil, "limit the agent to these tools (seed 003 tool grants); Exec needs one")
	f.StringArrayVar(&o.grantFS, "grant-fs", nil, "grant MODE:PATH (r, w or rw) to the agent (seed 003 fs grants, repeatable)")
	f.StringVar(&o.auditLog, "audit-log", o.auditLog, "audit log file ('off' to disable)")
	f.Var(sizeFlag{&o.auditMax}, "audit-max-size", "rotate the audit log past this size (default 10MiB)")
	f.BoolVar(&o.auditFailClose, "audit-fail-closed", false, "refuse to run a call that cannot be recorded in the audit log")
	return cmd
}

func (o *callOptions) run(cmd *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	r, err := o.registry()
	if err != nil {
		return &exitError{code: ExitFailed, msg: err.Error()}
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
	call := &tool.Call{Conversation: o.conversation, WorkDir: o.cwd}
	if call.WorkDir == "" {
		call.WorkDir, _ = os.Getwd()
	} else if abs, err := filepath.Abs(call.WorkDir); err == nil {
		call.WorkDir = abs
	}
	if fi, err := os.Stat(call.WorkDir); err != nil || !fi.IsDir() {
		return &exitError{code: ExitFailed, msg: fmt.Sprintf("--cwd %s: not an existing directory", o.cwd)}
	}
	if o.grantTools != nil || o.grantFS != nil {
		g := &tool.Grants{Tools: o.grantTools}
		for _, s := range o.grantFS {
			mode, path, ok := strings.Cut(s, ":")
			if !ok || (mode != "r" && mode != "w" && mode != "rw") || !filepath.IsAbs(path) {
				return &exitError{code: ExitFailed, msg: fmt.Sprintf("--grant-fs %q: want MODE:PATH with MODE r, w or rw and an absolute PATH, such as r:/usr", s)}
			}
			g.FS = append(g.FS, tool.FSGrant{Mode: mode, Path: path})
		}
		call.Grants = g
	}
	if o.auditLog != "" && o.auditLog != "off" {
		sink, err := audit.OpenFile(o.auditLog, o.auditMax, audit.DefaultKeep)
		if err != nil {
			if o.auditFailClose {
				return &exitError{code: ExitFailed, msg: err.Error() + " (and --audit-fail-closed is set)"}
			}
			fmt.Fprintln(stderr, "agentexec: warning:", err)
		} else {
			defer sink.Close()
			r.Audit = sink
		}
	}
	r.FailClosed = o.auditFailClose
	r.OnAuditError = func(err error) { fmt.Fprintln(stderr, "agentexec: warning:", err) }

	ctx, _, stop := interruptible(cmd.Context())
	defer stop()
	res := r.Dispatch(ctx, call, args[0], input)
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
	if res.IsError {
		return &exitError{code: ExitToolError}
	}
	return nil
}
