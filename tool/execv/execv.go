// Package execv is the "Exec" tool of seed 003 (an agent kernel's argv-only
// exec): no shell ever, an absolute argv[0], an environment scrubbed to a
// fixed safe list plus what the caller passes, per-stream tail truncation,
// a JSON result, and capability checks: the agent must hold the "Exec" tool
// grant and fs grants that cover argv[0] and cwd for reading.
//
// The tool is opt-in: nothing registers it unless the host calls Register.
package execv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentexec/agentexec/capture"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/sandbox"
	"github.com/agentexec/agentexec/tool"
)

// The seed's numbers.
const (
	Name                  = "Exec"
	DefaultTimeoutS       = 60
	MaxTimeoutS           = 600
	DefaultMaxOutputBytes = 256 << 10
	MinMaxOutputBytes     = 1 << 10
	MaxMaxOutputBytes     = 4 << 20
	// Grace is the seed's time between SIGTERM and SIGKILL.
	Grace = time.Second
)

// Limits are the seed's resource limits for one call (RFC 0008's
// SandboxPolicy). Every call runs under them (through package sandbox),
// with the configured profile's restrictions on top.
type Limits struct {
	CPUSeconds  int64
	MemoryBytes int64
	FsizeBytes  int64
	Nofile      int64
	WallSeconds float64
}

// SeedLimits returns the seed's limits for a call with timeout_s t.
func SeedLimits(t float64) Limits {
	return Limits{
		CPUSeconds:  max(int64(t+0.999999), 1),
		MemoryBytes: 512 << 20,
		FsizeBytes:  64 << 20,
		Nofile:      256,
		WallSeconds: t,
	}
}

// Tool is the Exec tool.
type Tool struct {
	// User is the USER value of the safe environment; empty means the
	// owner of this process.
	User string
	// Sandbox is the configured profile; every call runs under the
	// stricter of it and the seed's limits. Nil: the seed's limits alone.
	Sandbox *sandbox.Spec
}

// Register is the explicit opt-in (the seed's register_exec_tool): it adds
// Exec to r.
func Register(r *tool.Registry) error { return r.Register(&Tool{}) }

// Name returns "Exec".
func (*Tool) Name() string { return Name }

// Description tells the model what Exec is.
func (*Tool) Description(*tool.Call) string {
	return "Run a program directly, without a shell: argv[0] must be an absolute path, and arguments reach the program literally " +
		"(no expansion, no pipes, no redirection). The environment is a fixed safe list plus env. " +
		"Returns JSON with exit_code, stdout, stderr, stdout_truncated, stderr_truncated, duration_s and timed_out; " +
		"each stream keeps its last max_output_bytes."
}

var inputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "argv": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1,
             "description": "Program and arguments; argv[0] is an absolute path to an existing file"},
    "cwd": {"type": "string", "description": "Working directory; absolute"},
    "env": {"type": "object", "additionalProperties": {"type": "string"},
            "description": "Variables added to the safe environment; keys starting with _ are reserved"},
    "timeout_s": {"type": "number", "minimum": 1, "maximum": 600, "default": 60,
                  "description": "Wall-clock limit in seconds"},
    "max_output_bytes": {"type": "integer", "minimum": 1024, "maximum": 4194304, "default": 262144,
                         "description": "Bytes kept of each of stdout and stderr (the end is kept)"}
  },
  "required": ["argv"],
  "additionalProperties": false
}`)

var outputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "exit_code": {"type": "integer"},
    "stdout": {"type": "string"},
    "stderr": {"type": "string"},
    "stdout_truncated": {"type": "boolean"},
    "stderr_truncated": {"type": "boolean"},
    "duration_s": {"type": "number"},
    "timed_out": {"type": "boolean"}
  },
  "required": ["exit_code", "stdout", "stderr", "stdout_truncated", "stderr_truncated", "duration_s", "timed_out"]
}`)

// InputSchema returns the seed's argument schema.
func (*Tool) InputSchema() json.RawMessage { return inputSchema }

// OutputSchema returns the schema of Result.
func (*Tool) OutputSchema() json.RawMessage { return outputSchema }

// Annotations describes the tool for clients.
func (*Tool) Annotations() tool.Annotations {
	return tool.Annotations{Title: "Run a program (argv, no shell)", Destructive: true, OpenWorld: true, RequiresGrant: true}
}

// Input is a validated call.
type Input struct {
	Argv           []string
	Cwd            string // absolute; "" means the call's directory
	Env            map[string]string
	EnvKeys        []string // sorted
	TimeoutS       float64
	MaxOutputBytes int
}

