//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/jobs"
)

// startBackground starts `sleep 600` as a background job through p and
// returns the job's record once it runs.
func startBackground(t *testing.T, p *mcpProcess, id int) *jobs.Info {
	t.Helper()
	text, r := p.call(t, id, "bash", `{"command":"echo up; exec sleep 600","mode":"background"}`)
	m := regexp.MustCompile(`<output_file>(.+)/output</output_file>`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("background answer: %v", r)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info, err := jobs.ReadInfo(m[1])
		if b, _ := os.ReadFile(filepath.Join(m[1], "output")); err == nil && info.Pid != 0 && string(b) == "up\n" {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not start")
		}
	}
}

// running reports whether pid is a live process (not a zombie: what
// re-parents orphans here may not reap them).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// TestKilledServerEndsItsJobs: background jobs and their supervisors
// started by a real `agentexec mcp` do not outlive it when it is killed
// with SIGKILL. (Foreground commands: TestKilledServerLeavesNothing.)
func TestKilledServerEndsItsJobs(t *testing.T) {
	token := proctest.Token(t)
	p := startMCP(t, token)
	a, b := startBackground(t, p, 1), startBackground(t, p, 2)
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if len(proctest.Survivors(token)) == 0 && !running(a.OwnerPid) && !running(b.OwnerPid) {
			break
		}
	}
	for _, info := range []*jobs.Info{a, b} {
		if running(info.OwnerPid) {
			t.Errorf("the supervisor %d of job %s outlived the server", info.OwnerPid, info.ID)
			syscall.Kill(info.OwnerPid, syscall.SIGKILL)
		}
	}
	proctest.NoSurvivors(t, token)
	for _, info := range []*jobs.Info{a, b} {
		rec, err := jobs.ReadInfo(filepath.Join(p.state, "jobs", info.ID))
		if err != nil || rec.Running() {
			t.Errorf("record of %s: %+v %v", info.ID, rec, err)
		}
	}
}

// TestRestartedServerEndsOrphans: a job whose server and supervisor were
// both killed with SIGKILL is ended by the next `agentexec mcp` on the same
// state directory, and listed as such.
func TestRestartedServerEndsOrphans(t *testing.T) {
	token := proctest.Token(t)
	p := startMCP(t, token)
	job := startBackground(t, p, 1)
	// The supervisor first, so that it cannot end its job.
	syscall.Kill(job.OwnerPid, syscall.SIGKILL)
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	survivors := proctest.Survivors(token)
	next := startMCPIn(t, token, p.dir)
	next.stop()
	_, text, _ := runCLIStdin(t, "", "jobs", "--state-dir", p.state)
	if len(survivors) > 0 && !strings.Contains(text, "stopped (the agentexec process that owned it had died)") {
		t.Errorf("agentexec jobs: %q", text)
	}
	proctest.NoSurvivors(t, token)
	rec, err := jobs.ReadInfo(filepath.Join(p.state, "jobs", job.ID))
	if err != nil || rec.Running() {
		t.Errorf("record: %+v %v", rec, err)
	}
	raw, _ := json.Marshal(rec)
	if len(survivors) > 0 && rec.State != "orphaned" {
		t.Errorf("record %s", raw)
	}
}
