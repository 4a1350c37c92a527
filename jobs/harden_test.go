//go:build linux

package jobs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/runner"
)

// helperHost starts a job as a server would (a Manager that is not
// OneShot), prints its supervisor's pid and waits to be killed.
func helperHost(args []string) int {
	m := &Manager{StateDir: args[0]}
	job, err := m.Start(context.Background(), Spec{Command: "echo up; exec sleep 600", Env: append(runner.SafeEnv(), args[1])})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	info, err := m.Get(job.ID, "")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("started", info.OwnerPid, job.ID)
	select {}
}

// TestLiveCapConcurrent: 16 concurrent starts in one conversation with a
// cap of 8 start exactly 8; the server-wide cap holds across
// conversations.
func TestLiveCapConcurrent(t *testing.T) {
	token := proctest.Token(t)
	env := append(runner.SafeEnv(), token)
	for _, c := range []struct {
		name          string
		live, total   int
		conversations int
	}{
		{"per conversation", 8, 0, 1},
		{"server-wide", 0, 8, 4},
		{"attached per conversation", 8, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newManager(t)
			m.MaxLive, m.MaxLiveTotal = c.live, c.total
			var wg sync.WaitGroup
			var mu sync.Mutex
			ok, refused := 0, 0
			start := make(chan struct{})
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					spec := Spec{Command: "sleep 600", Env: env, Conversation: fmt.Sprint("c", i%c.conversations)}
					var err error
					if strings.HasPrefix(c.name, "attached") {
						_, err = m.StartAttached(spec, false, nil)
					} else {
						_, err = m.Start(context.Background(), spec)
					}
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						ok++
					case errors.Is(err, ErrTooManyJobs):
						refused++
					default:
						t.Error(err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if ok != 8 || refused != 8 {
				t.Errorf("%d started, %d refused; want 8 and 8", ok, refused)
			}
			list, _ := m.List("")
			if len(list) != 8 {
				t.Errorf("%d jobs listed", len(list))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			m.StopAll(ctx)
			// Ended jobs free their slots.
			if _, err := m.Start(context.Background(), Spec{Command: "true", Env: env, Conversation: "c0"}); err != nil {
				t.Errorf("after the jobs ended: %v", err)
			}
			m.WaitSupervisors()
		})
	}
	proctest.NoSurvivors(t, token)
}

// asOtherUser makes path belong to another local user (nobody, 65534),
// as if that user had planted it; it needs root.
func asOtherUser(t *testing.T, paths ...string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("planting files as another user needs root (to give them to uid 65534)")
	}
	for _, p := range paths {
		if err := os.Lchown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPlantedStateDir: a state directory that is a link, or belongs to
// another user, is refused with the reason, never used.
func TestPlantedStateDir(t *testing.T) {
	shared := t.TempDir()
	os.Chmod(shared, 0o1777)
	elsewhere := t.TempDir()
	link := filepath.Join(shared, "link")
	os.Symlink(elsewhere, link)
	m := &Manager{StateDir: link}
	if _, err := m.Start(context.Background(), Spec{Command: "true"}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a symlinked state dir: %v", err)
	}
	planted := filepath.Join(shared, "planted")
	os.Mkdir(planted, 0o777)
	os.Chmod(planted, 0o777)
	asOtherUser(t, planted)
	m = &Manager{StateDir: planted}
	_, err := m.Start(context.Background(), Spec{Command: "true"})
	if err == nil || !strings.Contains(err.Error(), "belongs to another user") || !strings.Contains(err.Error(), "jobs.state_dir") {
		t.Errorf("another user's state dir: %v", err)
	}
	if entries, _ := os.ReadDir(planted); len(entries) != 0 {
		t.Errorf("something was created in the planted directory: %v", entries)
	}
	// A jobs directory inside it that another user made is not listed.
	os.Mkdir(filepath.Join(planted, "jobs"), 0o777)
	asOtherUser(t, filepath.Join(planted, "jobs"))
	if _, err := m.List(""); err == nil {
		t.Error("another user's jobs directory was listed")
	}
}

// plant writes a record in the jobs directory of m.
func plant(t *testing.T, m *Manager, id string, info Info) string {
	t.Helper()
	os.MkdirAll(m.JobsDir(), 0o700)
	dir := filepath.Join(m.JobsDir(), id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	info.ID = id
	if err := writeInfo(dir, &info); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "output"), []byte("planted\n"), 0o644)
	return dir
}

// TestPlantedRecords: records another user planted are not listed, read
// or killed; records of this user that name pid 1, or a process that is
// not the job's, are never signalled.
func TestPlantedRecords(t *testing.T) {
	// A process of this user that some record could name.
	victim := exec.Command("sleep", "600")
	victim.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { victim.Process.Kill(); victim.Wait() }()
	vstart, _ := procStart(victim.Process.Pid)
	self, _ := procStart(os.Getpid())

	t.Run("mine but naming pid 1", func(t *testing.T) {
		m := newManager(t)
		plant(t, m, "one", Info{Pid: 1, OwnerPid: os.Getpid(), OwnerStart: self, State: "running", Started: time.Now()})
		_, err := m.Kill(context.Background(), "one", "", 100*time.Millisecond)
		if !errors.Is(err, ErrNotTheJob) || !strings.Contains(err.Error(), "pid 1") {
			t.Errorf("kill: %v", err)
		}
	})
	t.Run("mine but naming a process that is not the job's", func(t *testing.T) {
		m := newManager(t)
		// A start time that is not the process's (the pid was reused).
		plant(t, m, "reused", Info{Pid: victim.Process.Pid, PidStart: vstart + 1, OwnerPid: os.Getpid(), OwnerStart: self, State: "running", Started: time.Now()})
		plant(t, m, "nostart", Info{Pid: victim.Process.Pid, OwnerPid: os.Getpid(), OwnerStart: self, State: "running", Started: time.Now()})
		for _, id := range []string{"reused", "nostart"} {
			if _, err := m.Kill(context.Background(), id, "", 100*time.Millisecond); !errors.Is(err, ErrNotTheJob) {
				t.Errorf("%s: %v", id, err)
			}
		}
	})
	t.Run("another user's", func(t *testing.T) {
		m := newManager(t)
		dir := plant(t, m, "theirs", Info{Pid: victim.Process.Pid, PidStart: vstart, OwnerPid: os.Getpid(), OwnerStart: self, State: "running", Started: time.Now()})
		asOtherUser(t, dir, filepath.Join(dir, "job.json"))
		if list, err := m.List(""); err != nil || len(list) != 0 {
			t.Errorf("list: %v %v", list, err)
		}
		for _, f := range []func() error{
			func() error { _, err := m.Get("theirs", ""); return err },
			func() error { _, err := m.Kill(context.Background(), "theirs", "", 100*time.Millisecond); return err },
			func() error { _, err := m.ReadOutput("theirs", "", 0, 100, false); return err },
		} {
			if err := f(); !errors.Is(err, ErrNoJob) {
				t.Errorf("got %v, want ErrNoJob", err)
			}
		}
		// A record of this user in a directory of theirs is not believed
		// either; nor one that is a link.
		os.Chown(dir, 0, 0)
		os.Remove(filepath.Join(dir, "job.json"))
		os.Symlink(filepath.Join(m.JobsDir(), "elsewhere.json"), filepath.Join(dir, "job.json"))
		if _, err := m.Get("theirs", ""); !errors.Is(err, ErrNoJob) {
			t.Errorf("symlinked record: %v", err)
		}
		// The planted directory does not keep this user from starting jobs.
		job, err := m.Start(context.Background(), Spec{Command: "true"})
		if err != nil {
			t.Fatalf("start next to a planted record: %v", err)
		}
		m.Wait(context.Background(), job.ID, "", 10*time.Second)
	})
	if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process the records named was signalled: %v", err)
	}
	if st, _ := procStart(victim.Process.Pid); st != vstart {
		t.Error("the process the records named is gone")
	}
}

