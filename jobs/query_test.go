//go:build linux

package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/runner"
)

func newManager(t *testing.T) *Manager {
	t.Helper()
	m := &Manager{StateDir: t.TempDir()}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.StopAll(ctx)
	})
	return m
}

func TestListWaitKill(t *testing.T) {
	token := proctest.Token(t)
	m := newManager(t)
	env := append(runner.SafeEnv(), token)
	done, err := m.Start(context.Background(), Spec{Command: "sleep 0.2; echo done", Env: env, Conversation: "a", Tool: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	server, err := m.Start(context.Background(), Spec{Command: "echo listening; exec sleep 600", Env: env, Conversation: "a", Grace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	info, err := m.Wait(context.Background(), done.ID, "a", 10*time.Second)
	if err != nil || info.State != "exited" || *info.ExitCode != 0 || info.Describe() != "exited 0" {
		t.Fatalf("wait: %+v %v", info, err)
	}
	list, _ := m.List("a")
	if len(list) != 2 || list[0].ID != server.ID || !list[0].Running() {
		t.Errorf("list %+v", list)
	}
	if other, _ := m.List("b"); len(other) != 0 {
		t.Errorf("conversation b sees %d jobs", len(other))
	}
	if _, err := m.Get(server.ID, "b"); !errors.Is(err, ErrOtherConversation) {
		t.Errorf("other conversation: %v", err)
	}
	if _, err := m.Get("nope", "a"); !errors.Is(err, ErrNoJob) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := m.Get("../x", ""); !errors.Is(err, ErrNoJob) {
		t.Errorf("path id: %v", err)
	}
	waitOutput(t, server.OutputFile, "listening\n")
	info, err = m.Kill(context.Background(), server.ID, "a", 200*time.Millisecond)
	if err != nil || info.State != "signaled" || info.Describe() != "killed by SIGTERM" {
		t.Errorf("kill: %+v %v", info, err)
	}
	if out := waitOutput(t, server.OutputFile, "[background process failed"); !strings.HasSuffix(out, "[background process failed: signal: 15 (SIGTERM)]\n") {
		t.Errorf("output %q", out)
	}
	if err := m.Remove(server.ID, "a"); err != nil {
		t.Error(err)
	}
	if list, _ := m.List(""); len(list) != 1 {
		t.Errorf("after remove: %d jobs", len(list))
	}
	proctest.NoSurvivors(t, token)
}

func TestLiveCap(t *testing.T) {
	token := proctest.Token(t)
	m := newManager(t)
	m.MaxLive = 2
	env := append(runner.SafeEnv(), token)
	for range 2 {
		if _, err := m.Start(context.Background(), Spec{Command: "sleep 600", Env: env, Conversation: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := m.Start(context.Background(), Spec{Command: "sleep 600", Env: env, Conversation: "c"})
	if !errors.Is(err, ErrTooManyJobs) || strings.Count(err.Error(), "sleep 600") != 2 {
		t.Errorf("cap: %v", err)
	}
	if _, err := m.Start(context.Background(), Spec{Command: "true", Env: env, Conversation: "other"}); err != nil {
		t.Errorf("another conversation: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.StopAll(ctx)
	proctest.NoSurvivors(t, token)
}

// TestPaging100MB: paging through 100 MB of output returns exactly the
// bytes written, in bounded memory. Under the race detector it pages
// through 20 MiB (30 to 50 s at full size on a loaded machine); CI runs it
// at full size without the race detector as well.
func TestPaging100MB(t *testing.T) {
	m := newManager(t)
	size := int64(100 << 20)
	if raceEnabled {
		size = 20 << 20 // a multiple of both the 10-byte line and the page
	}
	// Line i is "%09d\n" (10 bytes), so byte k is known.
	job, err := m.Start(context.Background(), Spec{Command: fmt.Sprintf("seq -f %%09.0f 0 %d", size/10-1)})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := m.Wait(context.Background(), job.ID, "", time.Minute); err != nil || info.State != "exited" {
		t.Fatalf("%+v %v", info, err)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapInuse
	var peak uint64
	offset, pages := int64(0), 0
	for {
		p, err := m.ReadOutput(job.ID, "", offset, MaxPageBytes, false)
		if err != nil {
			t.Fatal(err)
		}
		if p.Offset != offset {
			t.Fatalf("page at %d starts at %d", offset, p.Offset)
		}
		for i := 0; i < len(p.Data) && offset+int64(i) < size; i += 4093 {
			k := offset + int64(i)
			want := fmt.Sprintf("%09d\n", k/10)[k%10]
			if p.Data[i] != want {
				t.Fatalf("byte %d is %q, want %q", k, p.Data[i], want)
			}
		}
		offset = p.Next
		pages++
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		if offset >= size {
			break
		}
	}
	if int64(pages) != size/MaxPageBytes {
		t.Errorf("%d pages", pages)
	}
	if grew := int64(peak) - int64(before); grew > 16<<20 {
		t.Errorf("heap grew %d bytes while paging", grew)
	}
	// By lines.
	mid := size / 20 // the line in the middle
	p, err := m.ReadOutput(job.ID, "", mid, 3, true)
	if err != nil || string(p.Data) != fmt.Sprintf("%09d\n%09d\n%09d\n", mid, mid+1, mid+2) || p.NextLine != mid+3 || p.Offset != mid*10 {
		t.Errorf("lines: %q next %d offset %d %v", p.Data, p.NextLine, p.Offset, err)
	}
	p, _ = m.ReadOutput(job.ID, "", size, 100, false)
	if !bytes.HasPrefix(p.Data, []byte("\n\n[background process completed]")) || !p.Ended {
		t.Errorf("end %q", p.Data)
	}
}

func TestOutputCap(t *testing.T) {
	m := newManager(t)
	job, err := m.Start(context.Background(), Spec{Command: "seq -f %09.0f 0 99999", MaxOutputBytes: 100 << 10})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := m.Wait(context.Background(), job.ID, "", 30*time.Second)
	if info.Dropped == 0 || info.HeaderLen == 0 {
		t.Fatalf("nothing dropped: %+v", info)
	}
	out := waitOutput(t, job.OutputFile, "completed")
	if !strings.HasPrefix(out, fmt.Sprintf("[agentexec: the first %d bytes of output were dropped", info.Dropped)) || len(out) > 100<<10 {
		t.Errorf("file starts %q, %d bytes", out[:80], len(out))
	}
	p, err := m.ReadOutput(job.ID, "", 0, 20, false)
	if err != nil || p.Dropped != info.Dropped || p.Offset != info.Dropped {
		t.Errorf("page %+v %v", p, err)
	}
	if k := p.Offset; string(p.Data[:10]) != fmt.Sprintf("%09d\n", k/10)[k%10:]+fmt.Sprintf("%09d\n", k/10+1)[:k%10] {
		t.Errorf("first kept bytes %q at %d", p.Data[:10], k)
	}
	p, _ = m.ReadOutput(job.ID, "", 999_990, 10, false)
	if string(p.Data) != "000099999\n" {
		t.Errorf("last line %q", p.Data)
	}
}

func TestLifetime(t *testing.T) {
	token := proctest.Token(t)
	m := newManager(t)
	job, err := m.Start(context.Background(), Spec{Command: "sleep 600", Env: append(runner.SafeEnv(), token), Lifetime: 300 * time.Millisecond, Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := m.Wait(context.Background(), job.ID, "", 10*time.Second)
	if info.State != "timed out" {
		t.Errorf("state %q", info.State)
	}
	proctest.NoSurvivors(t, token)
}

func TestAttached(t *testing.T) {
	m := newManager(t)
	var seen bytes.Buffer
	a, err := m.StartAttached(Spec{Command: "echo out; echo err >&2; sleep 0.3; echo late", Conversation: "x"}, true, func(s runner.Stream, b []byte) {
		fmt.Fprintf(&seen, "%s:%s", s, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	if list, _ := m.List("x"); len(list) != 1 || !list[0].Running() {
		t.Errorf("an attached job is not listed: %+v", list)
	}
	<-a.Done()
	res, err := a.Result()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if !strings.Contains(seen.String(), "stdout:out\n") || !strings.Contains(seen.String(), "stderr:err\n") {
		t.Errorf("streams %q", seen.String())
	}
	info, _ := m.Get(a.ID, "x")
	out := waitOutput(t, a.OutputFile, "completed")
	if info.State != "exited" || !strings.Contains(out, "late\n") {
		t.Errorf("%+v %q", info, out)
	}
	if _, err := m.StartAttached(Spec{Argv: []string{"/no/such/program"}}, false, nil); err == nil {
		t.Error("a program that does not exist started")
	}
}