// Decode validates raw input by every rule of the seed.
func Decode(raw json.RawMessage) (*Input, *tool.ValidationError) {
	verr := func(err error) (*Input, *tool.ValidationError) { return nil, err.(*tool.ValidationError) }
	a, err := tool.ParseArgs(raw, "argv", "cwd", "env", "timeout_s", "max_output_bytes")
	if err != nil {
		return verr(err)
	}
	in := &Input{TimeoutS: DefaultTimeoutS, MaxOutputBytes: DefaultMaxOutputBytes}
	argv, ok, err := a.StringList("argv")
	switch {
	case err != nil:
		return verr(err)
	case !ok:
		return nil, &tool.ValidationError{Field: "argv", Problem: "is required: a non-empty list of non-empty strings"}
	case len(argv) == 0:
		return nil, &tool.ValidationError{Field: "argv", Problem: "must not be empty"}
	}
	total := 0
	for i, s := range argv {
		field := "argv[" + strconv.Itoa(i) + "]"
		if s == "" {
			return nil, &tool.ValidationError{Field: field, Problem: "must not be empty"}
		}
		if err := tool.CheckArgString(field, s); err != nil {
			return verr(err)
		}
		total += len(s) + 1
	}
	if !filepath.IsAbs(argv[0]) {
		return nil, &tool.ValidationError{Field: "argv[0]", Problem: fmt.Sprintf("must be an absolute path (no PATH lookup); got %q", argv[0])}
	}
	switch fi, err := os.Stat(argv[0]); {
	case err != nil:
		return nil, &tool.ValidationError{Field: "argv[0]", Problem: fmt.Sprintf("%s does not exist", argv[0])}
	case !fi.Mode().IsRegular():
		return nil, &tool.ValidationError{Field: "argv[0]", Problem: fmt.Sprintf("%s is not a regular file", argv[0])}
	}
	in.Argv = argv

	if cwd, ok, err := a.String("cwd"); err != nil {
		return verr(err)
	} else if ok {
		if err := tool.CheckArgString("cwd", cwd); err != nil {
			return verr(err)
		}
		if !filepath.IsAbs(cwd) {
			return nil, &tool.ValidationError{Field: "cwd", Problem: fmt.Sprintf("must be an absolute path; got %q", cwd)}
		}
		if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
			return nil, &tool.ValidationError{Field: "cwd", Problem: fmt.Sprintf("%s is not a directory", cwd)}
		}
		in.Cwd = filepath.Clean(cwd)
	}

	env, keys, ok, err := a.StringMap("env")
	if err != nil {
		return verr(err)
	}
	if ok {
		for _, k := range keys {
			if strings.HasPrefix(k, "_") {
				return nil, &tool.ValidationError{Field: "env." + k, Problem: "keys starting with _ are reserved for the kernel"}
			}
		}
		n, err := tool.CheckEnv("env", env, keys)
		if err != nil {
			return verr(err)
		}
		total += n
		in.Env, in.EnvKeys = env, keys
	}
	if total > tool.MaxArgTotal {
		return nil, &tool.ValidationError{Field: "argv", Problem: fmt.Sprintf("arguments and environment total %d bytes; the limit is %d", total, tool.MaxArgTotal)}
	}

	if f, ok, err := a.Number("timeout_s", tool.NumberRule{Fractions: true}); err != nil {
		return verr(err)
	} else if ok {
		if f < 1 || f > MaxTimeoutS {
			return nil, &tool.ValidationError{Field: "timeout_s", Problem: fmt.Sprintf("must be between 1 and %d; got %v", MaxTimeoutS, f)}
		}
		in.TimeoutS = f
	}
	if f, ok, err := a.Number("max_output_bytes", tool.NumberRule{}); err != nil {
		return verr(err)
	} else if ok {
		if f < MinMaxOutputBytes || f > MaxMaxOutputBytes {
			return nil, &tool.ValidationError{Field: "max_output_bytes", Problem: fmt.Sprintf("must be between %d (1 KB) and %d (4 MB); got %v", MinMaxOutputBytes, MaxMaxOutputBytes, f)}
		}
		in.MaxOutputBytes = int(f)
	}
	return in, nil
}

// errorResult is the seed's tool_response for an error: kind and message,
// as JSON text and structured value.
func errorResult(k tool.ErrorKind, msg string) *tool.Result {
	v := map[string]string{"error": string(k), "message": msg}
	b, _ := json.Marshal(v)
	return &tool.Result{Text: string(b), Structured: v, IsError: true, Kind: k}
}

// Refuse words a refusal (missing grant, policy) as the seed's
// tool_response: {"error": "permission_denied", "message": ...}.
func (*Tool) Refuse(d policy.Decision) *tool.Result {
	return errorResult(tool.KindPermissionDenied, d.Message())
}

// Prepare checks the Exec grant, validates the input and checks fs grants.
func (t *Tool) Prepare(call *tool.Call, raw json.RawMessage) (tool.Action, *tool.Result) {
	if !call.Grants.HasTool(Name) {
		return nil, errorResult(tool.KindPermissionDenied, `the agent does not hold the "Exec" tool grant; Exec is only available to agents granted it explicitly. `+
			`The operator grants it with --grant-tool Exec (and --grant-fs r:/usr for the programs it may run), `+
			`or grants.tools = ["Exec"] and grants.fs = ["r:/usr"] in the agentexec configuration`)
	}
	in, verr := Decode(raw)
	if verr != nil {
		return nil, errorResult(tool.KindValidation, verr.Error())
	}
	if !call.Grants.CoversFS("r", in.Argv[0]) {
		return nil, errorResult(tool.KindFSDenied, fmt.Sprintf("the agent's fs grants do not allow reading %s (argv[0]); the operator grants it with --grant-fs r:PATH or grants.fs in the agentexec configuration", in.Argv[0]))
	}
	if in.Cwd != "" && !call.Grants.CoversFS("r", in.Cwd) {
		return nil, errorResult(tool.KindFSDenied, fmt.Sprintf("the agent's fs grants do not allow reading %s (cwd); the operator grants it with --grant-fs r:PATH or grants.fs in the agentexec configuration", in.Cwd))
	}
	dir := in.Cwd
	if dir == "" {
		dir = call.Dir()
	}
	return &Action{t: t, in: in, dir: dir, Limits: SeedLimits(in.TimeoutS)}, nil
}

