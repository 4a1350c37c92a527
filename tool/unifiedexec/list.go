package unifiedexec

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
)

// All returns exec_command, write_stdin, session_list and session_kill
// over m.
func All(m *Manager, exec *ExecCommand, write *WriteStdin) []tool.Tool {
	exec.Sessions, write.Sessions = m, m
	return []tool.Tool{exec, write, &List{Sessions: m}, &Kill{Sessions: m}}
}

// noRun is a session tool call that starts nothing: policy sees an empty
// request.
type noRun struct {
	run func(ctx context.Context, call *tool.Call) *tool.Result
}

func (a *noRun) Request() policy.Request { return policy.Request{} }
func (a *noRun) Run(ctx context.Context, call *tool.Call) *tool.Result {
	return a.run(ctx, call)
}

// List is session_list.
type List struct{ Sessions *Manager }

// Name returns "session_list".
func (*List) Name() string { return ListName }

// Description tells the model what the tool does.
func (*List) Description(*tool.Call) string {
	return "Lists this conversation's sessions started by exec_command: ID, state, tty or pipes, age, idle time and command."
}

// InputSchema takes no arguments.
func (*List) InputSchema() json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`)
}

// Annotations describes the tool for clients.
func (*List) Annotations() tool.Annotations {
	return tool.Annotations{Title: "List interactive sessions", ReadOnly: true, Idempotent: true}
}

// Prepare validates the (empty) input.
func (t *List) Prepare(call *tool.Call, raw json.RawMessage) (tool.Action, *tool.Result) {
	if _, err := tool.ParseArgs(raw); err != nil {
		return nil, tool.Errorf(tool.KindValidation, "invalid input: %v", err)
	}
	return &noRun{run: func(context.Context, *tool.Call) *tool.Result {
		list := t.Sessions.List(call.Conversation)
		if len(list) == 0 {
			return &tool.Result{Text: "No sessions in this conversation."}
		}
		var b strings.Builder
		for _, e := range list {
			b.WriteString(e.describe())
			b.WriteByte('\n')
		}
		return &tool.Result{Text: strings.TrimRight(b.String(), "\n")}
	}}, nil
}

// Kill is session_kill.
type Kill struct{ Sessions *Manager }

// Name returns "session_kill".
func (*Kill) Name() string { return KillName }

// Description tells the model what the tool does.
func (*Kill) Description(*tool.Call) string {
	return "Ends a session started by exec_command: its whole process tree is stopped (SIGTERM, then SIGKILL) and its terminal closed. Returns its last output."
}

// InputSchema takes the session's id.
func (*Kill) InputSchema() json.RawMessage {
	return json.RawMessage(`{"type": "object", "required": ["session_id"], "properties": {"session_id": {"type": "string", "description": "The session ID exec_command returned."}}, "additionalProperties": false}`)
}

// Annotations describes the tool for clients.
func (*Kill) Annotations() tool.Annotations {
	return tool.Annotations{Title: "End an interactive session", Destructive: true}
}

// Prepare validates the input.
func (t *Kill) Prepare(call *tool.Call, raw json.RawMessage) (tool.Action, *tool.Result) {
	a, err := tool.ParseArgs(raw, "session_id")
	if err != nil {
		return nil, tool.Errorf(tool.KindValidation, "invalid input: %v", err)
	}
	id, ok, err := a.String("session_id")
	if err != nil {
		return nil, tool.Errorf(tool.KindValidation, "invalid input: %v", err)
	}
	if !ok || id == "" {
		return nil, tool.Errorf(tool.KindValidation, "invalid input: session_id: is required; session_list shows the live sessions")
	}
	return &noRun{run: func(ctx context.Context, call *tool.Call) *tool.Result {
		e, ok := t.Sessions.Get(id, call.Conversation)
		if !ok {
			return tool.Errorf(tool.KindValidation, "no session with ID %q in this conversation; session_list shows the live sessions", shorten(id, 40))
		}
		wasRunning := e.Session.Result() == nil
		t.Sessions.Kill(id, call.Conversation)
		t.Sessions.emit(e, "session.killed", func(ev *audit.Event) { ev.CallID, ev.Tool = call.ID, KillName })
		res := t.Sessions.answer(e, e.Session.Started(), DefaultMaxOutputTokens)
		if wasRunning {
			res.Text = fmt.Sprintf("Session %s ended.\n", id) + res.Text
		}
		return res
	}}, nil
}
