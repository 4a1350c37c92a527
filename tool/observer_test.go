package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
)

func TestOutcome(t *testing.T) {
	cases := []struct {
		name string
		res  *tool.Result
		want string
	}{
		{"nil", nil, tool.OutcomeError},
		{"exit 0", &tool.Result{Run: &tool.RunInfo{Outcome: "exited"}}, tool.OutcomeExited},
		{"exit 3, text contract", &tool.Result{Run: &tool.RunInfo{Outcome: "exited", ExitCode: 3}}, tool.OutcomeFailed},
		{"exit 3, error contract", &tool.Result{IsError: true, Kind: tool.KindCommandFailed, Run: &tool.RunInfo{Outcome: "exited", ExitCode: 3}}, tool.OutcomeFailed},
		{"signal", &tool.Result{Run: &tool.RunInfo{Outcome: "signaled", ExitCode: -1, Signal: 9}}, tool.OutcomeSignaled},
		{"timed out", &tool.Result{Run: &tool.RunInfo{Outcome: "timed out", ExitCode: -1}}, tool.OutcomeTimeout},
		{"timeout kind", &tool.Result{IsError: true, Kind: tool.KindTimeout}, tool.OutcomeTimeout},
		{"cancelled", &tool.Result{Run: &tool.RunInfo{Outcome: "cancelled"}}, tool.OutcomeCancelled},
		{"cancelled kind", &tool.Result{IsError: true, Kind: tool.KindCancelled}, tool.OutcomeCancelled},
		{"policy", &tool.Result{IsError: true, Kind: tool.KindPermissionDenied}, tool.OutcomeDenied},
		{"fs grants", &tool.Result{IsError: true, Kind: tool.KindFSDenied}, tool.OutcomeDenied},
		{"validation", &tool.Result{IsError: true, Kind: tool.KindValidation}, tool.OutcomeError},
		{"unknown tool", &tool.Result{IsError: true, Kind: tool.KindUnknownTool}, tool.OutcomeError},
		{"could not start", &tool.Result{IsError: true, Kind: tool.KindExecution}, tool.OutcomeError},
		{"audit", &tool.Result{IsError: true, Kind: tool.KindAudit}, tool.OutcomeError},
		{"background job", &tool.Result{Run: &tool.RunInfo{Outcome: "started", Background: true, JobID: "j1"}}, tool.OutcomeExited},
		{"detached", &tool.Result{Run: &tool.RunInfo{Outcome: "detached", Background: true, JobID: "j1"}}, tool.OutcomeExited},
		{"session running", &tool.Result{Run: &tool.RunInfo{Outcome: "running"}}, tool.OutcomeExited},
		{"no process, fine", &tool.Result{Text: "no jobs"}, tool.OutcomeExited},
		{"approval pending", &tool.Result{IsError: true, Kind: tool.KindApprovalPending}, ""},
	}
	for _, c := range cases {
		if got := tool.Outcome(c.res); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// recorder is an Observer that writes down what it is told.
type recorder struct {
	mu    sync.Mutex
	steps []string
}

type traceKey struct{}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	r.steps = append(r.steps, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) StartRequest(ctx context.Context, i tool.RequestInfo) (context.Context, func(tool.RequestEnd)) {
	return ctx, func(tool.RequestEnd) {}
}
func (r *recorder) Decided(ctx context.Context, name string, d policy.Decision) {
	r.add("decided %s %s %s", name, d.Verdict, d.Rule)
}
func (r *recorder) Approval(ctx context.Context, name, result string) { r.add("approval %s", result) }
func (r *recorder) StartRun(ctx context.Context, name string, req policy.Request) (context.Context, func(*tool.Result)) {
	r.add("run %s %s", name, req.Command)
	return context.WithValue(ctx, traceKey{}, "run"), func(res *tool.Result) { r.add("ran %s", tool.Outcome(res)) }
}
func (r *recorder) Ended(ctx context.Context, name string, res *tool.Result, elapsed time.Duration) {
	if elapsed < 0 {
		r.add("negative time")
	}
	r.add("ended %s %s", name, tool.Outcome(res))
}
func (r *recorder) TraceID(ctx context.Context) string {
	if v, ok := ctx.Value(traceKey{}).(string); ok {
		return v
	}
	return ""
}

// TestObserverHooks: the registry tells its Observer each step of each
// kind of call, in order, runs nothing it did not announce, and stamps the
// trace id on the call's audit events.
func TestObserverHooks(t *testing.T) {
	checks := policy.CheckerFunc(func(r policy.Request) policy.Decision {
		switch r.Command {
		case "forbidden":
			return policy.Decision{Verdict: policy.Deny, Rule: "no-forbidden", Reason: "forbidden"}
		case "ask":
			return policy.Decision{Verdict: policy.Ask, Rule: "ask-rule", Reason: "ask first"}
		}
		return policy.Allowed
	})
	approve := func(ok bool, err error) tool.Approver {
		return tool.ApproverFunc(func(context.Context, tool.ApprovalRequest) (tool.Approval, error) {
			return tool.Approval{Approved: ok}, err
		})
	}
	cases := []struct {
		name     string
		tool     string
		input    string
		approver tool.Approver
		want     []string
	}{
		{"allowed", "fake", `{"say":"hi"}`, nil, []string{"decided fake allow ", "run fake hi", "ran exited", "ended fake exited"}},
		{"denied", "fake", `{"say":"forbidden"}`, nil, []string{"decided fake deny no-forbidden", "ended fake denied"}},
		{"invalid", "fake", `{"say":3}`, nil, []string{"ended fake error"}},
		{"unknown tool", "nope", `{}`, nil, []string{"ended nope error"}},
		{"ask, no approver", "fake", `{"say":"ask"}`, nil, []string{"decided fake ask ask-rule", "approval error", "ended fake denied"}},
		{"ask, declined", "fake", `{"say":"ask"}`, approve(false, nil), []string{"decided fake ask ask-rule", "approval declined", "ended fake denied"}},
		{"ask, approved", "fake", `{"say":"ask"}`, approve(true, nil), []string{"decided fake ask ask-rule", "approval approved", "run fake ask", "ran exited", "ended fake exited"}},
		{"ask, pending", "fake", `{"say":"ask"}`, approve(false, tool.ErrApprovalPending), []string{"decided fake ask ask-rule", "approval pending", "ended fake "}},
		{"ask, failed", "fake", `{"say":"ask"}`, approve(false, errors.New("no client")), []string{"decided fake ask ask-rule", "approval error", "ended fake denied"}},
	}
	for _, c := range cases {
		r, _, _ := newRegistry(t, checks)
		rec := &recorder{}
		r.Observer = rec
		r.Dispatch(context.Background(), &tool.Call{Approver: c.approver}, c.tool, json.RawMessage(c.input))
		if got := strings.Join(rec.steps, " | "); got != strings.Join(c.want, " | ") {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, strings.Join(c.want, " | "))
		}
	}

	// The trace id of the context the call is dispatched in goes on its
	// events.
	r, _, mem := newRegistry(t)
	r.Observer = &recorder{}
	ctx := context.WithValue(context.Background(), traceKey{}, "0af7651916cd43dd8448eb211c80319c")
	r.Dispatch(ctx, nil, "fake", json.RawMessage(`{"say":"hi"}`))
	for _, e := range mem.Events() {
		if e.TraceID != "0af7651916cd43dd8448eb211c80319c" {
			t.Errorf("%s has trace id %q", e.Type, e.TraceID)
		}
	}
	// Without an Observer no event has one.
	r, _, mem = newRegistry(t)
	r.Dispatch(ctx, nil, "fake", json.RawMessage(`{"say":"hi"}`))
	for _, e := range mem.Events() {
		if e.TraceID != "" {
			t.Errorf("%s has trace id %q without an observer", e.Type, e.TraceID)
		}
	}
}
