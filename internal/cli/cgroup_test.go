//go:build linux

package cli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/runner"
)

// escapee is a command whose background sleep leaves the session and
// clears its environment (the runner's marker with it), keeping only the
// test's token; the main process waits until the escape is complete.
func escapee(token, rest string) string {
	return "setsid env -i PATH=" + runner.DefaultPath + " " + token + " sleep 600 & sleep 0.3; " + rest
}

func needCgroups(t *testing.T) {
	t.Helper()
	pool, err := runner.FindCgroups()
	if err != nil {
		t.Skipf("no cgroup tracking here: %v", err)
	}
	pool.Close()
}

func TestRunCgroupFlag(t *testing.T) {
	needCgroups(t)
	token := proctest.Token(t)
	// --sandbox off: behind the sandbox's wall the PID namespace ends an
	// escapee whatever the cgroup mode; this is about the runner alone.
	code, out, stderr := runCLI(t, "run", "--sandbox", "off", escapee(token, "echo started"))
	if code != 0 || out != "started\n" || !strings.Contains(stderr, "killed 1 process(es)") {
		t.Errorf("run: %d %q %q", code, out, stderr)
	}
	proctest.NoSurvivors(t, token)
	if runner.ActiveCgroups() != nil {
		t.Error("run left its cgroup pool active")
	}

	// --cgroup off: nothing links the escaped process to the command.
	token = proctest.Token(t)
	if code, out, _ := runCLI(t, "run", "--sandbox", "off", "--cgroup", "off", escapee(token, "echo started")); code != 0 || out != "started\n" {
		t.Errorf("run --cgroup off: %d %q", code, out)
	}
	proctest.ExpectSurvivors(t, token, 1)
	runCLI(t, "run", "true") // reaps its zombie
}

func TestCallCgroupEndsEscapees(t *testing.T) {
	needCgroups(t)
	dir := callEnv(t)
	token := proctest.Token(t)
	in, _ := json.Marshal(map[string]string{"command": escapee(token, "echo started")})
	code, out, stderr := runCLIStdin(t, "", "call", "--sandbox", "off", "bash", string(in))
	if code != 0 || !strings.HasPrefix(out, "started\n") {
		t.Errorf("call: %d %q %q", code, out, stderr)
	}
	proctest.NoSurvivors(t, token)

	// A background job's supervisor holds the job's tree in a cgroup too:
	// killing the job ends the escaped process.
	token = proctest.Token(t)
	state := filepath.Join(dir, "jobs")
	in, _ = json.Marshal(map[string]string{"command": escapee(token, "echo started; sleep 600"), "mode": "background"})
	code, out, stderr = runCLIStdin(t, "", "call", "--sandbox", "off", "--state-dir", state, "bash", string(in))
	m := regexp.MustCompile(`<output_file>.*/jobs/([^/]+)/`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("background call: %d %q %q", code, out, stderr)
	}
	var left []int
	for deadline := time.Now().Add(5 * time.Second); len(left) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		left = proctest.Survivors(token)
	}
	if len(left) != 1 {
		t.Fatalf("the job's escaped sleep is not running: %v", left)
	}
	time.Sleep(400 * time.Millisecond) // the escape is complete
	if code, out, stderr := runCLIStdin(t, "", "jobs", "--state-dir", state, "kill", m[1]); code != 0 {
		t.Errorf("jobs kill: %d %q %q", code, out, stderr)
	}
	proctest.NoSurvivors(t, token)
}
