// Package bash is the "bash" tool of seed 001 (a coding agent's shell
// tool): a command run with bash -c in the call's working directory, in
// one of three modes: default (30 s timeout), slow (15 min) or background
// (detached, 24 h lifetime, returns the pid and an output file). Output is
// stdout and stderr combined in arrival order; above 128 KiB the middle is
// cut, keeping 4 KiB at each end. Texts follow the seed byte for byte:
//
//	[command failed: exit code 2]
//	<output>
//
//	[command timed out after 30s]
//	[command cancelled]
//
//	<pid>4242</pid>
//	<output_file>/run/user/1000/agentexec/jobs/.../output</output_file>
//	<reminder>To stop: kill -9 -4242</reminder>
//
// Before anything runs, the registry asks the policy; Checks are this
// tool's own checks (where seed 001's safety checker plugs in).
package bash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentexec/agentexec/capture"
	"github.com/agentexec/agentexec/jobs"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/sandbox"
	"github.com/agentexec/agentexec/tool"
)

// The seed's numbers.
const (
	Name              = "bash"
	DefaultTimeout    = 30 * time.Second
	SlowTimeout       = 15 * time.Minute
	BackgroundTimeout = 24 * time.Hour
	MaxOutputLength   = 128 << 10
	SnipSize          = 4 << 10
)

// Modes.
const (
	ModeDefault    = "default"
	ModeSlow       = "slow"
	ModeBackground = "background"
)

// Tool is the bash tool. The zero value uses bash, the runner's safe
// environment, the seed's timeouts and the default job manager.
type Tool struct {
	// Shell replaces "bash" when set.
	Shell string
	// Env is the commands' environment; nil means runner.SafeEnv().
	Env []string
	// Grace is the time between SIGTERM and SIGKILL; zero means the
	// runner's default.
	Grace time.Duration
	// Timeouts per mode; zero means the seed's (30 s, 15 min, 24 h).
	DefaultTimeout, SlowTimeout, BackgroundLifetime time.Duration
	// Jobs starts background commands; nil means a zero jobs.Manager.
	Jobs *jobs.Manager
	// DetachAfter, when not zero, lets a foreground command still running
	// after this long continue as a background job instead of being
	// killed at its timeout.
	DetachAfter time.Duration
	// Sandbox confines commands (nil: not at all).
	Sandbox *sandbox.Spec
	// Checks run before anything starts (seed 001's safety checker);
	// the registry combines them with its own policy.
	Checks []policy.Checker
}

// New returns the tool with its defaults.
func New() *Tool { return &Tool{} }

// Name returns "bash".
func (*Tool) Name() string { return Name }

// Description returns the seed's description template with the call's
// working directory.
func (*Tool) Description(call *tool.Call) string {
	return `Executes shell commands via bash -c, returning combined stdout/stderr.
Bash state changes (working dir, variables, aliases) don't persist between calls.

With mode="background", returns immediately with output redirected to a file.
Use background for servers/demos that need to stay running.

Use mode="slow" for potentially slow commands: builds, downloads,
installs, tests, or any other substantive operation.

IMPORTANT: Keep commands concise. The command input must be less than 60k tokens.
For complex scripts, write them to a file first and then execute the file.

<pwd>` + call.Dir() + `</pwd>`
}

var schema = json.RawMessage(`{
  "type": "object",
  "required": ["command"],
  "properties": {
    "command": {
      "type": "string",
      "description": "Shell command to execute via bash -c"
    },
    "mode": {
      "type": "string",
      "enum": ["default", "slow", "background"],
      "description": "Execution mode: default (30s timeout), slow (15min timeout), background (detached)"
    }
  }
}`)

// InputSchema returns the seed's schema.
func (*Tool) InputSchema() json.RawMessage { return schema }

// Annotations describes the tool for clients.
func (*Tool) Annotations() tool.Annotations {
	return tool.Annotations{Title: "Run a bash command", Destructive: true, OpenWorld: true}
}

// Preflight runs the tool's own checks.
func (t *Tool) Preflight(r policy.Request) policy.Decision {
	return policy.CheckAll(r, t.Checks...)
}

// Input is a validated call.
type Input struct {
	Command string
	Mode    string
}