// TestDeletedJobsDir: with the jobs directory deleted under a running
// server, its jobs stay visible, killable and correctly described, from
// memory, with a note saying what happened.
func TestDeletedJobsDir(t *testing.T) {
	token := proctest.Token(t)
	m := newManager(t)
	job, err := m.Start(context.Background(), Spec{Command: "echo up; exec sleep 600", Env: append(runner.SafeEnv(), token), Conversation: "c"})
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, job.OutputFile, "up\n")
	if err := os.RemoveAll(m.JobsDir()); err != nil {
		t.Fatal(err)
	}
	list, err := m.List("c")
	if err != nil || len(list) != 1 || !list[0].Running() || !strings.Contains(list[0].Note, "is gone") {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := m.ReadOutput(job.ID, "c", 0, 100, false); err == nil || !strings.Contains(err.Error(), "is gone") {
		t.Errorf("output: %v", err)
	}
	info, err := m.Kill(context.Background(), job.ID, "c", 200*time.Millisecond)
	if err != nil || info.Running() || info.State == "lost" || info.Describe() != "killed by SIGTERM" {
		t.Fatalf("kill: %+v %v", info, err)
	}
	if info.Ended.Before(info.Started) || info.Started.IsZero() {
		t.Errorf("times: %v %v", info.Started, info.Ended)
	}
	info, err = m.Wait(context.Background(), job.ID, "c", time.Second)
	if err != nil || info.Describe() != "killed by SIGTERM" {
		t.Errorf("wait: %+v %v", info, err)
	}
	// New jobs can start again: the directory is made anew.
	if _, err := m.Start(context.Background(), Spec{Command: "true", Conversation: "c"}); err != nil {
		t.Errorf("start after the deletion: %v", err)
	}
	m.WaitSupervisors()
	proctest.NoSurvivors(t, token)
}

