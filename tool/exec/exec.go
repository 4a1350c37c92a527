// Package exec is the "exec" tool of seed 000 (an Android agent app's shell
// tool): a command string run with sh -c, a timeout in seconds (default 30,
// clamped to 1..120), an optional working directory, and stdout and stderr
// each cut to max_length characters (default 50,000), answered in the
// seed's text format:
//
//	[Exit Code: 0]
//
//	<stdout>
//
//	[stderr]
//	<stderr>
//
// Unlike the seed's Android code, a timeout ends the command's whole
// process tree, and truncation never blocks the command: output past the
// limit is read and counted, and the text says how much was cut.
package exec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentexec/agentexec/capture"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/sandbox"
	"github.com/agentexec/agentexec/tool"
)

// The seed's numbers.
const (
	Name                  = "exec"
	DefaultTimeoutSeconds = 30
	MaxTimeoutSeconds     = 120
	DefaultMaxLength      = 50_000
	// MaxMaxLength bounds max_length so that memory stays bounded whatever
	// the model asks for (the seed has no upper bound).
	MaxMaxLength = 1_000_000
)

// Tool is the exec tool. The zero value runs with sh, the runner's safe
// environment and its default grace period.
type Tool struct {
	// Shell replaces "sh" when set.
	Shell string
	// Env is the commands' environment; nil means runner.SafeEnv().
	Env []string
	// Grace is the time between SIGTERM and SIGKILL on timeout; zero means
	// the runner's default.
	Grace time.Duration
	// Sandbox confines commands (nil: not at all).
	Sandbox *sandbox.Spec
}

// New returns the tool with its defaults.
func New() *Tool { return &Tool{} }

// Name returns "exec".
func (*Tool) Name() string { return Name }

// Description returns the seed's description.
func (*Tool) Description(*tool.Call) string {
	return "Execute a shell command on the device and return its output"
}

