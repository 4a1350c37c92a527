package tool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/policy"
)

// MaxInputBytes bounds the raw JSON input of one call.
const MaxInputBytes = 16 << 20

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Entry is a registered tool and the name it is exposed under.
type Entry struct {
	Name string
	Tool Tool
}

// Registry holds tools by name and dispatches calls to them. Its zero value
// is not usable: create one with NewRegistry. A Registry is safe for
// concurrent use; register tools before dispatching.
type Registry struct {
	// Checkers decide on every call, together with the tool's own
	// Preflight; the strictest decision wins.
	Checkers []policy.Checker
	// Audit receives events of calls whose Call has no sink; nil means
	// audit.Discard.
	Audit audit.Sink
	// FailClosed refuses to run a call whose dispatched event cannot be
	// written. Otherwise the call runs and the error goes to OnAuditError.
	// A finished event that cannot be written never loses the result.
	FailClosed bool
	// OnAuditError, if set, is told about every audit write that failed.
	OnAuditError func(error)
	// Observer, if set, is told about every call (metrics, traces); nil
	// costs nothing. Set it before dispatching.
	Observer Observer

	mu    sync.RWMutex
	tools map[string]Tool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{tools: map[string]Tool{}} }

// Register adds t under its own name.
func (r *Registry) Register(t Tool) error { return r.RegisterAs(t.Name(), t) }

