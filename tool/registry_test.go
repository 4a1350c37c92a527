package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
)

// fakeTool is a tool that runs nothing: it echoes its "say" field and
// reports a request with the given env keys.
type fakeTool struct {
	name string
	ran  int
}

func (f *fakeTool) Name() string                             { return f.name }
func (f *fakeTool) Description(*tool.Call) string            { return "fake" }
func (f *fakeTool) InputSchema() json.RawMessage             { return json.RawMessage(`{"type":"object"}`) }
func (f *fakeTool) Preflight(policy.Request) policy.Decision { return policy.Allowed }

func (f *fakeTool) Prepare(call *tool.Call, raw json.RawMessage) (tool.Action, *tool.Result) {
	a, err := tool.ParseArgs(raw, "say", "env")
	if err != nil {
		return nil, tool.Errorf(tool.KindValidation, "invalid input: %v", err)
	}
	say, _, err := a.String("say")
	if err != nil {
		return nil, tool.Errorf(tool.KindValidation, "invalid input: %v", err)
	}
	_, keys, _, err := a.StringMap("env")
	if err != nil {
		return nil, tool.Errorf(tool.KindValidation, "invalid input: %v", err)
	}
	return &fakeAction{f: f, say: say, keys: keys}, nil
}

type fakeAction struct {
	f    *fakeTool
	say  string
	keys []string
}

func (a *fakeAction) Request() policy.Request {
	return policy.Request{Command: a.say, EnvKeys: a.keys, Cwd: "/w"}
}

func (a *fakeAction) Run(ctx context.Context, call *tool.Call) *tool.Result {
	a.f.ran++
	return &tool.Result{Text: a.say, Run: &tool.RunInfo{Pid: 1, Outcome: "exited", StdoutBytes: int64(len(a.say))}}
}

func newRegistry(t *testing.T, checks ...policy.Checker) (*tool.Registry, *fakeTool, *audit.Memory) {
	t.Helper()
	r := tool.NewRegistry()
	f := &fakeTool{name: "fake"}
	if err := r.Register(f); err != nil {
		t.Fatal(err)
	}
	mem := &audit.Memory{}
	r.Audit = mem
	r.Checkers = checks
	return r, f, mem
}

func TestRegister(t *testing.T) {
	r := tool.NewRegistry()
	f := &fakeTool{name: "shell.exec"}
	if err := r.Register(f); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(f); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Errorf("duplicate: %v", err)
	}
	if err := r.RegisterAs("shell_exec", f); err != nil {
		t.Errorf("alias: %v", err)
	}
	for _, bad := range []string{"", "has space", strings.Repeat("x", 65), "semi;colon"} {
		if err := r.RegisterAs(bad, f); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	if got := r.Names(); strings.Join(got, ",") != "shell.exec,shell_exec" {
		t.Errorf("names %v", got)
	}
	if _, ok := r.Lookup("shell_exec"); !ok {
		t.Error("lookup by alias failed")
	}
}

func TestDispatchAuditEvents(t *testing.T) {
	deny := policy.CheckerFunc(func(r policy.Request) policy.Decision {
		if r.Command == "forbidden" {
			return policy.Decision{Verdict: policy.Deny, Rule: "test-rule", Reason: "it is forbidden", Alternative: "Say something else."}
		}
		return policy.Allowed
	})
	r, f, mem := newRegistry(t, deny)
	ctx := context.Background()

	res := r.Dispatch(ctx, &tool.Call{Conversation: "c1"}, "fake", json.RawMessage(`{"say":"hi","env":{"SECRET_TOKEN":"hunter2"}}`))
	if res.IsError || res.Text != "hi" || f.ran != 1 {
		t.Fatalf("allowed call: %+v ran=%d", res, f.ran)
	}
	res = r.Dispatch(ctx, &tool.Call{Conversation: "c1"}, "fake", json.RawMessage(`{"say":"forbidden"}`))
	if !res.IsError || res.Kind != tool.KindPermissionDenied || f.ran != 1 {
		t.Fatalf("denied call: %+v ran=%d", res, f.ran)
	}
	if want := "permission denied: it is forbidden. Say something else."; res.Text != want {
		t.Errorf("denied text %q, want %q", res.Text, want)
	}
	res = r.Dispatch(ctx, &tool.Call{Conversation: "c1"}, "fake", json.RawMessage(`{"say":3}`))
	if res.Kind != tool.KindValidation || !strings.Contains(res.Text, "say: must be a string, not a number") {
		t.Errorf("invalid call: %+v", res)
	}
	res = r.Dispatch(ctx, &tool.Call{}, "nope", nil)
	if res.Kind != tool.KindUnknownTool || !strings.Contains(res.Text, "available tools: fake") {
		t.Errorf("unknown tool: %+v", res)
	}

	ev := mem.Events()
	types := []string{}
	for _, e := range ev {
		types = append(types, e.Type)
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), "hunter2") {
			t.Errorf("an env value reached the audit log: %s", b)
		}
		if e.Time.IsZero() || e.Tool == "" || e.CallID == "" {
			t.Errorf("incomplete event %s", b)
		}
	}
	want := []string{audit.Dispatched, audit.Finished, audit.Denied, audit.Finished, audit.Denied}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("events %v, want %v", types, want)
	}
	if ev[0].CallID != ev[1].CallID || ev[0].Conversation != "c1" || ev[0].Decision != "allow" {
		t.Errorf("dispatched/finished: %+v %+v", ev[0], ev[1])
	}
	if len(ev[0].EnvKeys) != 1 || ev[0].EnvKeys[0] != "SECRET_TOKEN" {
		t.Errorf("env keys %v", ev[0].EnvKeys)
	}
	if ev[1].ExitCode == nil || *ev[1].ExitCode != 0 || ev[1].DurationMS == nil || ev[1].StdoutBytes != 2 {
		t.Errorf("finished event lacks the run: %+v", ev[1])
	}
	if ev[2].Rule != "test-rule" || ev[2].Decision != "deny" || ev[2].Reason != "it is forbidden" {
		t.Errorf("denied event %+v", ev[2])
	}
	if ev[3].ErrorKind != string(tool.KindValidation) {
		t.Errorf("failed event %+v", ev[3])
	}
}

func TestDispatchGrants(t *testing.T) {
	r, f, mem := newRegistry(t)
	res := r.Dispatch(context.Background(), &tool.Call{Grants: &tool.Grants{Tools: []string{"other"}}}, "fake", json.RawMessage(`{"say":"x"}`))
	if res.Kind != tool.KindPermissionDenied || f.ran != 0 {
		t.Fatalf("no grant: %+v", res)
	}
	if ev := mem.Events(); len(ev) != 1 || ev[0].Type != audit.Denied || ev[0].Rule != "tool_grants" {
		t.Errorf("events %+v", ev)
	}
	res = r.Dispatch(context.Background(), &tool.Call{Grants: &tool.Grants{Tools: []string{"fake"}}}, "fake", json.RawMessage(`{"say":"x"}`))
	if res.IsError || f.ran != 1 {
		t.Errorf("granted: %+v", res)
	}
}

func TestDispatchApproval(t *testing.T) {
	ask := policy.CheckerFunc(func(policy.Request) policy.Decision {
		return policy.Decision{Verdict: policy.Ask, Rule: "ask-rule", Reason: "unknown program"}
	})
	cases := []struct {
		name     string
		approver tool.Approver
		ran      bool
		text     string
		decision string
	}{
		{"no approver", nil, false, "no one can be asked here", "declined"},
		{"approved", tool.ApproverFunc(func(context.Context, tool.ApprovalRequest) (tool.Approval, error) {
			return tool.Approval{Approved: true}, nil
		}), true, "x", "approved"},
		{"declined", tool.ApproverFunc(func(context.Context, tool.ApprovalRequest) (tool.Approval, error) {
			return tool.Approval{Reason: "not now"}, nil
		}), false, "the user declined this command: not now", "declined"},
		{"approver fails", tool.ApproverFunc(func(context.Context, tool.ApprovalRequest) (tool.Approval, error) {
			return tool.Approval{}, errors.New("client went away")
		}), false, "client went away", "declined"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, f, mem := newRegistry(t, ask)
			res := r.Dispatch(context.Background(), &tool.Call{Approver: c.approver}, "fake", json.RawMessage(`{"say":"x"}`))
			if (f.ran == 1) != c.ran || !strings.Contains(res.Text, c.text) {
				t.Errorf("ran=%d result %+v", f.ran, res)
			}
			if !c.ran && res.Kind != tool.KindPermissionDenied {
				t.Errorf("kind %q", res.Kind)
			}
			if ev := mem.Events(); ev[0].Decision != c.decision || ev[0].Rule != "ask-rule" {
				t.Errorf("event %+v", ev[0])
			}
		})
	}
}

type failingSink struct{ n int }

func (s *failingSink) Write(audit.Event) error { s.n++; return errors.New("disk full") }

func TestAuditFailure(t *testing.T) {
	r, f, _ := newRegistry(t)
	sink := &failingSink{}
	r.Audit = sink
	var reported []error
	r.OnAuditError = func(err error) { reported = append(reported, err) }
	res := r.Dispatch(context.Background(), nil, "fake", json.RawMessage(`{"say":"kept"}`))
	if res.IsError || res.Text != "kept" || f.ran != 1 {
		t.Errorf("a failing sink lost the result: %+v", res)
	}
	if len(reported) != 2 {
		t.Errorf("reported %d audit errors, want 2", len(reported))
	}
	r.FailClosed = true
	res = r.Dispatch(context.Background(), nil, "fake", json.RawMessage(`{"say":"kept"}`))
	if res.Kind != tool.KindAudit || f.ran != 1 || !strings.Contains(res.Text, "disk full") {
		t.Errorf("fail closed: %+v ran=%d", res, f.ran)
	}
}

func TestCoversFS(t *testing.T) {
	dir := t.TempDir()
	g := &tool.Grants{FS: []tool.FSGrant{{Mode: "r", Path: dir + "/pub"}, {Mode: "rw", Path: dir + "/work"}}}
	cases := []struct {
		mode, path string
		want       bool
	}{
		{"r", dir + "/pub", true},
		{"r", dir + "/pub/a/b", true},
		{"w", dir + "/pub/a", false},
		{"w", dir + "/work/x", true},
		{"r", dir + "/public", false},
		{"r", dir + "/pub/../secret", false},
		{"r", "relative/path", false},
	}
	for _, c := range cases {
		if got := g.CoversFS(c.mode, c.path); got != c.want {
			t.Errorf("CoversFS(%q, %q) = %v, want %v", c.mode, c.path, got, c.want)
		}
	}
	var none *tool.Grants
	if none.CoversFS("r", "/") {
		t.Error("nil grants cover /")
	}
}

func TestCoversFSSymlink(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"pub", "secret"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "secret"), filepath.Join(dir, "pub", "link")); err != nil {
		t.Fatal(err)
	}
	g := &tool.Grants{FS: []tool.FSGrant{{Mode: "r", Path: filepath.Join(dir, "pub")}}}
	if g.CoversFS("r", filepath.Join(dir, "pub", "link", "key")) {
		t.Error("a symlink inside a granted tree opened a path outside it")
	}
}
