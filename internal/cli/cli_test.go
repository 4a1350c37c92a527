//go:build linux

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/jobs"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/sandbox"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	sandbox.Main()
	jobs.Main()
	runner.Main()
	proctest.RunHelpers(map[string]proctest.Helper{
		// cli runs agentexec with the helper's arguments, as a real
		// one-shot process.
		"cli": func(args []string) int { return Main(context.Background(), args, os.Stdin, os.Stdout, os.Stderr) },
	})
	// No configuration file of the machine's user may change the tests.
	dir, err := os.MkdirTemp("", "agentexec-cli-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	os.Unsetenv("AGENTEXEC_CONFIG")
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("os/signal.loop"), goleak.IgnoreAnyFunction("os/signal.signal_recv"))
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestRunExitCodes(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string // substring
	}{
		{"echo", []string{"run", "echo hello"}, 0, "hello\n", ""},
		{"exit code", []string{"run", "exit 42"}, 42, "", ""},
		{"stderr streams", []string{"run", "echo oops >&2"}, 0, "", "oops\n"},
		{"timeout", []string{"run", "--timeout", "200ms", "--grace", "100ms", "echo hi; sleep 30"}, 124, "hi\n", "timed out after 200ms"},
		{"signal", []string{"run", "kill -9 $$"}, 137, "", ""},
		{"not found", []string{"run", "--argv", "--", "no-such-program-xyz"}, 127, "", "program not found"},
		{"not executable", []string{"run", "--sandbox", "off", "--argv", "--", "/etc/hostname"}, 126, "", "not an executable file"},
		{"not executable, sandboxed", []string{"run", "--argv", "--", "/etc/hostname"}, 126, "", "cannot execute the program"},
		{"bad cwd", []string{"run", "--cwd", "/no/such/dir", "true"}, 125, "", `bad working directory "/no/such/dir"`},
		{"argv literal", []string{"run", "--argv", "--", "echo", "$HOME", ";", "*"}, 0, "$HOME ; *\n", ""},
		{"env", []string{"run", "--env", "FOO=bar", "echo $FOO"}, 0, "bar\n", ""},
		{"leftovers", []string{"run", "--sandbox", "off", "sleep 600 & echo started"}, 0, "started\n", "killed 1 process(es)"},
		{"stdin is empty", []string{"run", "cat; echo done"}, 0, "done\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, c.args...)
			if code != c.code || stdout != c.stdout || !strings.Contains(stderr, c.stderr) {
				t.Errorf("got %d %q %q; want %d %q and stderr containing %q", code, stdout, stderr, c.code, c.stdout, c.stderr)
			}
		})
	}
}

func TestRunFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--timeout", "abc", "x"}, `invalid argument "abc" for "--timeout" flag: want a duration such as 30s`},
		{[]string{"run", "--timeout", "5", "x"}, `"--timeout" flag: want a duration with a unit, such as 5s`},
		{[]string{"run", "--timeout", "-1s", "x"}, `"--timeout" flag: want a duration that is not negative`},
		{[]string{"run", "--grace", "x", "x"}, `"--grace" flag`},
		{[]string{"run", "--max-output", "12x", "x"}, `"--max-output" flag: want a positive size such as 65536, 64KiB`},
		{[]string{"run", "--env", "NOVALUE", "x"}, `"--env" flag: want KEY=value`},
		{[]string{"run", "--truncate", "sideways", "x"}, `"--truncate" flag: want head, tail or middle`},
		{[]string{"run", "--cgroup", "sometimes", "x"}, `--cgroup: "sometimes": use auto, off, or the absolute path of a cgroup v2 directory`},
		{[]string{"run", "--cgroup", "/tmp", "x"}, `--cgroup: cgroup v2 tracking is not available: /tmp is not in a cgroup v2 hierarchy`},
		{[]string{"run"}, "give a command"},
		{[]string{"run", "a", "b"}, "give the command as one quoted argument, or use --argv"},
		{[]string{"run", "--bogus", "x"}, "unknown flag: --bogus"},
		{[]string{"run", "   "}, "empty command"},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(t, c.args...)
		if code != ExitFailed || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%q: got %d %q; want 125 and one line containing %q", c.args, code, stderr, c.want)
		}
	}
}

func TestRunJSON(t *testing.T) {
	token := proctest.Token(t)
	code, stdout, _ := runCLI(t, "run", "--sandbox", "off", "--json", "--max-output", "10", "--truncate", "head", "--env", token, "seq 1 100; echo e >&2; sleep 600 & exit 3")
	if code != 3 {
		t.Errorf("exit %d, want 3", code)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("not JSON: %v: %q", err, stdout)
	}
	for _, k := range []string{"exit_code", "signal", "timed_out", "cancelled", "duration_ms", "stdout", "stderr", "stdout_bytes", "stderr_bytes", "stdout_truncated", "stderr_truncated", "leftovers_killed"} {
		if _, ok := got[k]; !ok {
			t.Errorf("missing field %q", k)
		}
	}
	if got["exit_code"] != 3.0 || got["stdout_bytes"] != 292.0 || got["stdout_truncated"] != true || got["stderr"] != "e\n" || got["leftovers_killed"] != 1.0 {
		t.Errorf("unexpected result %v", got)
	}
	if !strings.HasPrefix(got["stdout"].(string), "1\n2\n3\n4\n5\n") {
		t.Errorf("stdout %q", got["stdout"])
	}
	proctest.NoSurvivors(t, token)
}