// TestUnwritableRecord: a job whose last record cannot be written (the
// directory refuses it) is shown as it ended, not "running" or "lost".
func TestUnwritableRecord(t *testing.T) {
	m := newManager(t)
	work := t.TempDir()
	job, err := m.Start(context.Background(), Spec{Command: "while [ ! -e go ]; do sleep 0.02; done; exit 3", Dir: work})
	if err != nil {
		t.Fatal(err)
	}
	// The record is written through a temporary file: a directory in its
	// place makes every later write fail (as a read-only directory would,
	// which root does not feel).
	if err := os.Mkdir(filepath.Join(job.Dir, ".job.json.tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	info, err := m.Get(job.ID, "")
	if err != nil || !info.Running() {
		t.Fatalf("%+v %v", info, err)
	}
	os.WriteFile(filepath.Join(work, "go"), nil, 0o600) // the job may end now
	m.WaitSupervisors()
	info, err = m.Get(job.ID, "")
	if err != nil || info.Running() || info.State == "lost" || info.ExitCode == nil || *info.ExitCode != 3 {
		t.Fatalf("after the end: %+v %v", info, err)
	}
	if disk, _ := ReadInfo(job.Dir); !disk.Running() || !strings.Contains(info.Note, "could not be updated") {
		t.Errorf("record on disk %+v, note %q", disk, info.Note)
	}
}

// TestPagesKeepCharacters: byte pages never split a UTF-8 character, and
// say where they really start.
func TestPagesKeepCharacters(t *testing.T) {
	m := newManager(t)
	text := strings.Repeat("é€😀a", 50) // 2, 3, 4 and 1 bytes
	job, err := m.Start(context.Background(), Spec{Command: "printf '%s' '" + text + "'"})
	if err != nil {
		t.Fatal(err)
	}
	m.WaitSupervisors()
	for _, limit := range []int64{1, 2, 3, 5, 7, 64} {
		var got []byte
		offset := int64(0)
		for pages := 0; pages < 10000; pages++ {
			p, err := m.ReadOutput(job.ID, "", offset, limit, false)
			if err != nil {
				t.Fatal(err)
			}
			if !utf8.Valid(p.Data) {
				t.Fatalf("limit %d offset %d: page %q splits a character", limit, offset, p.Data)
			}
			got = append(got, p.Data...)
			if p.EOF {
				break
			}
			offset = p.Next
		}
		if !strings.HasPrefix(string(got), text) {
			t.Errorf("limit %d: read %q", limit, got)
		}
	}
	// An offset inside a character moves back to its start.
	p, err := m.ReadOutput(job.ID, "", 1, 10, false)
	if err != nil || p.Offset != 0 || !strings.HasPrefix(string(p.Data), "é") {
		t.Errorf("offset 1: %d %q %v", p.Offset, p.Data, err)
	}
	p, err = m.ReadOutput(job.ID, "", 4, 10, false) // inside €
	if err != nil || p.Offset != 2 || !strings.HasPrefix(string(p.Data), "€") {
		t.Errorf("offset 4: %d %q %v", p.Offset, p.Data, err)
	}
}

// startHost runs helperHost and returns it with its supervisor's pid and
// the job's id.
func startHost(t *testing.T, state, token string) (*exec.Cmd, int, string) {
	t.Helper()
	argv, helper := proctest.HelperArgv(t, "host", state, token)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helper, "GORACE=atexit_sleep_ms=0")
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "started" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the host said %q", line)
	}
	pid, _ := strconv.Atoi(f[1])
	return cmd, pid, f[2]
}

