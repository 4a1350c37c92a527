// Package shellexec is the "shell.exec" tool of seed 004 (an agent
// toolkit's process tool): an executable (a name looked up on PATH, or a
// path) with argv, cwd, env and timeout_ms, answered with the JSON object
// {stdout, stderr, success, exit_code}. Before anything is spawned, a
// permission request (executable, argv, cwd and the env keys, never the
// values) goes to the tool's CommandPolicy: allow_executables,
// deny_executables and require_approval_for_unknown, matched on the name
// and on the resolved path. Timeouts and cancellation are error results of
// their own.
package shellexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// Defaults.
const (
	Name = "shell.exec"
	// DefaultTimeout applies when timeout_ms is absent (the seed has no
	// default; a command without any bound could hang the agent).
	DefaultTimeout = 2 * time.Minute
	// MaxTimeout bounds timeout_ms.
	MaxTimeout = 24 * time.Hour
	// DefaultMaxOutput is what is kept of each stream; the middle of a
	// longer stream is replaced by a line saying how much was cut.
	DefaultMaxOutput = 256 << 10
)

// Tool is the shell.exec tool. The zero value allows every executable,
// uses the runner's safe environment and the defaults above.
type Tool struct {
	// Policy decides which executables may run.
	Policy policy.CommandPolicy
	// Env is the environment the input's env is added to; nil means
	// runner.SafeEnv().
	Env []string
	// Grace is the time between SIGTERM and SIGKILL; zero means the
	// runner's default.
	Grace time.Duration
	// DefaultTimeout replaces the package default when not zero.
	DefaultTimeout time.Duration
	// MaxOutput is what is kept of each stream, in bytes; zero means
	// DefaultMaxOutput.
	MaxOutput int64
	// DetachAfter, when not zero (and Jobs is set), lets a program still
	// running after this long continue as a background job instead of
	// being killed at its timeout.
	DetachAfter time.Duration
	// Jobs runs detached programs.
	Jobs *jobs.Manager
	// Sandbox confines programs (nil: not at all).
	Sandbox *sandbox.Spec
}

// New returns the tool with its defaults.
func New() *Tool { return &Tool{} }

// Name returns "shell.exec".
func (*Tool) Name() string { return Name }

// Description tells the model what the tool does.
func (t *Tool) Description(*tool.Call) string {
	return "Run a program with arguments, without a shell (no pipes, globbing or redirection): executable is a program name " +
		"looked up on PATH, or a path. Returns JSON {stdout, stderr, success, exit_code}. " +
		"A policy may refuse some programs or require the user's approval."
}

var inputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "executable": {"type": "string", "description": "Program to run"},
    "argv": {"type": "array", "items": {"type": "string"}, "description": "Command-line arguments"},
    "cwd": {"type": "string", "description": "Working directory"},
    "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Environment variables"},
    "timeout_ms": {"type": "integer", "minimum": 1, "description": "Timeout in milliseconds"}
  },
  "required": ["executable"],
  "additionalProperties": false
}`)

var outputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "stdout": {"type": "string"},
    "stderr": {"type": "string"},
    "success": {"type": "boolean"},
    "exit_code": {"type": ["integer", "null"]}
  },
  "required": ["stdout", "stderr", "success", "exit_code"]
}`)

// InputSchema returns the seed's input schema.
func (*Tool) InputSchema() json.RawMessage { return inputSchema }

// OutputSchema returns the schema of Output.
func (*Tool) OutputSchema() json.RawMessage { return outputSchema }

// Annotations describes the tool for clients.
func (*Tool) Annotations() tool.Annotations {
	return tool.Annotations{Title: "Run a program", Destructive: true, OpenWorld: true}
}

// Preflight applies the CommandPolicy.
func (t *Tool) Preflight(r policy.Request) policy.Decision { return t.Policy.Check(r) }

// Input is a validated call.
type Input struct {
	Executable string
	Argv       []string
	Cwd        string // absolute
	Env        map[string]string
	EnvKeys    []string // sorted
	Timeout    time.Duration
}