// Action is a validated Exec call. Limits are the resource limits the seed
// asks for; the sandbox enforces them.
type Action struct {
	t      *Tool
	in     *Input
	dir    string
	Limits Limits
}

// Request describes the call for policy and audit.
func (a *Action) Request() policy.Request {
	resolved, _ := filepath.EvalSymlinks(a.in.Argv[0])
	return policy.Request{
		Executable: a.in.Argv[0], ResolvedPath: resolved, Args: a.in.Argv[1:], Cwd: a.dir, EnvKeys: a.in.EnvKeys,
	}
}

// Env returns the child's environment: the seed's safe list with the
// caller's env on top.
func (a *Action) Env() []string {
	username := a.t.User
	if username == "" {
		username = currentUser()
	}
	base := [][2]string{
		{"PATH", "/usr/local/bin:/usr/bin:/bin"},
		{"HOME", "/tmp"},
		{"LANG", "C.UTF-8"},
		{"LC_ALL", "C.UTF-8"},
		{"USER", username},
		{"TERM", "dumb"},
		{"SHELL", "/bin/sh"},
	}
	env := make([]string, 0, len(base)+len(a.in.EnvKeys))
	for _, kv := range base {
		if _, over := a.in.Env[kv[0]]; !over {
			env = append(env, kv[0]+"="+kv[1])
		}
	}
	for _, k := range a.in.EnvKeys {
		env = append(env, k+"="+a.in.Env[k])
	}
	return env
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}

// Result is the seed's result object.
type Result struct {
	ExitCode        int     `json:"exit_code"`
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	StdoutTruncated bool    `json:"stdout_truncated"`
	StderrTruncated bool    `json:"stderr_truncated"`
	DurationS       float64 `json:"duration_s"`
	TimedOut        bool    `json:"timed_out"`
}

// Run runs the program: SIGTERM, 1 s grace, SIGKILL to its group on
// timeout.
func (a *Action) Run(ctx context.Context, call *tool.Call) *tool.Result {
	lim := capture.Limit{Strategy: capture.Tail, Max: int64(a.in.MaxOutputBytes)}
	spec := sandbox.Spec{Name: "Exec", CPUSeconds: a.Limits.CPUSeconds, MemoryBytes: a.Limits.MemoryBytes,
		FileSizeBytes: a.Limits.FsizeBytes, OpenFiles: a.Limits.Nofile}
	if a.t.Sandbox != nil && a.t.Sandbox.Enabled() {
		spec = sandbox.Stricter(*a.t.Sandbox, spec)
		spec.Name = a.t.Sandbox.Name + "+Exec limits"
	}
	wrap, label, err := spec.Hook()
	if err != nil {
		return errorResult(tool.KindExecution, err.Error())
	}
	res, err := runner.Run(ctx, runner.Spec{
		Wrap:     wrap,
		Argv:     a.in.Argv,
		Dir:      a.dir,
		Env:      a.Env(),
		Timeout:  time.Duration(a.in.TimeoutS * float64(time.Second)),
		Grace:    Grace,
		Stdout:   lim,
		Stderr:   lim,
		Combined: capture.Limit{Strategy: capture.Tail, Max: 1},
		OnOutput: call.Outputter(),
	})
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return errorResult(tool.KindCancelled, "the call was cancelled before the program started")
		}
		k := tool.KindExecution
		if errors.Is(err, runner.ErrPermission) {
			k = tool.KindPermissionError
		}
		return errorResult(k, err.Error())
	}
	out := Result{
		ExitCode:        res.ExitCode,
		Stdout:          capture.ValidText(res.Stdout.Head) + capture.ValidText(res.Stdout.Tail),
		Stderr:          capture.ValidText(res.Stderr.Head) + capture.ValidText(res.Stderr.Tail),
		StdoutTruncated: res.Stdout.Truncated,
		StderrTruncated: res.Stderr.Truncated,
		DurationS:       float64(res.Duration.Microseconds()) / 1e6,
		TimedOut:        res.TimedOut(),
	}
	if res.Signal != 0 {
		out.ExitCode = -res.Signal // as Python's subprocess reports it
	}
	b, _ := json.Marshal(out)
	r := &tool.Result{Text: string(b), Structured: out, Run: tool.RunInfoFrom(res, out.StdoutTruncated || out.StderrTruncated)}
	r.Run.Sandbox = label
	if res.Cancelled() {
		r.IsError, r.Kind = true, tool.KindCancelled
	}
	return r
}
