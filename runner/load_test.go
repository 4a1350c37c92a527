//go:build linux

package runner

import (
	"context"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// startCPULoad starts n busy-looping processes (the machine's CPUs are
// then contended, as on a loaded CI runner or server) and returns a
// function that ends them and waits for them.
func startCPULoad(t *testing.T, n int) (stop func()) {
	t.Helper()
	var cmds []*exec.Cmd
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	return func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}
}

// TestNoOutputLostUnderCPULoad runs a few hundred short commands 16 at a
// time while busy loops (4 per CPU) and busy goroutines contend for the
// CPUs, and counts the runs whose output came back incomplete. Before the
// runner read its pipes to the end once every writer was gone, a fixed
// read deadline after the main process exited lost the output of some of
// these runs; none may be lost.
func TestNoOutputLostUnderCPULoad(t *testing.T) {
	n := 200 // 400 took 60 to 90 s under the race detector on a loaded machine
	if testing.Short() {
		n = 100
	}
	stop := startCPULoad(t, 4*runtime.NumCPU())
	defer stop()
	// Busy goroutines in this process too, so the readers also wait for
	// the Go scheduler.
	ctx, cancel := context.WithCancel(context.Background())
	var spin sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		spin.Add(1)
		go func() {
			defer spin.Done()
			for ctx.Err() == nil {
				for i := 0; i < 1e6; i++ {
				}
			}
		}()
	}
	defer func() { cancel(); spin.Wait() }()

	var lost, cut atomic.Int64
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			spec := Spec{Command: "echo out; echo err >&2"}
			if i%4 == 0 {
				spec.MergeOutput = true
			}
			res, err := Run(context.Background(), spec)
			if err != nil {
				t.Error(err)
				return
			}
			if res.OutputCut {
				cut.Add(1)
			}
			want := text(res.Stdout) == "out\n" && text(res.Stderr) == "err\n"
			if spec.MergeOutput {
				want = text(res.Stdout) == "out\nerr\n"
			}
			if !want {
				lost.Add(1)
			}
		}()
	}
	wg.Wait()
	if lost.Load() != 0 || cut.Load() != 0 {
		t.Errorf("%d of %d runs lost output, %d reported a cut, under CPU load; want 0", lost.Load(), n, cut.Load())
	}
}