// Decode validates raw input. workdir is the default cwd and the base of a
// relative one.
func Decode(raw json.RawMessage, workdir string, maxTimeout time.Duration) (*Input, *tool.ValidationError) {
	verr := func(err error) (*Input, *tool.ValidationError) { return nil, err.(*tool.ValidationError) }
	a, err := tool.ParseArgs(raw, "executable", "argv", "cwd", "env", "timeout_ms")
	if err != nil {
		return verr(err)
	}
	in := &Input{Cwd: workdir}
	exe, ok, err := a.String("executable")
	switch {
	case err != nil:
		return verr(err)
	case !ok || exe == "":
		return nil, &tool.ValidationError{Field: "executable", Problem: "is required and cannot be empty"}
	}
	if err := tool.CheckArgString("executable", exe); err != nil {
		return verr(err)
	}
	in.Executable = exe
	total := len(exe) + 1
	argv, _, err := a.StringList("argv")
	if err != nil {
		return verr(err)
	}
	for i, s := range argv {
		if err := tool.CheckArgString("argv["+strconv.Itoa(i)+"]", s); err != nil {
			return verr(err)
		}
		total += len(s) + 1
	}
	in.Argv = argv
	if cwd, ok, err := a.String("cwd"); err != nil {
		return verr(err)
	} else if ok {
		if err := tool.CheckArgString("cwd", cwd); err != nil {
			return verr(err)
		}
		if !filepath.IsAbs(cwd) {
			cwd = filepath.Join(workdir, cwd)
		}
		if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
			return nil, &tool.ValidationError{Field: "cwd", Problem: fmt.Sprintf("%s is not an existing directory", cwd)}
		}
		in.Cwd = filepath.Clean(cwd)
	}
	env, keys, _, err := a.StringMap("env")
	if err != nil {
		return verr(err)
	}
	n, err := tool.CheckEnv("env", env, keys)
	if err != nil {
		return verr(err)
	}
	total += n
	in.Env, in.EnvKeys = env, keys
	if total > tool.MaxArgTotal {
		return nil, &tool.ValidationError{Field: "argv", Problem: fmt.Sprintf("arguments and environment total %d bytes; the limit is %d", total, tool.MaxArgTotal)}
	}
	if f, ok, err := a.Number("timeout_ms", tool.NumberRule{}); err != nil {
		return verr(err)
	} else if ok {
		if f < 1 || f > float64(maxTimeout/time.Millisecond) {
			return nil, &tool.ValidationError{Field: "timeout_ms", Problem: fmt.Sprintf("must be between 1 and %d; got %v", maxTimeout/time.Millisecond, f)}
		}
		in.Timeout = time.Duration(f) * time.Millisecond
	}
	return in, nil
}

// Prepare validates the input and resolves the executable.
func (t *Tool) Prepare(call *tool.Call, raw json.RawMessage) (tool.Action, *tool.Result) {
	in, verr := Decode(raw, call.Dir(), MaxTimeout)
	if verr != nil {
		return nil, tool.Errorf(tool.KindValidation, "invalid input: %v", verr)
	}
	if in.Timeout == 0 {
		in.Timeout = t.DefaultTimeout
		if in.Timeout == 0 {
			in.Timeout = DefaultTimeout
		}
	}
	a := &action{t: t, in: in, env: t.env(in)}
	a.path, a.resolved = resolve(in.Executable, in.Cwd, a.env)
	return a, nil
}

func (t *Tool) env(in *Input) []string {
	base := t.Env
	if base == nil {
		base = runner.SafeEnv()
	}
	env := make([]string, 0, len(base)+len(in.EnvKeys))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := in.Env[k]; !over {
			env = append(env, kv)
		}
	}
	for _, k := range in.EnvKeys {
		env = append(env, k+"="+in.Env[k])
	}
	return env
}

// resolve finds the executable as the child would: a path relative to cwd,
// or a name on the child's PATH. path is what to run (its base name kept,
// for multi-call programs); resolved has symlinks evaluated. Both are ""
// when nothing runnable was found.
func resolve(exe, cwd string, env []string) (path, resolved string) {
	if strings.Contains(exe, "/") {
		path = exe
		if !filepath.IsAbs(path) {
			path = filepath.Join(cwd, path)
		}
		path = filepath.Clean(path)
	} else {
		pathList := runner.DefaultPath
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				pathList = v
			}
		}
		for _, d := range filepath.SplitList(pathList) {
			if d == "" || !filepath.IsAbs(d) {
				continue
			}
			if fi, err := os.Stat(filepath.Join(d, exe)); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
				path = filepath.Join(d, exe)
				break
			}
		}
		if path == "" {
			return "", ""
		}
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return path, ""
	}
	return path, resolved
}

type action struct {
	t        *Tool
	in       *Input
	env      []string
	path     string
	resolved string
}

func (a *action) Request() policy.Request {
	return policy.Request{
		Executable: a.in.Executable, ResolvedPath: a.resolved, Args: a.in.Argv, Cwd: a.in.Cwd, EnvKeys: a.in.EnvKeys,
	}
}

// Output is the seed's result object. ExitCode is null when a signal
// killed the program.
type Output struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	Success  bool   `json:"success"`
	ExitCode *int   `json:"exit_code"`
}

func (a *action) Run(ctx context.Context, call *tool.Call) *tool.Result {
	if a.path == "" {
		return tool.Errorf(tool.KindExecution, "executable %q was not found on PATH; give its path, or check the name", a.in.Executable)
	}
	keep := a.t.MaxOutput
	if keep <= 0 {
		keep = DefaultMaxOutput
	}
	lim := capture.Limit{Strategy: capture.Middle, Max: keep, HeadKeep: keep / 2, TailKeep: keep / 2}
	if a.t.DetachAfter > 0 && a.t.Jobs != nil {
		return a.detachable(ctx, call, lim)
	}
	wrap, label, err := a.t.Sandbox.Hook()
	if err != nil {
		return tool.Errorf(tool.KindExecution, "cannot run %s: %v", a.in.Executable, err)
	}
	res, err := runner.Run(ctx, runner.Spec{
		Wrap:     wrap,
		Argv:     append([]string{a.path}, a.in.Argv...),
		Dir:      a.in.Cwd,
		Env:      a.env,
		Timeout:  a.in.Timeout,
		Grace:    a.t.Grace,
		Stdout:   lim,
		Stderr:   lim,
		Combined: capture.Limit{Strategy: capture.Tail, Max: 1},
		OnOutput: call.Outputter(),
	})
	if err != nil {
		return a.startFailure(err)
	}
	r := a.render(res, res.Stdout, res.Stderr)
	r.Run.Sandbox = label
	return r
}

