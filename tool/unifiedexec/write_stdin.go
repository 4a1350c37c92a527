package unifiedexec

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/terminal"
	"github.com/agentexec/agentexec/tool"
)

// RuleProgramInput is the rule that decides on input typed into a program
// that is not a shell (a REPL, a password prompt) in a session without a
// sandbox.
const RuleProgramInput = "interactive-input"

// WriteStdin is the write_stdin tool. Its zero value is not usable: it
// needs Sessions.
type WriteStdin struct {
	// Sessions holds the sessions exec_command started.
	Sessions *Manager
	// ProgramInput decides on input to a program that is not a shell, in
	// a session without a sandbox: "allow", "ask" or "deny"; empty means
	// ask. Input to a shell is always checked line by line instead, and
	// input to a sandboxed session's program is allowed.
	ProgramInput string
	// Checks are the policy's checkers (the host gives its engine). Input
	// to a program that is not a shell is also checked with them, line by
	// line, and refused when a line would be denied as a shell command:
	// what a program leaves unread reaches the shell that runs it next
	// (typeahead). Parse errors and "ask" do not refuse there.
	Checks []policy.Checker
}

// Name returns "write_stdin".
func (*WriteStdin) Name() string { return WriteStdinName }

// Description tells the model how to use the tool.
func (*WriteStdin) Description(*tool.Call) string {
	return `Writes characters to the stdin of a session that exec_command started (with tty=true, or pipe_stdin=true), then returns its new output with the same header as exec_command.

- chars are sent as they are: include "\n" to press Enter. On a terminal (tty=true), "\u0003" is Ctrl-C, "\u0004" is Ctrl-D (end of input), "\u001a" is Ctrl-Z; on a pipe they are plain bytes.
- Empty chars just polls: it waits for new output (at least 5 seconds, up to 300 seconds with yield_time_ms) and returns as soon as some arrives or the process exits.
- With chars, it waits yield_time_ms (default 250, 250 to 30000) or until the process exits.
- Lines typed into a shell are checked by the same policy as commands; a refused line is not typed. Send whole lines: line-editing keys (Tab, arrows, Ctrl-A, ...) are refused at a shell prompt.
- Writing to a session that has ended returns its exit code and remaining output.`
}

var writeSchema = json.RawMessage(`{
  "type": "object",
  "required": ["session_id"],
  "properties": {
    "session_id": {"type": "string", "description": "The session ID exec_command returned."},
    "chars": {"type": "string", "description": "Characters to write (control characters as they are, e.g. \u0003 for Ctrl-C). Empty: just poll for output."},
    "yield_time_ms": {"type": "number", "description": "How long to wait for output after writing (250 to 30000; default 250). An empty poll waits 5000 to 300000."},
    "max_output_tokens": {"type": "number", "description": "Maximum output to return, in tokens of about 4 bytes (default 10000)."}
  },
  "additionalProperties": false
}`)

// InputSchema returns the tool's schema.
func (*WriteStdin) InputSchema() json.RawMessage { return writeSchema }

// Annotations describes the tool for clients.
func (*WriteStdin) Annotations() tool.Annotations {
	return tool.Annotations{Title: "Type into a running session, or poll it", Destructive: true, OpenWorld: true}
}

// Preflight decides on input to a program that is not a shell (see
// ProgramInput); shell lines are decided by the registry's checkers.
func (t *WriteStdin) Preflight(r policy.Request) policy.Decision {
	kind := r.Metadata["session_input"]
	if kind != inputProgram && kind != inputHidden {
		return policy.Allowed
	}
	if d := t.typeahead(r); d.Verdict == policy.Deny {
		return d
	}
	if r.Metadata["sandboxed"] == "true" {
		return policy.Allowed
	}
	prog := r.Metadata["program"]
	if prog == "" {
		prog = "the program"
	}
	what := "the input " + strconv.Quote(shorten(r.Metadata["input"], 200))
	if kind == inputHidden {
		what = fmt.Sprintf("%d characters typed with the terminal's echo off (a password prompt)", utf8.RuneCountInString(r.Metadata["input"]))
	}
	d := policy.Decision{Rule: RuleProgramInput,
		Reason: fmt.Sprintf("%s, for %s (not a shell), cannot be checked like a command, and this session runs without a sandbox", what, prog),
		Alternative: "Ask the user to allow it, or run the session under a sandbox profile (sandbox.profile), " +
			"or run the program non-interactively with exec_command (for example python3 -c or a script file)"}
	switch t.ProgramInput {
	case "allow":
		return policy.Allowed
	case "deny":
		d.Verdict = policy.Deny
	default:
		d.Verdict = policy.Ask
	}
	return d
}

