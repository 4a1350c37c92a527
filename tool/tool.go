// Package tool defines what a tool is to agentexec, the per-call context it
// runs in, and the Registry that dispatches calls to tools: it checks the
// caller's grants, asks the policy (and, when the policy says ask, a
// person through the Approver), writes audit events, and returns a Result
// whose text is exactly what the model sees.
//
// A tool works in two steps. Prepare decodes and validates the raw JSON
// input and returns an Action describing what would run; nothing runs yet.
// The registry then decides, and only then calls Action.Run. A tool cannot
// forget to ask the policy, because it is never in charge of asking.
package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/runner"
)

// ErrorKind classifies an error result, for the model and for callers that
// branch on it. The values are the seeds' own words where a seed names one.
type ErrorKind string

// Error kinds.
const (
	// KindValidation: the input is malformed or out of range (seeds 000,
	// 003). Nothing ran.
	KindValidation ErrorKind = "validation_error"
	// KindPermissionDenied: the agent lacks a tool grant, or the policy
	// or a person refused the call (seed 003). Nothing ran.
	KindPermissionDenied ErrorKind = "permission_denied"
	// KindFSDenied: the agent's fs grants do not cover a path the call
	// needs (seed 003). Nothing ran.
	KindFSDenied ErrorKind = "fs_denied"
	// KindPermissionError: the system refused (seed 000).
	KindPermissionError ErrorKind = "permission_error"
	// KindExecution: the command could not be started, or failed in a way
	// that is not its own exit status (seed 000).
	KindExecution ErrorKind = "execution_error"
	// KindCommandFailed: the command ran and exited non-zero, and the
	// contract reports that as an error (seed 001).
	KindCommandFailed ErrorKind = "command_failed"
	// KindTimeout: the command ran out of time and was killed, and the
	// contract reports that as an error (seeds 001, 004).
	KindTimeout ErrorKind = "timeout"
	// KindCancelled: the caller cancelled the call and the command was
	// killed.
	KindCancelled ErrorKind = "cancelled"
	// KindUnknownTool: no tool has the requested name.
	KindUnknownTool ErrorKind = "unknown_tool"
	// KindAudit: the audit log could not be written and the registry fails
	// closed. Nothing ran.
	KindAudit ErrorKind = "audit_error"
	// KindApprovalPending: the policy asks, and the approver will answer
	// later (an MCP client asked through elicitation). Nothing ran; the
	// host retries the call with the answer.
	KindApprovalPending ErrorKind = "approval_pending"
)

// ErrApprovalPending is returned by an Approver that will get its answer
// later; Dispatch then returns a result of kind KindApprovalPending,
// writes no refusal to the audit log, and runs nothing.
var ErrApprovalPending = errors.New("tool: approval pending")

// Result is the outcome of one call.
type Result struct {
	// Text is what the model sees.
	Text string `json:"text"`
	// Structured is the JSON value of contracts that return one (seeds
	// 003, 004); nil for text contracts.
	Structured any `json:"structured,omitempty"`
	// IsError marks a result the model should read as a failure.
	IsError bool `json:"is_error"`
	// Kind says what kind of failure; empty when IsError is false.
	Kind ErrorKind `json:"error_kind,omitempty"`
	// Run describes the process that ran; nil when nothing ran.
	Run *RunInfo `json:"run,omitempty"`
	// Decision is the policy's decision, when one was made.
	Decision *policy.Decision `json:"-"`
}

// RunInfo describes the process a call ran, for the audit log and for
// people; the model sees only Text.
type RunInfo struct {
	Pid             int           `json:"pid"`
	Outcome         string        `json:"outcome"`
	ExitCode        int           `json:"exit_code"`
	Signal          int           `json:"signal,omitempty"`
	Duration        time.Duration `json:"duration_ns"`
	StdoutBytes     int64         `json:"stdout_bytes"`
	StderrBytes     int64         `json:"stderr_bytes"`
	Truncated       bool          `json:"truncated"`
	LeftoversKilled int           `json:"leftovers_killed,omitempty"`
	Background      bool          `json:"background,omitempty"`
	// Sandbox names the sandbox profile the command ran under, and the
	// layers skipped under best effort.
	Sandbox string `json:"sandbox,omitempty"`
	// JobID is the background job the command runs as (a background call,
	// or a foreground call that detached); empty otherwise.
	JobID string `json:"job_id,omitempty"`
}

// Errorf returns an error result of kind k with a formatted text.
func Errorf(k ErrorKind, format string, args ...any) *Result {
	return &Result{Text: fmt.Sprintf(format, args...), IsError: true, Kind: k}
}

// Tool is one contract: a name, a description and schema for the model,
// and the two steps of a call.
type Tool interface {
	// Name is the contract's canonical name ("exec", "bash", "Exec",
	// "shell.exec"). A registry may expose it under another name.
	Name() string
	// Description is the text the model reads; it may depend on the call
	// (seed 001 names the working directory). call may be nil when no call
	// is in progress (listing tools).
	Description(call *Call) string
	// InputSchema is the JSON Schema of the input object.
	InputSchema() json.RawMessage
	// Prepare decodes and validates input and returns what would run. On
	// bad input it returns a nil Action and an error Result, written as
	// the contract words it. Prepare must not start anything.
	Prepare(call *Call, input json.RawMessage) (Action, *Result)
}

// Action is a validated call, ready to run.
type Action interface {
	// Request describes what would run, for policy and audit.
	Request() policy.Request
	// Run runs it. ctx ends the command (cancellation). Run always
	// returns a result.
	Run(ctx context.Context, call *Call) *Result
}

