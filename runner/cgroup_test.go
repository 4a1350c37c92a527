//go:build linux

package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
)

// useTestCgroups enables a cgroup pool for the rest of the test, or skips
// the test where this machine cannot give one.
func useTestCgroups(t *testing.T) *Cgroups {
	t.Helper()
	pool, err := FindCgroups()
	if err != nil {
		if !errors.Is(err, ErrNoCgroups) {
			t.Fatalf("FindCgroups: %v does not wrap ErrNoCgroups", err)
		}
		t.Skipf("no cgroup tracking here: %v", err)
	}
	UseCgroups(pool)
	t.Cleanup(func() {
		UseCgroups(nil)
		if err := pool.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if _, err := os.Stat(pool.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the pool's directory %s is still there after Close", pool.Dir())
		}
	})
	return pool
}

// escapees are commands that leave their session and clear their
// environment (so the run's marker is gone) but keep the test's token. The
// main process waits a little, so that the escape is complete before it
// exits and the runner looks for leftovers.
func escapees(token string) []string {
	env := "env -i PATH=" + DefaultPath + " " + token
	return []string{
		"setsid " + env + " sleep 600 & sleep 0.3; echo started",
		"(setsid " + env + " sleep 600 &) & sleep 0.3; echo started",
		"setsid " + env + " sh -c 'sleep 600 & sleep 600' & sleep 0.3; echo started",
	}
}

func TestWithoutCgroupsAnEscapeeSurvives(t *testing.T) {
	if ActiveCgroups() != nil {
		t.Fatal("a pool is active")
	}
	token := proctest.Token(t)
	res := run(t, Spec{Command: escapees(token)[0], Env: []string{"PATH=" + DefaultPath}})
	if text(res.Stdout) != "started\n" {
		t.Fatalf("stdout %q", text(res.Stdout))
	}
	if !res.OutputCut {
		t.Error("OutputCut = false, but the escapee still holds stdout")
	}
	// This is the gap cgroups close: nothing links the process to the run.
	proctest.ExpectSurvivors(t, token, 1)
	run(t, Spec{Command: "true"}) // reaps the escapee's zombie
}

func TestCgroupEndsEscapees(t *testing.T) {
	useTestCgroups(t)
	for _, command := range escapees("TOKEN") {
		t.Run(command, func(t *testing.T) {
			token := proctest.Token(t)
			command := strings.ReplaceAll(command, "TOKEN", token)
			start := time.Now()
			res := run(t, Spec{Command: command, Env: []string{"PATH=" + DefaultPath}})
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("took %v; the call must return when the main process exits", took)
			}
			if text(res.Stdout) != "started\n" || res.ExitCode != 0 {
				t.Errorf("stdout %q exit %d", text(res.Stdout), res.ExitCode)
			}
			if res.LeftoversKilled < 1 {
				t.Errorf("LeftoversKilled = %d, want at least 1", res.LeftoversKilled)
			}
			proctest.NoSurvivors(t, token)
		})
	}
}

func TestCgroupTimeoutEndsEscapees(t *testing.T) {
	useTestCgroups(t)
	token := proctest.Token(t)
	command := "setsid env -i PATH=" + DefaultPath + " " + token + " sh -c 'trap \"\" TERM; sleep 600' & sleep 600"
	start := time.Now()
	res := run(t, Spec{Command: command, Env: []string{"PATH=" + DefaultPath}, Timeout: 200 * time.Millisecond, Grace: 200 * time.Millisecond})
	if !res.TimedOut() {
		t.Fatalf("outcome %v, want timed out", res.Outcome)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	proctest.NoSurvivors(t, token)
}

func TestCgroupPoolReusesAndKeeps(t *testing.T) {
	pool := useTestCgroups(t)
	for range 5 {
		run(t, Spec{Command: "true"})
	}
	pool.mu.Lock()
	created := pool.created
	pool.mu.Unlock()
	if created != 1 {
		t.Errorf("5 runs one after another created %d cgroups, want 1 reused", created)
	}

	token := proctest.Token(t)
	env := []string{"PATH=" + DefaultPath, token}
	res := run(t, Spec{Command: "setsid env -i " + token + " sleep 600 & echo started", Env: env, KeepLeftovers: true})
	if res.LeftoversKept != 1 {
		t.Fatalf("kept %d, want 1", res.LeftoversKept)
	}
	pool.mu.Lock()
	kept := len(pool.kept)
	pool.mu.Unlock()
	if kept != 1 {
		t.Fatalf("%d cgroups are waiting for kept processes, want 1", kept)
	}
	// While the kept process lives, its cgroup is not handed to another run.
	run(t, Spec{Command: "true"})
	pool.mu.Lock()
	kept = len(pool.kept)
	pool.mu.Unlock()
	if kept != 1 {
		t.Errorf("after another run, %d cgroups wait for kept processes, want 1", kept)
	}
	left := proctest.Survivors(token)
	if len(left) != 1 {
		t.Fatalf("survivors %v, want the kept sleep", left)
	}
	syscall.Kill(left[0], syscall.SIGKILL)
	proctest.NoSurvivors(t, token)
	// A killed process leaves its cgroup only once it has finished
	// exiting, which on a busy machine can be after it stopped looking
	// alive in /proc.
	pool.mu.Lock()
	waiting := pool.kept[0]
	pool.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); waiting.populated() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	run(t, Spec{Command: "true"}) // reaps it, and recycles its cgroup
	pool.mu.Lock()
	kept = len(pool.kept)
	pool.mu.Unlock()
	if kept != 0 {
		t.Errorf("%d cgroups still wait after the kept process exited", kept)
	}
}

