package tool

import (
	"context"
	"time"

	"github.com/agentexec/agentexec/policy"
)

// Observer watches calls for metrics and traces. The registry calls it
// (when Registry.Observer is set) at each step of Dispatch; the MCP server
// calls StartRequest for each request it serves. A nil Observer costs
// nothing: every hook is behind one nil check. Implementations must be
// safe for concurrent use and must not block: they run on the call's path.
//
// An Observer never sees a command's output, and sees its text (in
// policy.Request) only to record it where the operator asked for that.
type Observer interface {
	// StartRequest begins observing one request of a client (an MCP
	// request). It returns the context the request is served in (carrying
	// its span) and a function to call once with how it ended.
	StartRequest(ctx context.Context, r RequestInfo) (context.Context, func(RequestEnd))
	// Decided reports the policy's decision on a call, before any approval
	// is asked.
	Decided(ctx context.Context, tool string, d policy.Decision)
	// Approval reports how an approval the policy asked for ended: one of
	// ApprovalApproved, ApprovalDeclined, ApprovalPending, ApprovalError.
	Approval(ctx context.Context, tool, result string)
	// StartRun is called just before a call's action runs (a process
	// starts). It returns the context the action runs in and a function
	// the registry calls once with the action's result.
	StartRun(ctx context.Context, tool string, req policy.Request) (context.Context, func(*Result))
	// Ended reports a call that Dispatch answered (ran, refused or
	// rejected), with its outcome (see Outcome) and how long Dispatch took.
	Ended(ctx context.Context, tool string, res *Result, elapsed time.Duration)
	// TraceID returns the id of the trace ctx belongs to, for the audit
	// log, or "" when ctx is not traced.
	TraceID(ctx context.Context) string
}

// RequestInfo describes a request a client sent (an MCP request).
type RequestInfo struct {
	// Method is the protocol method ("tools/call", "tools/list").
	Method string
	// Tool is the tool a tools/call names; empty otherwise.
	Tool string
	// ID is the JSON-RPC id as text; empty when unknown or absent.
	ID string
	// Meta is the request's params._meta (where a client puts
	// traceparent and tracestate); nil when it has none.
	Meta map[string]any
	// ProtocolVersion is the MCP revision, when known.
	ProtocolVersion string
	// Session identifies the conversation (never a bearer secret such as
	// an HTTP session id); empty when unknown.
	Session string
	// Transport is "tcp" (HTTP over TCP), "unix" or "pipe" (stdio).
	Transport string
}

// RequestEnd is how a request ended.
type RequestEnd struct {
	// ErrorType is empty on success; "tool_error" when a tool answered
	// with an error result; the JSON-RPC error code (as text) or a short
	// class of error when the request itself failed.
	ErrorType string
	// Message describes the error, if any (never a secret: the text the
	// client gets).
	Message string
}

// Approval results reported to Observer.Approval.
const (
	ApprovalApproved = "approved"
	ApprovalDeclined = "declined"
	ApprovalPending  = "pending"
	ApprovalError    = "error"
)

// Outcomes of a call, as Outcome reports them.
const (
	OutcomeExited    = "exited"    // the command ran and exited 0
	OutcomeFailed    = "failed"    // the command ran and exited non-zero
	OutcomeSignaled  = "signaled"  // a signal (not ours) ended the command
	OutcomeTimeout   = "timeout"   // the command ran out of time and was killed
	OutcomeCancelled = "cancelled" // the caller cancelled and the command was killed
	OutcomeDenied    = "denied"    // grants, policy, a person or a limit refused; nothing ran
	OutcomeError     = "error"     // invalid input, unknown tool, could not start, audit failure
)

// Outcome classifies a result into one of the Outcome constants (a small
// fixed set, fit for a metric label). A result of kind
// KindApprovalPending is not an outcome yet: Outcome returns "".
func Outcome(res *Result) string {
	if res == nil {
		return OutcomeError
	}
	switch res.Kind {
	case KindApprovalPending:
		return ""
	case KindPermissionDenied, KindFSDenied:
		return OutcomeDenied
	case KindTimeout:
		return OutcomeTimeout
	case KindCancelled:
		return OutcomeCancelled
	}
	if ri := res.Run; ri != nil {
		switch ri.Outcome {
		case "timed out":
			return OutcomeTimeout
		case "cancelled":
			return OutcomeCancelled
		case "signaled":
			return OutcomeSignaled
		case "exited":
			if ri.ExitCode == 0 {
				return OutcomeExited
			}
			return OutcomeFailed
		}
		if ri.Background || ri.JobID != "" {
			// Started in the background: the call succeeded.
			return OutcomeExited
		}
	}
	if res.Kind == KindCommandFailed {
		return OutcomeFailed
	}
	if res.IsError {
		return OutcomeError
	}
	return OutcomeExited
}
