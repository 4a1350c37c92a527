package unifiedexec

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/sandbox"
	"github.com/agentexec/agentexec/terminal"
	"github.com/agentexec/agentexec/tool"
)

// ExecCommand is the exec_command tool. Its zero value is not usable: it
// needs Sessions.
type ExecCommand struct {
	// Sessions holds the sessions the tool starts.
	Sessions *Manager
	// Shell runs cmd when the call names none; empty means bash.
	Shell string
	// Env is the commands' environment; nil means runner.SafeEnv().
	Env []string
	// Grace is the time between SIGTERM and SIGKILL when a session is
	// ended; zero means the runner's default.
	Grace time.Duration
	// Sandbox confines every session (nil: not at all).
	Sandbox *sandbox.Spec
	// RingSize is how much of each session's newest output is kept;
	// zero means terminal.DefaultRingSize (1 MiB).
	RingSize int
	// Checks are the tool's own checks of cmd, besides the registry's.
	Checks []policy.Checker
}

// Name returns "exec_command".
func (*ExecCommand) Name() string { return ExecCommandName }

// Description tells the model how to use the tool.
func (*ExecCommand) Description(call *tool.Call) string {
	return `Runs a command in a shell (` + "`<shell> -c <cmd>`" + `) and returns its output. It waits until the command exits or yield_time_ms passes, whichever comes first; a command still running then keeps running as a session: the answer gives its session ID, and write_stdin sends it input or polls its output.

- tty=false (default): stdout and stderr on one pipe, stdin closed (a program that reads input gets end-of-file at once). pipe_stdin=true keeps a stdin pipe open for write_stdin without a terminal.
- tty=true: a pseudo-terminal, for REPLs, prompts, debuggers, ssh and installers that need one. Output is shown as a screen would show it (colours and cursor movement removed).
- login=true runs a login shell, which reads the profile files first: slower, only when the command needs that environment.
- The answer starts with "Wall time", then "Process exited with code N" or "Process running with session ID ID", then "Output:".
- Output above max_output_tokens (about 4 bytes each) is cut in the middle, saying how much.
- End sessions you no longer need: session_kill, or write_stdin with "\u0003" (Ctrl-C) or "\u0004" (Ctrl-D). Idle sessions end after 30 minutes.

<pwd>` + call.Dir() + `</pwd>`
}

var execSchema = json.RawMessage(`{
  "type": "object",
  "required": ["cmd"],
  "properties": {
    "cmd": {"type": "string", "description": "Shell command to run."},
    "workdir": {"type": "string", "description": "Working directory (absolute, or relative to the current one); defaults to the current one."},
    "shell": {"type": "string", "description": "Shell to run cmd with; defaults to bash."},
    "tty": {"type": "boolean", "description": "Run on a pseudo-terminal (for interactive programs). Default false: pipes, stdin closed."},
    "pipe_stdin": {"type": "boolean", "description": "Without tty: keep stdin open as a pipe that write_stdin writes to. Default false."},
    "yield_time_ms": {"type": "number", "description": "How long to wait for the command before returning its session ID (250 to 30000; default 10000)."},
    "max_output_tokens": {"type": "number", "description": "Maximum output to return, in tokens of about 4 bytes (default 10000)."},
    "login": {"type": "boolean", "description": "Run a login shell that reads profile files (slower). Default false."}
  },
  "additionalProperties": false
}`)

// InputSchema returns the tool's schema.
func (*ExecCommand) InputSchema() json.RawMessage { return execSchema }

// Annotations describes the tool for clients.
func (*ExecCommand) Annotations() tool.Annotations {
	return tool.Annotations{Title: "Run a command, interactively if needed", Destructive: true, OpenWorld: true}
}

// Preflight runs the tool's own checks.
func (t *ExecCommand) Preflight(r policy.Request) policy.Decision {
	return policy.CheckAll(r, t.Checks...)
}

// Shells are the shells the shell field may name: the policy checks cmd as
// shell source, so cmd must be read by a shell that reads it that way.
var Shells = []string{"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash"}

// ExecInput is a validated exec_command call.
type ExecInput struct {
	Cmd, Workdir, Shell   string
	TTY, PipeStdin, Login bool
	Yield                 time.Duration
	MaxOutputTokens       int
}