func TestCgroupConcurrentRuns(t *testing.T) {
	pool := useTestCgroups(t)
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			res, err := Run(context.Background(), Spec{Command: "sleep 0.2 & echo ok", Env: []string{"PATH=" + DefaultPath}})
			if err == nil && text(res.Stdout) != "ok\n" {
				err = errors.New("stdout " + text(res.Stdout))
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	entries, err := os.ReadDir(pool.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		procs, _ := os.ReadFile(filepath.Join(pool.Dir(), e.Name(), "cgroup.procs"))
		if len(procs) != 0 {
			t.Errorf("cgroup %s still holds %q", e.Name(), procs)
		}
	}
}

func TestCgroupManyConcurrentRuns(t *testing.T) {
	run(t, Spec{Command: "true"})
	before := proctest.OpenFDs(t)
	pool, err := FindCgroups()
	if err != nil {
		t.Skipf("no cgroup tracking here: %v", err)
	}
	UseCgroups(pool)
	manyRuns(t, 200)
	UseCgroups(nil)
	pool.mu.Lock()
	created, kept := pool.created, len(pool.kept)
	pool.mu.Unlock()
	t.Logf("200 runs, 16 at a time, used %d cgroups", created)
	if created > 16 || kept != 0 {
		t.Errorf("%d cgroups created for 16 runs at a time, %d waiting for kept processes", created, kept)
	}
	if err := pool.Close(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(pool.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there", pool.Dir())
	}
	if after := proctest.OpenFDs(t); after != before {
		t.Errorf("open file descriptors: %d before the pool, %d after it closed", before, after)
	}
}

func TestOpenCgroupsRefuses(t *testing.T) {
	for _, dir := range []string{t.TempDir(), "/nonexistent/cgroup"} {
		if _, err := OpenCgroups(dir); !errors.Is(err, ErrNoCgroups) {
			t.Errorf("OpenCgroups(%q) = %v, want ErrNoCgroups", dir, err)
		}
	}
}

func TestCgroupStalePoolsRemoved(t *testing.T) {
	pool := useTestCgroups(t)
	// A pool directory of a process that no longer exists, with an empty
	// cgroup in it.
	c := startHelperExit(t)
	stale := filepath.Join(pool.Parent(), "agentexec-"+c+"-1")
	if err := os.MkdirAll(filepath.Join(stale, "r1"), 0o755); err != nil {
		t.Fatal(err)
	}
	other, err := OpenCgroups(pool.Parent())
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		os.Remove(filepath.Join(stale, "r1"))
		os.Remove(stale)
		t.Errorf("the stale pool %s was not removed", stale)
	}
}

// startHelperExit returns the pid of a process that has exited and been
// reaped.
func startHelperExit(t *testing.T) string {
	t.Helper()
	res := run(t, Spec{Command: "true"})
	return strconv.Itoa(res.Pid)
}

func TestFindCgroup2Mount(t *testing.T) {
	const hybrid = `25 24 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
31 25 0:27 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
`
	const nested = `40 30 0:30 /user.slice /sys/fs/cgroup rw - cgroup2 cgroup2 rw
41 30 0:31 / /mnt/with\040space rw - cgroup2 cgroup2 rw
`
	for _, tc := range []struct {
		info, rel, want string
	}{
		{hybrid, "/", "/sys/fs/cgroup/unified"},
		{hybrid, "/a/b", "/sys/fs/cgroup/unified/a/b"},
		{nested, "/user.slice/u.scope", "/sys/fs/cgroup/u.scope"},
		{nested, "/system.slice/x", "/mnt/with space/system.slice/x"},
		{"", "/", ""},
	} {
		got, err := findCgroup2Mount(strings.NewReader(tc.info), tc.rel)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("findCgroup2Mount(%q) = %q, %v; want %q", tc.rel, got, err, tc.want)
		}
	}
}

// TestKilledCgroupIsNotReused: once a run's tree was ended with
// cgroup.kill, the next command must not start in that cgroup. Linux kills
// at birth every process started into a cgroup with CLONE_INTO_CGROUP once
// cgroup.kill was written there, so reusing it made the next command (here
// `echo ok`) die of SIGKILL before it ran: the signal-9 flake seen in the
// MCP server's tests after cancelled calls.
func TestKilledCgroupIsNotReused(t *testing.T) {
	pool := useTestCgroups(t)
	env := []string{"PATH=" + DefaultPath}
	for i := range 3 {
		// A negative grace sends SIGKILL at once: the tree ends with cgroup.kill.
		res := run(t, Spec{Command: "sleep 600", Env: env, Timeout: time.Millisecond, Grace: -1})
		if !res.TimedOut() || res.Signal != int(syscall.SIGKILL) {
			t.Fatalf("try %d: outcome %v signal %d; want timed out by SIGKILL", i, res.Outcome, res.Signal)
		}
		res = run(t, Spec{Command: "echo ok", Env: env})
		if res.Outcome != Exited || res.ExitCode != 0 || text(res.Stdout) != "ok\n" {
			t.Fatalf("try %d: the command after a killed tree: %v, exit %d, signal %d, stdout %q", i, res.Outcome, res.ExitCode, res.Signal, text(res.Stdout))
		}
	}
	pool.mu.Lock()
	free := len(pool.free)
	pool.mu.Unlock()
	if free != 1 {
		t.Errorf("%d idle cgroups, want 1: the killed ones must be removed, the others reused", free)
	}
}