// OutputSchemer is implemented by tools that return structured JSON.
type OutputSchemer interface {
	OutputSchema() json.RawMessage
}

// Annotations are hints about a tool's behaviour for clients (MCP tool
// annotations).
type Annotations struct {
	Title         string
	ReadOnly      bool
	Destructive   bool
	Idempotent    bool
	OpenWorld     bool
	RequiresGrant bool // only agents granted the tool by name may call it
}

// Annotator is implemented by tools that describe their behaviour.
type Annotator interface {
	Annotations() Annotations
}

// Preflighter is implemented by tools with a policy of their own (seed
// 004's CommandPolicy). The registry combines it with its own checkers.
type Preflighter interface {
	Preflight(policy.Request) policy.Decision
}

// Refuser is implemented by tools that word refusals in their own format.
// Without it a refusal's text is Decision.Message().
type Refuser interface {
	Refuse(d policy.Decision) *Result
}

// Grants are what an agent may use (seed 003's tool_grants and fs_grants).
type Grants struct {
	// Tools are the tool names the agent may call.
	Tools []string
	// FS are the paths the agent may reach.
	FS []FSGrant
}

// FSGrant grants a mode ("r", "w" or "rw") on a path and everything
// beneath it.
type FSGrant struct {
	Mode string `json:"mode"`
	Path string `json:"path"`
}

// HasTool reports whether g grants the tool named name.
func (g *Grants) HasTool(name string) bool {
	return g != nil && slices.Contains(g.Tools, name)
}

// CoversFS reports whether g grants mode ("r" or "w") on path. path must
// be absolute; it is covered when it, and the file it resolves to after
// symlinks, are each inside a grant with that mode, so a granted symlink
// does not open a path that is not granted.
func (g *Grants) CoversFS(mode, path string) bool {
	if g == nil || !filepath.IsAbs(path) {
		return false
	}
	check := func(p string) bool {
		for _, fg := range g.FS {
			if !strings.Contains(fg.Mode, mode) || !filepath.IsAbs(fg.Path) {
				continue
			}
			if within(filepath.Clean(fg.Path), p) || within(evalOrSelf(fg.Path), p) {
				return true
			}
		}
		return false
	}
	clean := filepath.Clean(path)
	return check(clean) && check(evalOrSelf(clean))
}

// within reports whether p is root or beneath it.
func within(root, p string) bool {
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

// evalOrSelf returns p with symlinks evaluated. When p does not exist, the
// longest existing prefix is evaluated and the rest appended, so a
// symlinked directory on the way is still seen through.
func evalOrSelf(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// Approval is a person's answer.
type Approval struct {
	Approved bool
	// Remember asks for later calls asking because of the same rule, in
	// the same conversation, to be approved without asking (see
	// SessionApprover).
	Remember bool
	// Reason is shown to the model when the call is refused.
	Reason string
}

// ApprovalRequest is what an Approver is asked.
type ApprovalRequest struct {
	Tool     string
	Request  policy.Request
	Decision policy.Decision
}

// Approver asks a person whether a call the policy marked "ask" may run.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Approval, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(context.Context, ApprovalRequest) (Approval, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, r ApprovalRequest) (Approval, error) {
	return f(ctx, r)
}

// Call is the context of one tool call. The zero value is usable: no
// conversation, the host's working directory, no grants (every tool but
// those that require a grant), no approver (calls that need approval are
// refused), and the registry's audit sink.
type Call struct {
	// ID identifies the call in the audit log; the registry fills it when
	// empty.
	ID string
	// Conversation identifies the calling conversation (an MCP session, a
	// chat).
	Conversation string
	// WorkDir is the working directory commands run in unless the input
	// names another; empty means the host's current directory.
	WorkDir string
	// Grants, when not nil, limits the agent to the granted tools and
	// paths. Tools that require a grant refuse calls with nil Grants.
	Grants *Grants
	// Approver is asked when the policy says ask; nil refuses such calls
	// with a text that says how to allow them.
	Approver Approver
	// Audit receives this call's events; nil means the registry's sink.
	Audit audit.Sink
	// OnOutput, if set, receives each chunk of output as it arrives (for
	// progress reports). It must not block for long.
	OnOutput func(stream string, p []byte)
}

// Dir returns the call's working directory: WorkDir, or the host's
// current directory.
func (c *Call) Dir() string {
	if c != nil && c.WorkDir != "" {
		return c.WorkDir
	}
	if wd, err := filepath.Abs("."); err == nil {
		return wd
	}
	return "/"
}

// RunInfoFrom summarises a runner result for the audit log. truncated says
// whether the contract cut the output the model sees.
func RunInfoFrom(r *runner.Result, truncated bool) *RunInfo {
	return &RunInfo{
		Pid:             r.Pid,
		Outcome:         r.Outcome.String(),
		ExitCode:        r.ExitCode,
		Signal:          r.Signal,
		Duration:        r.Duration,
		StdoutBytes:     r.Stdout.TotalBytes,
		StderrBytes:     r.Stderr.TotalBytes,
		Truncated:       truncated,
		LeftoversKilled: r.LeftoversKilled,
	}
}

// Outputter returns a runner OnOutput function that forwards to
// call.OnOutput, or nil when the call has none.
func (c *Call) Outputter() func(runner.Stream, []byte) {
	if c == nil || c.OnOutput == nil {
		return nil
	}
	f := c.OnOutput
	return func(s runner.Stream, p []byte) { f(s.String(), p) }
}