var schema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The shell command to execute"},
    "timeout_seconds": {"type": "integer", "description": "Maximum execution time in seconds. Default: 30, Max: 120"},
    "working_directory": {"type": "string", "description": "Working directory for the command. Default: the workspace directory"},
    "max_length": {"type": "integer", "description": "Maximum output length in characters. Default: 50000"}
  },
  "required": ["command"]
}`)

// InputSchema returns the seed's parameter schema.
func (*Tool) InputSchema() json.RawMessage { return schema }

// Annotations describes the tool for clients.
func (*Tool) Annotations() tool.Annotations {
	return tool.Annotations{Title: "Run a shell command", Destructive: true, OpenWorld: true}
}

// Input is a validated call.
type Input struct {
	Command          string
	TimeoutSeconds   int
	WorkingDirectory string // absolute
	MaxLength        int
}

// Decode validates raw input as the seed's parser does (numbers as
// integers, floats or numeric strings; timeout clamped to 1..120;
// max_length at least 1) and stricter where the seed would misbehave:
// wrong types, unknown fields and NUL bytes are errors. workdir resolves a
// relative working_directory and is the default.
func Decode(raw json.RawMessage, workdir string) (*Input, *tool.ValidationError) {
	a, err := tool.ParseArgs(raw, "command", "timeout_seconds", "working_directory", "max_length")
	if err != nil {
		return nil, err.(*tool.ValidationError)
	}
	in := &Input{TimeoutSeconds: DefaultTimeoutSeconds, MaxLength: DefaultMaxLength, WorkingDirectory: workdir}
	cmd, _, err := a.String("command")
	if err != nil {
		return nil, err.(*tool.ValidationError)
	}
	in.Command = strings.TrimSpace(cmd)
	if in.Command == "" {
		return nil, &tool.ValidationError{Field: "command", Problem: "is required and cannot be empty"}
	}
	if err := tool.CheckArgString("command", in.Command); err != nil {
		return nil, err.(*tool.ValidationError)
	}
	lenient := tool.NumberRule{Strings: true, Fractions: true}
	if f, ok, err := a.Number("timeout_seconds", lenient); err != nil {
		return nil, err.(*tool.ValidationError)
	} else if ok {
		in.TimeoutSeconds = int(min(max(tool.Saturate(f), 1), MaxTimeoutSeconds))
	}
	if f, ok, err := a.Number("max_length", lenient); err != nil {
		return nil, err.(*tool.ValidationError)
	} else if ok {
		in.MaxLength = int(min(max(tool.Saturate(f), 1), MaxMaxLength))
	}
	dir, ok, err := a.String("working_directory")
	if err != nil {
		return nil, err.(*tool.ValidationError)
	}
	if ok {
		if strings.IndexByte(dir, 0) >= 0 {
			return nil, &tool.ValidationError{Field: "working_directory", Problem: "contains a NUL byte"}
		}
		path := dir
		if !filepath.IsAbs(path) {
			path = filepath.Join(workdir, path)
		}
		if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
			return nil, &tool.ValidationError{Field: "working_directory", Problem: "Working directory does not exist: " + dir}
		}
		in.WorkingDirectory = filepath.Clean(path)
	}
	return in, nil
}

// validationResult words a validation error as the seed does.
func validationResult(e *tool.ValidationError) *tool.Result {
	switch {
	case e.Field == "working_directory" && strings.HasPrefix(e.Problem, "Working directory"):
		return tool.Errorf(tool.KindValidation, "%s", e.Problem)
	case e.Field == "command" && e.Problem == "is required and cannot be empty":
		return tool.Errorf(tool.KindValidation, "Parameter 'command' is required and cannot be empty")
	case e.Field == "":
		return tool.Errorf(tool.KindValidation, "Invalid parameters: %s", e.Problem)
	}
	return tool.Errorf(tool.KindValidation, "Parameter '%s' %s", e.Field, e.Problem)
}

// Prepare validates the input.
func (t *Tool) Prepare(call *tool.Call, raw json.RawMessage) (tool.Action, *tool.Result) {
	in, verr := Decode(raw, call.Dir())
	if verr != nil {
		return nil, validationResult(verr)
	}
	return &action{t: t, in: in}, nil
}

type action struct {
	t  *Tool
	in *Input
}

func (a *action) Request() policy.Request {
	shell := a.t.Shell
	if shell == "" {
		shell = "sh"
	}
	return policy.Request{Command: a.in.Command, Shell: shell, Cwd: a.in.WorkingDirectory}
}

func (a *action) Run(ctx context.Context, call *tool.Call) *tool.Result {
	in := a.in
	shell := a.t.Shell
	if shell == "" {
		shell = "sh"
	}
	lim := capture.Limit{Strategy: capture.Head, Unit: capture.Chars, Max: int64(in.MaxLength)}
	wrap, label, err := a.t.Sandbox.Hook()
	if err != nil {
		return tool.Errorf(tool.KindExecution, "Failed to start process: %v", err)
	}
	res, err := runner.Run(ctx, runner.Spec{
		Wrap:     wrap,
		Command:  in.Command,
		Shell:    shell,
		Dir:      in.WorkingDirectory,
		Env:      a.t.Env,
		Timeout:  time.Duration(in.TimeoutSeconds) * time.Second,
		Grace:    a.t.Grace,
		Stdout:   lim,
		Stderr:   lim,
		Combined: capture.Limit{Strategy: capture.Head, Max: 1},
		OnOutput: call.Outputter(),
	})
	if err != nil {
		return startFailure(err, in)
	}
	out := Output{
		ExitCode:       res.ExitCode,
		Stdout:         streamText(res.Stdout),
		Stderr:         streamText(res.Stderr),
		TimedOut:       res.TimedOut(),
		Cancelled:      res.Cancelled(),
		TimeoutSeconds: in.TimeoutSeconds,
	}
	if !out.TimedOut && !out.Cancelled {
		out.Leftovers = res.LeftoversKilled
	}
	if res.Signal != 0 && !out.TimedOut && !out.Cancelled {
		out.ExitCode = 128 + res.Signal // what the seed's JVM reports
	}
	r := &tool.Result{Text: out.Format(), Run: tool.RunInfoFrom(res, res.Stdout.Truncated || res.Stderr.Truncated)}
	r.Run.Sandbox = label
	if out.Cancelled {
		r.IsError, r.Kind = true, tool.KindCancelled
	}
	return r
}

// streamText is a stream's kept text, with a line saying how much was cut.
func streamText(s capture.Snapshot) string {
	text := capture.ValidText(s.Head)
	if s.Truncated {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += fmt.Sprintf("[output truncated: showing the first %d of %d characters]", utf8.RuneCount(s.Head), s.TotalChars)
	}
	return text
}

func startFailure(err error, in *Input) *tool.Result {
	var se *runner.StartError
	if errors.As(err, &se) {
		switch {
		case errors.Is(se, runner.ErrPermission):
			return tool.Errorf(tool.KindPermissionError, "Permission denied: %v", err)
		case errors.Is(se, runner.ErrBadDir):
			return tool.Errorf(tool.KindValidation, "Working directory does not exist: %s", in.WorkingDirectory)
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return tool.Errorf(tool.KindCancelled, "[Exit Code: -1 (cancelled)]\n\nThe call was cancelled before the command started.")
	}
	return tool.Errorf(tool.KindExecution, "Failed to start process: %v", err)
}

// Output is what the seed's formatOutput takes.
type Output struct {
	ExitCode       int
	Stdout, Stderr string
	TimedOut       bool
	Cancelled      bool
	TimeoutSeconds int
	// Leftovers counts processes the command left running that were
	// stopped when it exited; when non-zero a note says so.
	Leftovers int
}

// Format renders o exactly as the seed's formatOutput does (with a
// cancelled variant of its timeout text, and a note about stopped
// leftovers), trailing white space trimmed.
func (o Output) Format() string {
	var b strings.Builder
	section := func(s string) {
		b.WriteString(s)
		if !strings.HasSuffix(s, "\n") {
			b.WriteString("\n")
		}
	}
	switch {
	case o.TimedOut:
		fmt.Fprintf(&b, "[Exit Code: -1 (timeout after %ds)]\n", o.TimeoutSeconds)
	case o.Cancelled:
		b.WriteString("[Exit Code: -1 (cancelled)]\n")
	default:
		fmt.Fprintf(&b, "[Exit Code: %d]\n", o.ExitCode)
	}
	if o.Stdout != "" {
		b.WriteString("\n")
		section(o.Stdout)
	}
	if o.Stderr != "" {
		b.WriteString("\n[stderr]\n")
		section(o.Stderr)
	}
	if o.TimedOut || o.Cancelled {
		if o.Stderr == "" {
			b.WriteString("\n[stderr]\n")
		}
		if o.TimedOut {
			fmt.Fprintf(&b, "Process killed after %d seconds timeout.\n", o.TimeoutSeconds)
		} else {
			b.WriteString("Process killed: the call was cancelled.\n")
		}
	}
	if o.Stdout == "" && o.Stderr == "" && !o.TimedOut && !o.Cancelled {
		b.WriteString("\n(no output)\n")
	}
	if o.Leftovers > 0 {
		fmt.Fprintf(&b, "\n[note: %d background process(es) the command started were stopped when it exited; this tool cannot keep processes running]\n", o.Leftovers)
	}
	return strings.TrimRightFunc(b.String(), isSpace)
}

// isSpace is Kotlin's trimEnd predicate (Char.isWhitespace): Unicode
// white space plus the four information separators.
func isSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }
