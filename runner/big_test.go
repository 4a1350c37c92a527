//go:build linux

package runner

import (
	"context"
	"io"
	"os/exec"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/agentexec/agentexec/capture"
	"github.com/agentexec/agentexec/internal/proctest"
)

// bigSize is 1 GiB, or 64 MiB where the race detector or -short makes the
// full size too slow for CI.
func bigSize() int64 {
	if raceEnabled || testing.Short() {
		return 64 << 20
	}
	return 1 << 30
}

// heapSampler records the largest HeapInuse seen while output streams in.
type heapSampler struct {
	chunks atomic.Int64
	max    atomic.Uint64
}

func (h *heapSampler) sample(Stream, []byte) {
	if h.chunks.Add(1)%512 != 0 {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapInuse > h.max.Load() {
		h.max.Store(ms.HeapInuse)
	}
}

func TestBigOutputEveryStrategy(t *testing.T) {
	size := bigSize()
	argv, helperEnv := proctest.HelperArgv(t, "write", strconv.FormatInt(size, 10))
	const keep = 128 << 10
	for _, lim := range []capture.Limit{
		{Strategy: capture.Head, Max: keep},
		{Strategy: capture.Tail, Max: keep},
		{Strategy: capture.Middle, Max: keep, HeadKeep: 4 << 10, TailKeep: 4 << 10},
	} {
		t.Run(lim.Strategy.String(), func(t *testing.T) {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			base := ms.HeapInuse
			var h heapSampler
			res, err := Run(context.Background(), Spec{Argv: argv, Env: []string{helperEnv}, Stdout: lim, Combined: lim, OnOutput: h.sample})
			if err != nil {
				t.Fatal(err)
			}
			s := res.Stdout
			if res.ExitCode != 0 || s.TotalBytes != size || !s.Truncated {
				t.Fatalf("exit %d, total %d of %d, truncated %v", res.ExitCode, s.TotalBytes, size, s.Truncated)
			}
			wantHead, wantTail := 0, 0
			switch lim.Strategy {
			case capture.Head:
				wantHead = keep
			case capture.Tail:
				wantTail = keep
			case capture.Middle:
				wantHead, wantTail = 4<<10, 4<<10
			}
			if len(s.Head) != wantHead || len(s.Tail) != wantTail || s.OmittedBytes != size-int64(wantHead+wantTail) {
				t.Fatalf("kept head %d tail %d omitted %d", len(s.Head), len(s.Tail), s.OmittedBytes)
			}
			for i, c := range s.Head {
				if c != pattern(int64(i)) {
					t.Fatalf("head byte %d is %q, want %q", i, c, pattern(int64(i)))
				}
			}
			tailStart := size - int64(len(s.Tail))
			for i, c := range s.Tail {
				if c != pattern(tailStart+int64(i)) {
					t.Fatalf("tail byte %d is %q, want %q", tailStart+int64(i), c, pattern(tailStart+int64(i)))
				}
			}
			if res.Combined.TotalBytes != size {
				t.Errorf("combined total %d", res.Combined.TotalBytes)
			}
			grew := int64(h.max.Load()) - int64(base)
			t.Logf("%d MiB through %v: heap in use peaked %.2f MiB above the start (%.2f MiB in all)",
				size>>20, lim.Strategy, float64(grew)/(1<<20), float64(h.max.Load())/(1<<20))
			if grew > 16<<20 {
				t.Errorf("heap in use grew by %d bytes; want under 16 MiB", grew)
			}
		})
	}
}

// BenchmarkTrue compares running /bin/true through Run with plain os/exec.
func BenchmarkTrue(b *testing.B) {
	b.Run("os-exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("runner", func(b *testing.B) {
		spec := Spec{Argv: []string{"/bin/true"}, Env: []string{}}
		for b.Loop() {
			if _, err := Run(context.Background(), spec); err != nil {
				b.Fatal(err)
			}
		}
	})
	// With cgroup tracking (UseCgroups), as agentexec's own commands use it
	// where the machine allows.
	b.Run("runner-cgroup", func(b *testing.B) {
		pool, err := FindCgroups()
		if err != nil {
			b.Skip(err)
		}
		UseCgroups(pool)
		defer func() { UseCgroups(nil); pool.Close() }()
		spec := Spec{Argv: []string{"/bin/true"}, Env: []string{}}
		for b.Loop() {
			if _, err := Run(context.Background(), spec); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCapture compares 1 GiB of output through Run's middle capture
// (128 KiB kept) with plain os/exec copying into io.Discard.
func BenchmarkCapture(b *testing.B) {
	size := bigSize()
	argv, helperEnv := proctest.HelperArgv(b, "write", strconv.FormatInt(size, 10))
	b.Run("os-exec-discard", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = []string{helperEnv}
			cmd.Stdout = io.Discard
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("runner-middle-128KiB", func(b *testing.B) {
		b.SetBytes(size)
		lim := capture.Limit{Strategy: capture.Middle, Max: 128 << 10, HeadKeep: 4 << 10, TailKeep: 4 << 10}
		var h heapSampler
		for b.Loop() {
			res, err := Run(context.Background(), Spec{Argv: argv, Env: []string{helperEnv}, Stdout: lim, Combined: lim, OnOutput: h.sample})
			if err != nil || res.Stdout.TotalBytes != size {
				b.Fatal(err, res.Stdout.TotalBytes)
			}
		}
		b.ReportMetric(float64(h.max.Load())/(1<<20), "MiB-heap-peak")
	})
}