func vErr(field, format string, args ...any) *tool.ValidationError {
	return &tool.ValidationError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// boolArg reads an optional boolean.
func boolArg(a *tool.Args, field string) (bool, *tool.ValidationError) {
	v, ok := a.Bool(field)
	if !ok && a.Has(field) {
		return false, vErr(field, "must be true or false")
	}
	return v, nil
}

// millis reads an optional number of milliseconds and clamps it.
func millis(a *tool.Args, field string, def, lo, hi time.Duration) (time.Duration, *tool.ValidationError) {
	f, ok, err := a.Number(field, tool.NumberRule{Fractions: true})
	if err != nil {
		return 0, err.(*tool.ValidationError)
	}
	d := def
	if ok {
		if f < 0 {
			return 0, vErr(field, "must not be negative")
		}
		d = time.Duration(min(f, 1e9) * float64(time.Millisecond))
	}
	return min(max(d, lo), hi), nil
}

// tokens reads max_output_tokens.
func tokens(a *tool.Args) (int, *tool.ValidationError) {
	f, ok, err := a.Number("max_output_tokens", tool.NumberRule{})
	if err != nil {
		return 0, err.(*tool.ValidationError)
	}
	if !ok {
		return DefaultMaxOutputTokens, nil
	}
	if f < 1 {
		return 0, vErr("max_output_tokens", "must be at least 1")
	}
	return int(min(f, 1<<28)), nil
}

// DecodeExec validates raw input.
func DecodeExec(raw json.RawMessage) (*ExecInput, *tool.ValidationError) {
	a, err := tool.ParseArgs(raw, "cmd", "workdir", "shell", "tty", "pipe_stdin", "yield_time_ms", "max_output_tokens", "login")
	if err != nil {
		return nil, err.(*tool.ValidationError)
	}
	in := &ExecInput{}
	var ok bool
	if in.Cmd, ok, err = a.String("cmd"); err != nil {
		return nil, err.(*tool.ValidationError)
	}
	if !ok || strings.TrimSpace(in.Cmd) == "" {
		return nil, vErr("cmd", "is required and cannot be empty")
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"cmd", &in.Cmd}, {"workdir", &in.Workdir}, {"shell", &in.Shell}} {
		if f.name != "cmd" {
			if *f.dst, _, err = a.String(f.name); err != nil {
				return nil, err.(*tool.ValidationError)
			}
		}
		if err := tool.CheckArgString(f.name, *f.dst); err != nil {
			return nil, err.(*tool.ValidationError)
		}
	}
	if in.Shell != "" && !slices.Contains(Shells, filepath.Base(in.Shell)) {
		return nil, vErr("shell", "must be one of %s (a name, or a path to one of them); got %q. To run another interpreter, put it in cmd", strings.Join(Shells, ", "), shorten(in.Shell, 40))
	}
	var verr *tool.ValidationError
	if in.TTY, verr = boolArg(a, "tty"); verr != nil {
		return nil, verr
	}
	if in.PipeStdin, verr = boolArg(a, "pipe_stdin"); verr != nil {
		return nil, verr
	}
	if in.Login, verr = boolArg(a, "login"); verr != nil {
		return nil, verr
	}
	if in.Yield, verr = millis(a, "yield_time_ms", DefaultYield, MinYield, MaxYield); verr != nil {
		return nil, verr
	}
	if in.MaxOutputTokens, verr = tokens(a); verr != nil {
		return nil, verr
	}
	return in, nil
}

// Prepare validates the input.
func (t *ExecCommand) Prepare(call *tool.Call, raw json.RawMessage) (tool.Action, *tool.Result) {
	in, verr := DecodeExec(raw)
	if verr != nil {
		return nil, tool.Errorf(tool.KindValidation, "invalid input: %v", verr)
	}
	dir := call.Dir()
	if in.Workdir != "" {
		if filepath.IsAbs(in.Workdir) {
			dir = filepath.Clean(in.Workdir)
		} else {
			dir = filepath.Join(dir, in.Workdir)
		}
	}
	return &execAction{t: t, in: in, dir: dir}, nil
}

type execAction struct {
	t   *ExecCommand
	in  *ExecInput
	dir string
}

func (a *execAction) shell() string {
	switch {
	case a.in.Shell != "":
		return a.in.Shell
	case a.t.Shell != "":
		return a.t.Shell
	}
	return "bash"
}

func (a *execAction) Request() policy.Request {
	return policy.Request{Command: a.in.Cmd, Shell: filepath.Base(a.shell()), Cwd: a.dir}
}

func (a *execAction) Run(ctx context.Context, call *tool.Call) *tool.Result {
	started := time.Now()
	m := a.t.Sessions
	if err := m.reserve(call.Conversation); err != nil {
		return tool.Errorf(tool.KindExecution, "%v", err)
	}
	wrap, label, err := a.t.Sandbox.Hook()
	if err != nil {
		m.release(call.Conversation)
		return tool.Errorf(tool.KindExecution, "exec_command: %v", err)
	}
	ring := a.t.RingSize
	if ring <= 0 {
		ring = terminal.DefaultRingSize
	}
	s, err := terminal.Start(terminal.Spec{
		Command: a.in.Cmd, Shell: a.shell(), Login: a.in.Login, Dir: a.dir, Env: a.t.Env,
		TTY: a.in.TTY, PipeStdin: a.in.PipeStdin && !a.in.TTY, Grace: a.t.Grace, Wrap: wrap, RingSize: ring,
	})
	if err != nil {
		m.release(call.Conversation)
		return startFailure(err)
	}
	e := &Entry{Conversation: call.Conversation, Command: a.in.Cmd, Dir: a.dir, Sandbox: label, Sandboxed: a.t.Sandbox.Enabled(), Session: s, ring: ring}
	m.add(e)
	m.emit(e, "session.started", func(ev *audit.Event) {
		ev.CallID, ev.Tool, ev.Command, ev.Cwd = call.ID, ExecCommandName, a.in.Cmd, a.dir
		if a.in.TTY {
			ev.Reason = "tty"
		} else if a.in.PipeStdin {
			ev.Reason = "pipes, stdin open"
		} else {
			ev.Reason = "pipes, stdin closed"
		}
	})
	wait(ctx, e, started.Add(a.in.Yield), false)
	if ctx.Err() != nil && s.Result() == nil {
		// The call was cancelled before the command ended or yielded:
		// the model never learns the session's id, so end it.
		m.Kill(e.ID, e.Conversation)
		res := m.answer(e, started, a.in.MaxOutputTokens)
		res.Text = "[command cancelled]\n" + res.Text
		res.IsError, res.Kind = true, tool.KindCancelled
		return res
	}
	return m.answer(e, started, a.in.MaxOutputTokens)
}