// Decode validates raw input: command a non-empty string, mode one of the
// three (absent or null means default).
func Decode(raw json.RawMessage) (*Input, *tool.ValidationError) {
	a, err := tool.ParseArgs(raw, "command", "mode")
	if err != nil {
		return nil, err.(*tool.ValidationError)
	}
	cmd, ok, err := a.String("command")
	if err != nil {
		return nil, err.(*tool.ValidationError)
	}
	if !ok || strings.TrimSpace(cmd) == "" {
		return nil, &tool.ValidationError{Field: "command", Problem: "is required and cannot be empty"}
	}
	if err := tool.CheckArgString("command", cmd); err != nil {
		return nil, err.(*tool.ValidationError)
	}
	in := &Input{Command: cmd, Mode: ModeDefault}
	mode, ok, err := a.String("mode")
	if err != nil {
		return nil, err.(*tool.ValidationError)
	}
	if ok {
		switch mode {
		case ModeDefault, ModeSlow, ModeBackground:
			in.Mode = mode
		default:
			return nil, &tool.ValidationError{Field: "mode", Problem: fmt.Sprintf("must be one of default, slow, background; got %q", shorten(mode, 40))}
		}
	}
	return in, nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Prepare validates the input.
func (t *Tool) Prepare(call *tool.Call, raw json.RawMessage) (tool.Action, *tool.Result) {
	in, verr := Decode(raw)
	if verr != nil {
		return nil, tool.Errorf(tool.KindValidation, "invalid input: %v", verr)
	}
	return &action{t: t, in: in, dir: call.Dir()}, nil
}

type action struct {
	t   *Tool
	in  *Input
	dir string
}

func (a *action) shell() string {
	if a.t.Shell != "" {
		return a.t.Shell
	}
	return "bash"
}

func (a *action) Request() policy.Request {
	return policy.Request{Command: a.in.Command, Shell: a.shell(), Cwd: a.dir, Background: a.in.Mode == ModeBackground}
}

func (a *action) Run(ctx context.Context, call *tool.Call) *tool.Result {
	if a.in.Mode == ModeBackground {
		return a.background(ctx, call)
	}
	timeout := pick(a.t.DefaultTimeout, DefaultTimeout)
	if a.in.Mode == ModeSlow {
		timeout = pick(a.t.SlowTimeout, SlowTimeout)
	}
	if a.t.DetachAfter > 0 {
		return a.detachable(ctx, call, timeout)
	}
	wrap, label, err := a.t.Sandbox.Hook()
	if err != nil {
		return tool.Errorf(tool.KindExecution, "%v", err)
	}
	one := capture.Limit{Strategy: capture.Tail, Max: 1}
	res, err := runner.Run(ctx, runner.Spec{
		Wrap:        wrap,
		Command:     a.in.Command,
		Shell:       a.shell(),
		Dir:         a.dir,
		Env:         a.t.Env,
		Timeout:     timeout,
		Grace:       a.t.Grace,
		Stdout:      one,
		Stderr:      one,
		Combined:    combinedLimit,
		MergeOutput: true,
		OnOutput:    call.Outputter(),
	})
	if err != nil {
		return startFailure(err)
	}
	r := render(res, res.Combined, timeout)
	r.Run.Sandbox = label
	return r
}

// combinedLimit is the seed's 128 KiB with 4 KiB kept at each end.
var combinedLimit = capture.Limit{Strategy: capture.Middle, Max: MaxOutputLength, HeadKeep: SnipSize, TailKeep: SnipSize}

// render words a finished foreground run as the seed does.
func render(res *runner.Result, combined capture.Snapshot, timeout time.Duration) *tool.Result {
	output := FormatOutput(combined)
	r := &tool.Result{Run: tool.RunInfoFrom(res, combined.Truncated)}
	switch {
	case res.Cancelled():
		r.Text, r.IsError, r.Kind = withOutput("[command cancelled]", output), true, tool.KindCancelled
	case res.TimedOut():
		r.Text, r.IsError, r.Kind = withOutput(fmt.Sprintf("[command timed out after %s]", RustDuration(timeout)), output), true, tool.KindTimeout
	case res.Outcome == runner.Signaled:
		r.Text = fmt.Sprintf("[command failed: exit code -1 (killed by signal %d)]\n%s", res.Signal, output)
		r.IsError, r.Kind = true, tool.KindCommandFailed
	case res.ExitCode != 0:
		r.Text = fmt.Sprintf("[command failed: exit code %d]\n%s", res.ExitCode, output)
		r.IsError, r.Kind = true, tool.KindCommandFailed
	default:
		r.Text = output
	}
	if res.LeftoversKilled > 0 && !res.TimedOut() && !res.Cancelled() {
		r.Text += fmt.Sprintf("\n\n[note: %d background process(es) this command started were stopped when it exited. "+
			"To keep a server or other long-running process alive, run it with mode=\"background\".]", res.LeftoversKilled)
	}
	return r
}

// detachable runs a foreground command that detaches into a job when it
// is still running after DetachAfter (seed 004's
// ForegroundThenDetachAfter): the model then gets the output so far and
// the job's id, and the job tools take over. A command that ends before
// is answered as any foreground command, and leaves no job behind.
func (a *action) detachable(ctx context.Context, call *tool.Call, timeout time.Duration) *tool.Result {
	m := a.t.Jobs
	if m == nil {
		m = &jobs.Manager{}
	}
	buf, _ := capture.New(combinedLimit)
	var mu sync.Mutex
	forward := call.Outputter()
	job, err := m.StartAttached(jobs.Spec{
		Command: a.in.Command, Shell: a.shell(), Dir: a.dir, Env: a.t.Env,
		Lifetime: pick(a.t.BackgroundLifetime, BackgroundTimeout), Grace: a.t.Grace,
		Tool: Name, Conversation: call.Conversation, Sandbox: a.t.Sandbox,
	}, false, func(st runner.Stream, b []byte) {
		mu.Lock()
		buf.Write(b)
		mu.Unlock()
		if forward != nil {
			forward(st, b)
		}
	})
	if err != nil {
		return startFailure(err)
	}
	snapshot := func() capture.Snapshot {
		mu.Lock()
		defer mu.Unlock()
		s := buf.Snapshot()
		s.Head, s.Tail = append([]byte(nil), s.Head...), append([]byte(nil), s.Tail...)
		return s
	}
	how := job.Await(ctx, a.t.DetachAfter, timeout)
	if how == jobs.Detached {
		return &tool.Result{
			Text: fmt.Sprintf("[command still running after %s; it continues in the background as job %s]\n%s\n\n%s",
				RustDuration(a.t.DetachAfter), job.ID, FormatOutput(snapshot()), DetachedText(job.ID, job.Pid, job.OutputFile)),
			Run: &tool.RunInfo{Pid: job.Pid, Outcome: "detached", Background: true, Sandbox: a.t.Sandbox.Label(), JobID: job.ID},
		}
	}
	res, err := job.Result()
	m.Remove(job.ID, "") // never seen by the model: leave no job behind
	if err != nil {
		return startFailure(err)
	}
	switch how {
	case jobs.TimedOut:
		res.Outcome = runner.TimedOut
	case jobs.Cancelled:
		res.Outcome = runner.Cancelled
	}
	r := render(res, snapshot(), timeout)
	r.Run.Sandbox = a.t.Sandbox.Label()
	return r
}

// DetachedText tells the model how to follow a detached command.
func DetachedText(id string, pid int, outputFile string) string {
	return fmt.Sprintf("<job_id>%s</job_id>\n<pid>%d</pid>\n<output_file>%s</output_file>\n"+
		"<reminder>job_output, job_wait and job_kill take job_id=%q. To stop it: kill -9 -%d</reminder>", id, pid, outputFile, id, pid)
}

// withOutput adds the output captured before a timeout or cancellation
// after the seed's one-line text.
func withOutput(line, output string) string {
	if output == "" {
		return line
	}
	return line + "\n" + output
}

func pick(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func startFailure(err error) *tool.Result {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return tool.Errorf(tool.KindCancelled, "[command cancelled]")
	}
	return tool.Errorf(tool.KindExecution, "failed to start bash: %v", err)
}

// FormatOutput renders the combined output as the seed does: whole when
// it is at most 128 KiB, otherwise a header, the first and last 4 KiB (cut
// on rune boundaries) and "[snip]" between them.
func FormatOutput(s capture.Snapshot) string {
	if !s.Truncated {
		return capture.ValidText(s.Head)
	}
	return fmt.Sprintf("[output truncated in middle: got %s, max is %s]\n%s\n\n[snip]\n\n%s",
		HumanizeBytes(s.TotalBytes), HumanizeBytes(MaxOutputLength), capture.ValidText(s.Head), capture.ValidText(s.Tail))
}

// HumanizeBytes writes a size in binary units: "512 B", "128 KiB" (exact),
// "128.0 KiB" (a little more), "1.5 MiB", "2.3 GiB".
func HumanizeBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if f == float64(int64(f)) && n%(1<<(10*i)) == 0 {
		return strconv.FormatInt(int64(f), 10) + " " + units[i]
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + units[i]
}

// RustDuration writes d as Rust's Debug format for Duration does: "30s",
// "900s", "1.5s", "250ms".
func RustDuration(d time.Duration) string {
	switch {
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d < time.Second && d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	case d < time.Millisecond && d%time.Microsecond == 0:
		return strconv.FormatInt(int64(d/time.Microsecond), 10) + "µs"
	case d < time.Microsecond:
		return strconv.FormatInt(int64(d), 10) + "ns"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// background starts the command as a job and answers with its pid and
// output file.
func (a *action) background(ctx context.Context, call *tool.Call) *tool.Result {
	m := a.t.Jobs
	if m == nil {
		m = &jobs.Manager{}
	}
	job, err := m.Start(ctx, jobs.Spec{
		Command:      a.in.Command,
		Shell:        a.shell(),
		Dir:          a.dir,
		Env:          a.t.Env,
		Lifetime:     pick(a.t.BackgroundLifetime, BackgroundTimeout),
		Grace:        a.t.Grace,
		Tool:         Name,
		Conversation: call.Conversation,
		Sandbox:      a.t.Sandbox,
	})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return tool.Errorf(tool.KindCancelled, "[command cancelled]")
		}
		return tool.Errorf(tool.KindExecution, "failed to start background process: %v", err)
	}
	return &tool.Result{
		Text: BackgroundText(job.Pid, job.OutputFile),
		Run:  &tool.RunInfo{Pid: job.Pid, Outcome: "started", Background: true, Sandbox: a.t.Sandbox.Label(), JobID: job.ID},
	}
}

// BackgroundText is the seed's answer to a background call.
func BackgroundText(pid int, outputFile string) string {
	return fmt.Sprintf("<pid>%d</pid>\n<output_file>%s</output_file>\n<reminder>To stop: kill -9 -%d</reminder>", pid, outputFile, pid)
}