// typeahead checks each line of input meant for a program as the shell
// command it would become if a shell read it instead, and returns the
// first denial (parse errors and asks excepted).
func (t *WriteStdin) typeahead(r policy.Request) policy.Decision {
	if len(t.Checks) == 0 {
		return policy.Allowed
	}
	for _, line := range strings.FieldsFunc(r.Metadata["input"], func(c rune) bool { return c == '\n' || c == '\r' || c == 0x04 }) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		d := policy.CheckAll(policy.Request{Tool: r.Tool, Conversation: r.Conversation, Command: line, Shell: "bash"}, t.Checks...)
		if d.Verdict == policy.Deny && d.Rule != policy.RuleParseError {
			d.Text = ""
			d.Reason = "this input would be refused as a shell command, and a shell may read what the program leaves unread: " + d.Reason
			return d
		}
	}
	return policy.Allowed
}

// WriteInput is a validated write_stdin call.
type WriteInput struct {
	SessionID       string
	Chars           string
	Yield           time.Duration
	MaxOutputTokens int
}

// DecodeWrite validates raw input. Yield is clamped for a write, or for a
// poll when Chars is empty.
func DecodeWrite(raw json.RawMessage) (*WriteInput, *tool.ValidationError) {
	a, err := tool.ParseArgs(raw, "session_id", "chars", "yield_time_ms", "max_output_tokens")
	if err != nil {
		return nil, err.(*tool.ValidationError)
	}
	in := &WriteInput{}
	var ok bool
	if in.SessionID, ok, err = a.String("session_id"); err != nil {
		return nil, err.(*tool.ValidationError)
	}
	if !ok || in.SessionID == "" {
		return nil, vErr("session_id", "is required; exec_command returns it, session_list shows the live sessions")
	}
	if in.Chars, _, err = a.String("chars"); err != nil {
		return nil, err.(*tool.ValidationError)
	}
	if len(in.Chars) > MaxChars {
		return nil, vErr("chars", "is %d bytes; the limit is %d. Write a long text to a file with exec_command instead", len(in.Chars), MaxChars)
	}
	var verr *tool.ValidationError
	if in.Chars == "" {
		in.Yield, verr = millis(a, "yield_time_ms", DefaultWriteYield, MinPollYield, MaxPollYield)
	} else {
		in.Yield, verr = millis(a, "yield_time_ms", DefaultWriteYield, MinYield, MaxYield)
	}
	if verr != nil {
		return nil, verr
	}
	if in.MaxOutputTokens, verr = tokens(a); verr != nil {
		return nil, verr
	}
	return in, nil
}

// What a write is, for policy and audit.
const (
	inputPoll    = "poll"
	inputEnded   = "ended"
	inputShell   = "shell"   // a shell reads it: checked line by line
	inputProgram = "program" // another program reads it
	inputHidden  = "hidden"  // typed with echo off (a password): length only
)

// Prepare validates the input, finds the session and classifies the
// write by the program that will read it.
func (t *WriteStdin) Prepare(call *tool.Call, raw json.RawMessage) (tool.Action, *tool.Result) {
	in, verr := DecodeWrite(raw)
	if verr != nil {
		return nil, tool.Errorf(tool.KindValidation, "invalid input: %v", verr)
	}
	e, ok := t.Sessions.Get(in.SessionID, call.Conversation)
	if !ok {
		return nil, tool.Errorf(tool.KindValidation, "no session with ID %q in this conversation: it never existed, it ended and its last output was already returned, "+
			"or it was ended (session_kill, idle for 30 minutes). session_list shows the live sessions; exec_command starts a new one", shorten(in.SessionID, 40))
	}
	a := &writeAction{t: t, in: in, e: e}
	switch {
	case in.Chars == "":
		a.kind = inputPoll
	case e.Session.Result() != nil:
		a.kind = inputEnded
	case !e.Session.HasStdin():
		return nil, tool.Errorf(tool.KindValidation, "stdin is closed for this session; rerun exec_command with tty=true "+
			"(or with pipe_stdin=true to keep a pipe open without a terminal)")
	default:
		a.kind, a.fg = classify(e)
		if a.kind == inputShell {
			e.inMu.Lock()
			lines, rest, bad := shellInput(e.pending, in.Chars)
			a.lines, a.rest, a.seq = lines, rest, e.inSeq
			e.inMu.Unlock()
			if bad != "" {
				return nil, tool.Errorf(tool.KindPermissionDenied, "permission denied: %s typed at a shell prompt cannot be checked (the shell would edit the line), so nothing was written. "+
					"Send the complete command line instead, ending with \"\\n\"", bad)
			}
		}
	}
	return a, nil
}

// classify says who reads the session's input now.
func classify(e *Entry) (string, terminal.Foreground) {
	fg := e.Session.Foreground()
	switch {
	case e.Session.EchoOff():
		return inputHidden, fg
	case fg.Shell || !fg.Known():
		return inputShell, fg // unknown: checked as shell input, the stricter
	}
	return inputProgram, fg
}

