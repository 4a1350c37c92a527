//go:build linux

package unifiedexec

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/sandbox"
	"github.com/agentexec/agentexec/tool"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	sandbox.Main()
	goleak.VerifyTestMain(m)
}

// fixture is a registry with the four session tools over one manager, the
// guarded policy engine as its checker, and an audit log in memory. At the
// end of the test it closes the manager and checks that no process of any
// session survived and no pseudo-terminal was left behind.
type fixture struct {
	t     *testing.T
	r     *tool.Registry
	m     *Manager
	exec  *ExecCommand
	write *WriteStdin
	log   *audit.Memory
	token string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	eng, err := policy.NewEngine(policy.Guarded, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, m: &Manager{}, log: &audit.Memory{}, token: proctest.Token(t)}
	f.m.Audit = f.log
	f.exec = &ExecCommand{Env: append(runner.SafeEnv(), f.token)}
	f.write = &WriteStdin{ProgramInput: "allow", Checks: []policy.Checker{eng}}
	f.r = tool.NewRegistry()
	f.r.Checkers = []policy.Checker{eng}
	f.r.Audit = f.log
	for _, tl := range All(f.m, f.exec, f.write) {
		if err := f.r.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	before := ptyFDs(t)
	t.Cleanup(func() {
		f.m.Close()
		if left := proctest.Survivors(f.token); len(left) > 0 {
			t.Errorf("processes survived: %v", left)
		}
		if n := ptyFDs(t); n > before {
			t.Errorf("%d descriptors on a pseudo-terminal were left open (%d before)", n, before)
		}
	})
	return f
}

// ptyFDs counts this process's descriptors on a pseudo-terminal.
func ptyFDs(t testing.TB) int { return proctest.PTYDescriptors(t) }

// call dispatches one call in conversation "c1".
func (f *fixture) call(name string, input any) *tool.Result {
	f.t.Helper()
	return f.callIn("c1", name, input)
}

func (f *fixture) callIn(conv, name string, input any) *tool.Result {
	f.t.Helper()
	raw, err := json.Marshal(input)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.r.Dispatch(context.Background(), &tool.Call{Conversation: conv}, name, raw)
}

var sessionRE = regexp.MustCompile(`Process running with session ID ([0-9a-f]+)\n`)

// running returns the session id of a result that says the process runs.
func running(t *testing.T, res *tool.Result) string {
	t.Helper()
	m := sessionRE.FindStringSubmatch(res.Text)
	if m == nil || res.IsError {
		t.Fatalf("want a running session, got (error=%v) %q", res.IsError, res.Text)
	}
	return m[1]
}

// exited checks that a result says the process exited with code.
func exited(t *testing.T, res *tool.Result, code string) {
	t.Helper()
	if res.IsError || !strings.Contains(res.Text, "\nProcess exited with code "+code+"\nOutput:\n") {
		t.Fatalf("want exit code %s, got (error=%v) %q", code, res.IsError, res.Text)
	}
}

// output returns what follows the header.
func output(res *tool.Result) string {
	_, out, _ := strings.Cut(res.Text, "\nOutput:\n")
	return out
}

// until polls session id until its output (from what the caller already
// has) contains want, and returns all of it.
func (f *fixture) until(id, have, want string) string {
	f.t.Helper()
	for tries := 0; !strings.Contains(have, want); tries++ {
		res := f.call(WriteStdinName, map[string]any{"session_id": id})
		have += output(res)
		if tries > 5 || !strings.Contains(res.Text, "Process running") {
			f.t.Fatalf("no %q in the output: %q", want, have)
		}
	}
	return have
}
