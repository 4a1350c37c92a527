package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/agentexec/agentexec/policy"
	"github.com/spf13/cobra"
)

// claudeHookInput is the part of Claude Code's PreToolUse hook input the
// hook reads.
type claudeHookInput struct {
	HookEventName string `json:"hook_event_name"`
	ToolName      string `json:"tool_name"`
	ToolInput     struct {
		Command string `json:"command"`
	} `json:"tool_input"`
	Cwd       string `json:"cwd"`
	SessionID string `json:"session_id"`
}

// claudeHookOutput is the PreToolUse decision Claude Code reads.
type claudeHookOutput struct {
	HookSpecificOutput struct {
		HookEventName            string `json:"hookEventName"`
		PermissionDecision       string `json:"permissionDecision"`
		PermissionDecisionReason string `json:"permissionDecisionReason"`
	} `json:"hookSpecificOutput"`
}

func newHookCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	hook := &cobra.Command{
		Use:   "hook",
		Short: "Put the checker in front of another agent's own shell tool",
	}
	o := &setupOptions{}
	var allow bool
	cc := &cobra.Command{
		Use:   "claude-code",
		Short: "Claude Code PreToolUse hook for its Bash tool",
		Long: `Reads Claude Code's PreToolUse hook input (JSON on stdin) and, for the Bash
tool, prints a permission decision (JSON on stdout): "deny" with the reason
and an alternative for Claude, or "ask" so that Claude Code asks you. When the
policy allows a command the hook says nothing, so Claude Code's own
permission settings still apply; --allow answers "allow" instead, which skips
Claude Code's prompt. Other tools are left alone.

In .claude/settings.json:

  {"hooks": {"PreToolUse": [{"matcher": "Bash",
    "hooks": [{"type": "command", "command": "agentexec hook claude-code"}]}]}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var in claudeHookInput
			if err := json.NewDecoder(io.LimitReader(stdin, 16<<20)).Decode(&in); err != nil {
				// Exit 1: a non-blocking error for Claude Code.
				return &exitError{code: 1, msg: "hook claude-code: the input is not Claude Code's hook JSON: " + err.Error()}
			}
			if in.ToolName != "Bash" || in.ToolInput.Command == "" {
				return nil
			}
			cfg, err := o.load(cmd)
			if err != nil {
				if ee, ok := err.(*exitError); ok {
					ee.code = 1
				}
				return err
			}
			eng, err := cfg.Engine()
			if err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			d := eng.Check(policy.Request{Tool: "bash", Command: in.ToolInput.Command, Shell: "bash", Cwd: in.Cwd, Conversation: in.SessionID})
			var out claudeHookOutput
			out.HookSpecificOutput.HookEventName = "PreToolUse"
			switch d.Verdict {
			case policy.Deny:
				out.HookSpecificOutput.PermissionDecision = "deny"
				out.HookSpecificOutput.PermissionDecisionReason = d.Message()
			case policy.Ask:
				out.HookSpecificOutput.PermissionDecision = "ask"
				out.HookSpecificOutput.PermissionDecisionReason = fmt.Sprintf("agentexec (%s): %s", d.Rule, d.Reason)
			default:
				if !allow {
					return nil
				}
				out.HookSpecificOutput.PermissionDecision = "allow"
				out.HookSpecificOutput.PermissionDecisionReason = "agentexec: no rule objects"
			}
			enc := json.NewEncoder(stdout)
			enc.SetEscapeHTML(false)
			return enc.Encode(out)
		},
	}
	o.addPolicyFlags(cc.Flags())
	cc.Flags().BoolVar(&allow, "allow", false, `answer "allow" when the policy allows (skips Claude Code's own prompt)`)
	hook.AddCommand(cc)
	return hook
}