// RegisterAs adds t under name (for hosts that reject some characters, such
// as "shell_exec" for "shell.exec"). Names are 1 to 64 letters, digits,
// '_', '-' or '.', and unique in the registry.
func (r *Registry) RegisterAs(name string, t Tool) error {
	if t == nil {
		return fmt.Errorf("tool: register %q: nil tool", name)
	}
	if !validName.MatchString(name) {
		return fmt.Errorf("tool: register %q: a name is 1 to 64 letters, digits, '_', '-' or '.'", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[name]; dup {
		return fmt.Errorf("tool: register %q: a tool with that name is already registered", name)
	}
	r.tools[name] = t
	return nil
}

// Lookup returns the tool exposed as name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// List returns the registered tools sorted by exposed name.
func (r *Registry) List() []Entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Entry, 0, len(r.tools))
	for n, t := range r.tools {
		out = append(out, Entry{Name: n, Tool: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns the exposed names, sorted.
func (r *Registry) Names() []string {
	var names []string
	for _, e := range r.List() {
		names = append(names, e.Name)
	}
	return names
}

// Dispatch runs one call of the tool exposed as name with the raw JSON
// input, and always returns a result:
//
//  1. unknown tool, or a tool the call's grants do not include: refused;
//  2. Prepare: invalid input is answered in the contract's words;
//  3. policy: the registry's checkers and the tool's own Preflight; deny
//     refuses, ask goes to the call's Approver (none: refused with how to
//     allow it);
//  4. a tool.call.dispatched event, then Action.Run, then
//     tool.call.finished.
//
// Refusals write tool.call.denied. Nothing runs unless step 4 is reached.
// The registry's Observer, if any, is told about each step.
func (r *Registry) Dispatch(ctx context.Context, call *Call, name string, input json.RawMessage) *Result {
	if r.Observer == nil {
		return r.dispatch(ctx, call, name, input)
	}
	start := time.Now()
	res := r.dispatch(ctx, call, name, input)
	r.Observer.Ended(ctx, name, res, time.Since(start))
	return res
}

func (r *Registry) dispatch(ctx context.Context, call *Call, name string, input json.RawMessage) *Result {
	if call == nil {
		call = &Call{}
	}
	if call.ID == "" {
		call.ID = newCallID()
	}
	ev := audit.Event{CallID: call.ID, Tool: name, Conversation: call.Conversation}
	if r.Observer != nil {
		ev.TraceID = r.Observer.TraceID(ctx)
	}

	t, ok := r.Lookup(name)
	if !ok {
		res := Errorf(KindUnknownTool, "unknown tool %q; available tools: %s", name, strings.Join(r.Names(), ", "))
		ev.Rule, ev.Reason = "unknown_tool", res.Text
		r.emit(call, audit.Denied, ev, res)
		return res
	}
	if call.Grants != nil && !call.Grants.HasTool(name) && !call.Grants.HasTool(t.Name()) {
		d := policy.Decision{Verdict: policy.Deny, Rule: "tool_grants",
			Reason:      fmt.Sprintf("this agent has no grant for the tool %q", name),
			Alternative: "Ask the operator to add it to the agent's tool grants."}
		res := refuse(t, d)
		res.Decision = &d
		ev.Decision, ev.Rule, ev.Reason = "deny", d.Rule, d.Reason
		r.emit(call, audit.Denied, ev, res)
		return res
	}
	if len(input) > MaxInputBytes {
		res := Errorf(KindValidation, "input is %d bytes; the limit is %d", len(input), MaxInputBytes)
		r.emit(call, audit.Finished, ev, res)
		return res
	}

	act, res := t.Prepare(call, input)
	if act == nil {
		if res == nil {
			res = Errorf(KindExecution, "tool %q returned no action and no result", name)
		}
		fillRequest(&ev, nil)
		typ := audit.Finished
		if res.Kind == KindPermissionDenied || res.Kind == KindFSDenied {
			typ = audit.Denied
			ev.Reason = res.Text
		}
		r.emit(call, typ, ev, res)
		return res
	}
	req := act.Request()
	req.Tool = t.Name()
	req.Conversation = call.Conversation
	fillRequest(&ev, &req)

	checkers := r.Checkers
	if p, ok := t.(Preflighter); ok {
		checkers = append(checkers[:len(checkers):len(checkers)], policy.CheckerFunc(p.Preflight))
	}
	d := policy.CheckAll(req, checkers...)
	ev.Decision, ev.Rule, ev.Reason = d.Verdict.String(), d.Rule, d.Reason
	if r.Observer != nil {
		r.Observer.Decided(ctx, name, d)
	}
	if d.Verdict == policy.Ask {
		approved, why, err := r.ask(ctx, call, t.Name(), req, d)
		if r.Observer != nil {
			result := ApprovalApproved
			switch {
			case errors.Is(err, ErrApprovalPending):
				result = ApprovalPending
			case err != nil:
				result = ApprovalError
			case !approved:
				result = ApprovalDeclined
			}
			r.Observer.Approval(ctx, name, result)
		}
		if errors.Is(err, ErrApprovalPending) {
			return &Result{Text: "approval pending: " + d.Reason, IsError: true, Kind: KindApprovalPending, Decision: &d}
		}
		if !approved {
			d = policy.Decision{Verdict: policy.Deny, Rule: d.Rule, Reason: d.Reason, Alternative: d.Alternative, Text: why}
			ev.Decision = "declined"
		} else {
			ev.Decision = "approved"
		}
	}
	if d.Verdict == policy.Deny {
		res := refuse(t, d)
		res.Decision = &d
		r.emit(call, audit.Denied, ev, res)
		return res
	}

	if err := r.write(call, stamp(audit.Dispatched, ev)); err != nil && r.FailClosed {
		res := Errorf(KindAudit, "refused: the audit log cannot be written (%v), and this server is configured to run nothing it cannot record", err)
		return res
	}
	var ran func(*Result)
	if r.Observer != nil {
		ctx, ran = r.Observer.StartRun(ctx, name, req)
	}
	res = act.Run(ctx, call)
	if res == nil {
		res = Errorf(KindExecution, "tool %q returned no result", name)
	}
	if ran != nil {
		ran(res)
	}
	res.Decision = &d
	r.emit(call, audit.Finished, ev, res)
	return res
}

// errNoApprover: the policy asks, and the call has no Approver.
var errNoApprover = errors.New("tool: no one can approve this call")

// ask puts an "ask" decision to the call's approver. It returns whether the
// call may run and, if not, the refusal text; ErrApprovalPending when the
// answer comes later, and the approver's error (or errNoApprover) when no
// answer could be had.
func (r *Registry) ask(ctx context.Context, call *Call, toolName string, req policy.Request, d policy.Decision) (bool, string, error) {
	if call.Approver == nil {
		msg := fmt.Sprintf("permission denied: this call needs a person's approval (%s), and no one can be asked here. "+
			"To allow it without asking, add a rule that allows it to the agentexec configuration.", d.Reason)
		if rule := AllowRule(req, d); rule != "" {
			msg = strings.TrimSuffix(msg, ".") + ", such as:\n\n" + rule
		}
		return false, msg, errNoApprover
	}
	a, err := call.Approver.Approve(ctx, ApprovalRequest{Tool: toolName, Request: req, Decision: d})
	switch {
	case errors.Is(err, ErrApprovalPending):
		return false, "", err
	case err != nil:
		return false, fmt.Sprintf("permission denied: approval could not be obtained (%v); the command did not run", err), err
	case !a.Approved:
		msg := "permission denied: the user declined this command"
		if a.Reason != "" {
			msg += ": " + a.Reason
		}
		return false, msg + ". Do not retry it unchanged; ask the user how to proceed.", nil
	}
	return true, "", nil
}

func refuse(t Tool, d policy.Decision) *Result {
	if rf, ok := t.(Refuser); ok {
		if res := rf.Refuse(d); res != nil {
			return res
		}
	}
	return &Result{Text: d.Message(), IsError: true, Kind: KindPermissionDenied}
}

func fillRequest(ev *audit.Event, req *policy.Request) {
	if req == nil {
		return
	}
	ev.Command = req.Command
	if req.Executable != "" {
		ev.Argv = append([]string{req.Executable}, req.Args...)
	}
	ev.Cwd = req.Cwd
	ev.EnvKeys = req.EnvKeys
	ev.Background = req.Background
}

func stamp(typ string, ev audit.Event) audit.Event {
	ev.Type = typ
	ev.Time = time.Now().UTC()
	return ev
}

// emit writes an event describing res.
func (r *Registry) emit(call *Call, typ string, ev audit.Event, res *Result) {
	ev.ErrorKind = string(res.Kind)
	if ri := res.Run; ri != nil {
		code := ri.ExitCode
		ms := float64(ri.Duration) / float64(time.Millisecond)
		ev.ExitCode, ev.Signal, ev.Outcome, ev.Pid = &code, ri.Signal, ri.Outcome, ri.Pid
		ev.DurationMS = &ms
		ev.StdoutBytes, ev.StderrBytes, ev.Truncated = ri.StdoutBytes, ri.StderrBytes, ri.Truncated
		ev.Sandbox = ri.Sandbox
	}
	r.write(call, stamp(typ, ev))
}

func (r *Registry) write(call *Call, ev audit.Event) error {
	sink := call.Audit
	if sink == nil {
		sink = r.Audit
	}
	if sink == nil {
		return nil
	}
	err := sink.Write(ev)
	if err != nil && r.OnAuditError != nil {
		r.OnAuditError(err)
	}
	return err
}

func newCallID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
