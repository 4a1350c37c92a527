package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
	"github.com/spf13/cobra"
)

// ExitHookDeny is the exit status with which `hook claude-code` blocks a
// tool call it cannot judge (unreadable input, a broken configuration):
// Claude Code treats exit status 2 as "block, and show stderr to Claude".
const ExitHookDeny = 2

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

When the hook cannot judge a Bash call (the input is not the hook JSON, the
command is missing, the configuration is broken) it exits 2 with the reason
on stderr, which Claude Code reads as "deny": it never lets through what it
could not check.

In .claude/settings.json:

  {"hooks": {"PreToolUse": [{"matcher": "Bash",
    "hooks": [{"type": "command", "command": "agentexec hook claude-code"}]}]}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Claude Code lets a tool call through on any exit status but
			// 2, which blocks it and shows stderr to Claude: a hook that
			// cannot decide denies.
			var in claudeHookInput
			if err := json.NewDecoder(io.LimitReader(stdin, 16<<20)).Decode(&in); err != nil {
				return &exitError{code: ExitHookDeny, msg: "hook claude-code: denied, because the input is not Claude Code's PreToolUse hook JSON: " + err.Error()}
			}
			if in.ToolName != "Bash" {
				return nil
			}
			if in.ToolInput.Command == "" {
				return &exitError{code: ExitHookDeny, msg: "hook claude-code: denied, because the Bash tool input has no command (tool_input.command)"}
			}
			cfg, err := o.load(cmd)
			if err != nil {
				msg := err.Error()
				if ee, ok := err.(*exitError); ok {
					msg = ee.msg
				}
				return &exitError{code: ExitHookDeny, msg: "hook claude-code: denied, because the agentexec configuration cannot be used: " + msg}
			}
			eng, err := cfg.Engine()
			if err != nil {
				return &exitError{code: ExitHookDeny, msg: "hook claude-code: denied, because the policy cannot be built: " + err.Error()}
			}
			req := policy.Request{Tool: "bash", Command: in.ToolInput.Command, Shell: "bash", Cwd: in.Cwd, Conversation: in.SessionID}
			d := eng.Check(req)
			var out claudeHookOutput
			out.HookSpecificOutput.HookEventName = "PreToolUse"
			switch d.Verdict {
			case policy.Deny:
				out.HookSpecificOutput.PermissionDecision = "deny"
				out.HookSpecificOutput.PermissionDecisionReason = d.Message()
			case policy.Ask:
				out.HookSpecificOutput.PermissionDecision = "ask"
				out.HookSpecificOutput.PermissionDecisionReason = fmt.Sprintf("agentexec (%s): %s", d.Rule, d.Reason)
				if rule := tool.AllowRule(req, d); rule != "" {
					out.HookSpecificOutput.PermissionDecisionReason += ". To allow it without asking, add to the agentexec configuration:\n" + rule
				}
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
