package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/safety"
	"github.com/spf13/cobra"
)

// Exit statuses of `agentexec check`.
const (
	checkAllow = 0
	checkDeny  = 1
	checkUsage = 2
	checkAsk   = 3
)

// checkResult is `agentexec check --json`'s output.
type checkResult struct {
	Decision     string                `json:"decision"`
	Rule         string                `json:"rule"`
	Reason       string                `json:"reason"`
	Alternative  string                `json:"alternative"`
	Message      string                `json:"message,omitempty"`
	Commands     []safety.Command      `json:"commands"`
	Findings     []safety.Finding      `json:"findings"`
	Unanalysable []safety.Unanalysable `json:"unanalysable,omitempty"`
	ParseError   string                `json:"parse_error,omitempty"`
}

func newCheckCmd(stdout io.Writer) *cobra.Command {
	o := &setupOptions{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check [flags] 'COMMAND'",
		Short: "Say what the policy would decide about a bash command, and why",
		Long: `Read a bash command as the checker does and print the decision (allow, deny
or ask), the rule, the reason, the alternative, and every command found: its
argv, the wrappers taken off (sudo, env, timeout, xargs, find -exec, bash -c,
eval, ...) and the parts only known at run time. Nothing is run.

Exit status: 0 allow, 1 deny, 3 ask, 2 usage error.`,
		Example: `  agentexec check 'git push --force'
  agentexec check --json 'sudo bash -c "rm -rf ~"'
  agentexec check --profile strict 'make test'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &exitError{code: checkUsage, msg: "check: give one command as one quoted argument, such as: agentexec check 'git push -f'"}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := o.load(cmd)
			if err != nil {
				if ee, ok := err.(*exitError); ok {
					ee.code = checkUsage
				}
				return err
			}
			eng, err := cfg.Engine()
			if err != nil {
				return &exitError{code: checkUsage, msg: err.Error()}
			}
			cwd := cfg.Workspace
			if cwd == "" {
				cwd, _ = os.Getwd()
			}
			req := policy.Request{Tool: "bash", Command: args[0], Shell: "bash", Cwd: cwd}
			rep := safety.Analyze(args[0], nil)
			d := eng.Decide(req, rep)
			res := checkResult{
				Decision: d.Verdict.String(), Rule: d.Rule, Reason: d.Reason, Alternative: d.Alternative,
				Commands: rep.Commands, Findings: rep.Findings, Unanalysable: rep.Unanalysable,
			}
			if d.Verdict != policy.Allow {
				res.Message = d.Message()
			}
			if rep.ParseError != nil {
				res.ParseError = rep.ParseError.Error()
			}
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				enc.Encode(res)
			} else {
				printCheck(stdout, &res)
			}
			switch d.Verdict {
			case policy.Deny:
				return &exitError{code: checkDeny}
			case policy.Ask:
				return &exitError{code: checkAsk}
			}
			return nil
		},
	}
	o.addPolicyFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.cwd, "cwd", "", "working directory the command would run in (for cwd rules)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func printCheck(w io.Writer, r *checkResult) {
	fmt.Fprintf(w, "decision: %s\n", r.Decision)
	if r.Rule != "" {
		fmt.Fprintf(w, "rule: %s\n", r.Rule)
	}
	if r.Reason != "" {
		fmt.Fprintf(w, "reason: %s\n", r.Reason)
	}
	if r.Alternative != "" {
		fmt.Fprintf(w, "alternative: %s\n", r.Alternative)
	}
	if r.Message != "" {
		fmt.Fprintf(w, "the model sees: %s\n", r.Message)
	}
	if r.ParseError != "" {
		fmt.Fprintf(w, "parse error: %s\n", r.ParseError)
	}
	if len(r.Commands) > 0 {
		fmt.Fprintln(w, "commands:")
		for _, c := range r.Commands {
			line := c.String()
			if len(c.Assigns) > 0 {
				line = strings.Join(c.Assigns, "=… ") + "=… " + line
			}
			fmt.Fprintf(w, "  %-6s %s\n", c.Pos, line)
		}
	}
	for _, f := range r.Findings {
		fmt.Fprintf(w, "finding: %s\n", f.Rule)
	}
	for _, u := range r.Unanalysable {
		fmt.Fprintf(w, "not analysable (%s): %s\n", u.Kind, u.Detail)
	}
}