// TestJobsEndWithKilledHost: a server's jobs and their supervisors do not
// outlive the server killed with SIGKILL by more than a few seconds.
func TestJobsEndWithKilledHost(t *testing.T) {
	token := proctest.Token(t)
	state := t.TempDir()
	cmd, sup, id := startHost(t, state, token)
	waitOutput(t, filepath.Join(state, "jobs", id, "output"), "up\n")
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline) && (alive(sup) || len(proctest.Survivors(token)) > 0); {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(sup) {
		t.Errorf("the supervisor %d outlived its host", sup)
		syscall.Kill(sup, syscall.SIGKILL)
	}
	proctest.NoSurvivors(t, token)
	info, err := ReadInfo(filepath.Join(state, "jobs", id))
	if err != nil || info.Running() {
		t.Errorf("record: %+v %v", info, err)
	}
	if b, _ := os.ReadFile(filepath.Join(state, "jobs", id, "output")); !strings.Contains(string(b), "[background process failed") {
		t.Errorf("output %q", b)
	}
}

// TestEndOrphans: a job whose supervisor died (SIGKILL) is ended by the
// next server and recorded as orphaned.
func TestEndOrphans(t *testing.T) {
	token := proctest.Token(t)
	m := newManager(t)
	job, err := m.Start(context.Background(), Spec{Command: "echo up; exec sleep 600", Env: append(runner.SafeEnv(), token)})
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, job.OutputFile, "up\n")
	info, _ := m.Get(job.ID, "")
	syscall.Kill(info.OwnerPid, syscall.SIGKILL)
	m.WaitSupervisors()
	next := &Manager{StateDir: m.StateDir}
	if got, _ := next.Get(job.ID, ""); got == nil || got.State != "lost" {
		t.Fatalf("before: %+v", got)
	}
	ended := next.EndOrphans(context.Background())
	if len(ended) != 1 || ended[0] != job.ID {
		t.Errorf("ended %v", ended)
	}
	got, err := next.Get(job.ID, "")
	if err != nil || got.State != "orphaned" || got.Running() || !strings.Contains(got.Describe(), "died") {
		t.Errorf("after: %+v %v", got, err)
	}
	if out := waitOutput(t, job.OutputFile, "had died"); !strings.HasPrefix(out, "up\n") {
		t.Errorf("output %q", out)
	}
	proctest.NoSurvivors(t, token)
}