func (a *action) startFailure(err error) *tool.Result {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return tool.Errorf(tool.KindCancelled, "shell.exec cancelled before %s started", a.in.Executable)
	case errors.Is(err, runner.ErrPermission), errors.Is(err, fs.ErrPermission):
		return tool.Errorf(tool.KindPermissionError, "cannot run %s: %v", a.in.Executable, err)
	}
	return tool.Errorf(tool.KindExecution, "cannot run %s: %v", a.in.Executable, err)
}

// render words a finished run: the seed's JSON, or the timeout and
// cancellation results.
func (a *action) render(res *runner.Result, stdout, stderr capture.Snapshot) *tool.Result {
	out := Output{Stdout: stdout.Text(), Stderr: stderr.Text()}
	if res.Signal == 0 && !res.TimedOut() && !res.Cancelled() {
		code := res.ExitCode
		out.ExitCode = &code
		out.Success = code == 0
	}
	b, _ := json.Marshal(out)
	r := &tool.Result{Text: string(b), Structured: out, Run: tool.RunInfoFrom(res, stdout.Truncated || stderr.Truncated)}
	switch {
	case res.TimedOut():
		r.Text = fmt.Sprintf("shell.exec timed out after %d ms; %s was killed. Output so far:\n%s", a.in.Timeout.Milliseconds(), a.in.Executable, b)
		r.IsError, r.Kind = true, tool.KindTimeout
	case res.Cancelled():
		r.Text = fmt.Sprintf("shell.exec cancelled; %s was killed. Output so far:\n%s", a.in.Executable, b)
		r.IsError, r.Kind = true, tool.KindCancelled
	}
	return r
}

// detachable runs the program as a job that detaches when it is still
// running after DetachAfter (seed 004's ForegroundThenDetachAfter); one
// that ends before is answered as usual and leaves no job behind.
func (a *action) detachable(ctx context.Context, call *tool.Call, lim capture.Limit) *tool.Result {
	outBuf, _ := capture.New(lim)
	errBuf, _ := capture.New(lim)
	var mu sync.Mutex
	forward := call.Outputter()
	job, err := a.t.Jobs.StartAttached(jobs.Spec{
		Argv: append([]string{a.path}, a.in.Argv...), Dir: a.in.Cwd, Env: a.env,
		Lifetime: jobs.DefaultLifetime, Grace: a.t.Grace, Tool: Name, Conversation: call.Conversation, Sandbox: a.t.Sandbox,
	}, true, func(st runner.Stream, b []byte) {
		mu.Lock()
		if st == runner.Stderr {
			errBuf.Write(b)
		} else {
			outBuf.Write(b)
		}
		mu.Unlock()
		if forward != nil {
			forward(st, b)
		}
	})
	if err != nil {
		return a.startFailure(err)
	}
	snapshots := func() (capture.Snapshot, capture.Snapshot) {
		mu.Lock()
		defer mu.Unlock()
		o, e := outBuf.Snapshot(), errBuf.Snapshot()
		o.Head, o.Tail = append([]byte(nil), o.Head...), append([]byte(nil), o.Tail...)
		e.Head, e.Tail = append([]byte(nil), e.Head...), append([]byte(nil), e.Tail...)
		return o, e
	}
	how := job.Await(ctx, a.t.DetachAfter, a.in.Timeout)
	if how == jobs.Detached {
		o, e := snapshots()
		b, _ := json.Marshal(Output{Stdout: o.Text(), Stderr: e.Text()})
		return &tool.Result{
			Text: fmt.Sprintf("shell.exec: %s is still running after %d ms; it continues in the background as job %s (pid %d). Output so far:\n%s\n"+
				"Use job_output, job_wait or job_kill with job_id=%q.", a.in.Executable, a.t.DetachAfter.Milliseconds(), job.ID, job.Pid, b, job.ID),
			Run: &tool.RunInfo{Pid: job.Pid, Outcome: "detached", Background: true, Sandbox: a.t.Sandbox.Label(), JobID: job.ID},
		}
	}
	res, err := job.Result()
	a.t.Jobs.Remove(job.ID, "")
	if err != nil {
		return a.startFailure(err)
	}
	switch how {
	case jobs.TimedOut:
		res.Outcome = runner.TimedOut
	case jobs.Cancelled:
		res.Outcome = runner.Cancelled
	}
	o, e := snapshots()
	r := a.render(res, o, e)
	if r.Run != nil {
		r.Run.Sandbox = a.t.Sandbox.Label()
	}
	return r
}