// shellInput applies chars to the line being typed as a shell's line
// editor would, and returns the lines they complete (each ending in "\n",
// to be checked before they are written), the new unfinished line, and,
// when chars hold a key whose effect on the line cannot be known (Tab,
// arrows and other escape sequences, Ctrl-A, Ctrl-R, ...), its name.
func shellInput(pending []byte, chars string) (lines string, rest []byte, bad string) {
	cur := []rune(string(pending))
	var b strings.Builder
	for _, r := range chars {
		switch {
		case r == '\r' || r == '\n':
			b.WriteString(string(cur))
			b.WriteByte('\n')
			cur = cur[:0]
		case r == 0x03 || r == 0x15: // Ctrl-C, Ctrl-U: the line is dropped
			cur = cur[:0]
		case r == 0x7f || r == 0x08: // erase
			if len(cur) > 0 {
				cur = cur[:len(cur)-1]
			}
		case r == 0x04: // Ctrl-D: ends the input; a line in progress is read as it is
			if len(cur) > 0 {
				b.WriteString(string(cur))
				b.WriteByte('\n')
				cur = cur[:0]
			}
		case r == 0x0c || r == 0x1a || r == 0x1c: // Ctrl-L, Ctrl-Z, Ctrl-\: the line is unchanged
		case r == '\t':
			return "", nil, "Tab (completion)"
		case r == 0x1b:
			return "", nil, "an escape sequence (arrow or function key)"
		case r < 0x20:
			return "", nil, "Ctrl-" + string(rune('@'+r))
		case r >= 0x80 && r <= 0x9f:
			return "", nil, fmt.Sprintf("the control character U+%04X", r)
		default:
			cur = append(cur, r)
		}
	}
	return b.String(), []byte(string(cur)), ""
}

type writeAction struct {
	t     *WriteStdin
	in    *WriteInput
	e     *Entry
	kind  string
	fg    terminal.Foreground
	lines string // inputShell: the lines this write completes
	rest  []byte
	seq   uint64
}

func (a *writeAction) Request() policy.Request {
	switch a.kind {
	case inputShell:
		shell := a.fg.Name
		if !a.fg.Known() || !terminal.IsShell(shell) || shell == "busybox" {
			shell = "bash"
		}
		return policy.Request{Command: a.lines, Shell: shell, Metadata: map[string]string{"session_input": inputShell, "session": a.e.ID}}
	case inputProgram, inputHidden:
		// The input goes in Metadata, which the audit log does not record,
		// for Preflight's typeahead check.
		return policy.Request{Metadata: map[string]string{"session_input": a.kind, "session": a.e.ID, "program": a.fg.Name,
			"sandboxed": strconv.FormatBool(a.e.Sandboxed), "input": a.in.Chars}}
	}
	return policy.Request{Metadata: map[string]string{"session": a.e.ID}}
}

func (a *writeAction) Run(ctx context.Context, call *tool.Call) *tool.Result {
	started := time.Now()
	m, e := a.t.Sessions, a.e
	note := ""
	switch a.kind {
	case inputShell, inputProgram, inputHidden:
		if kind, fg := classify(e); kind != a.kind && e.Session.Result() == nil {
			return tool.Errorf(tool.KindExecution, "nothing was written: the program reading this session's input changed while the input was checked (now %s); send it again", fgName(fg))
		}
		e.inMu.Lock()
		if a.kind == inputShell && e.inSeq != a.seq {
			e.inMu.Unlock()
			return tool.Errorf(tool.KindExecution, "nothing was written: another write to this session happened while this one was checked; send it again")
		}
		n, err := e.Session.Write([]byte(a.in.Chars))
		if n > 0 || err == nil {
			e.inSeq++
			if a.kind == inputShell {
				e.pending = a.rest
			} else {
				e.pending = nil
			}
		}
		if err == nil || err == terminal.ErrEnded || err == terminal.ErrInputBlocked {
			// Recorded before inMu is released: the session's end event
			// waits for inMu, so input that made the program exit is never
			// logged after that exit.
			m.emit(e, "session.input", func(ev *audit.Event) {
				ev.CallID, ev.Tool, ev.InputBytes, ev.Decision = call.ID, WriteStdinName, n, "allow"
				switch a.kind {
				case inputShell:
					ev.Command, ev.Reason = a.in.Chars, "typed into "+fgName(a.fg)+"; lines checked as shell commands"
				case inputProgram:
					ev.Command, ev.Reason = a.in.Chars, "typed into "+fgName(a.fg)+" (not a shell)"
				case inputHidden:
					ev.Reason = "typed with the terminal's echo off (a password prompt): only its length is recorded"
				}
			})
		}
		e.inMu.Unlock()
		switch err {
		case nil:
		case terminal.ErrEnded:
			// answered below with the exit code and the remaining output
		case terminal.ErrInputBlocked:
			note = fmt.Sprintf("[only %d of %d bytes were written: the program is not reading its input]\n", n, len(a.in.Chars))
		default:
			return tool.Errorf(tool.KindExecution, "write_stdin: %v", err)
		}
	}
	if a.kind != inputEnded {
		wait(ctx, e, started.Add(a.in.Yield), a.kind == inputPoll)
	}
	res := m.answer(e, started, a.in.MaxOutputTokens)
	if note != "" {
		res.Text = note + res.Text
	}
	return res
}

func fgName(fg terminal.Foreground) string {
	if !fg.Known() {
		return "an unknown program"
	}
	return fg.Name
}
