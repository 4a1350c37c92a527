//go:build linux

package runner

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
)

// stress makes the stress tests run at full size (by hand, a few minutes:
// go test -race -run TestEndingATreeNeverKillsAnother -count 5 ./runner/ -args -stress).
var stress = flag.Bool("stress", false, "run the stress tests at full size")

// TestEndingATreeNeverKillsAnother runs many short `echo ok` commands
// interleaved with commands whose trees are being ended at the same time
// (cancelled, timed out, or leaving processes behind), 16 at a time, with
// and without a cgroup pool, so that cgroups, pids and process groups are
// reused while other trees end. Every echo must exit 0 with its output: a
// run that is ending must never signal a process of another run. (Before
// killed cgroups were retired, most echoes after the first SIGKILL'd tree
// died of SIGKILL; CI's size catches that within the first few dozen runs.)
func TestEndingATreeNeverKillsAnother(t *testing.T) {
	n := 120 // 60 echoes
	switch {
	case *stress:
		n = 1000 // 500 echoes
	case testing.Short():
		n = 60
	}
	for _, withCgroups := range []bool{false, true} {
		t.Run(fmt.Sprintf("cgroups=%v", withCgroups), func(t *testing.T) {
			if withCgroups {
				useTestCgroups(t)
			}
			token := proctest.Token(t)
			env := []string{"PATH=" + DefaultPath, token}
			jobs := make(chan int)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var bad []string
			report := func(format string, args ...any) {
				mu.Lock()
				bad = append(bad, fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range jobs {
						switch i % 4 {
						case 0, 2: // must survive whatever the others do
							res, err := Run(context.Background(), Spec{Command: "echo ok", Env: env, Grace: 50 * time.Millisecond})
							if err != nil {
								report("echo %d: %v", i, err)
							} else if res.Outcome != Exited || res.ExitCode != 0 || text(res.Stdout) != "ok\n" {
								report("echo %d: %v, exit %d, signal %d, stdout %q, stderr %q", i, res.Outcome, res.ExitCode, res.Signal, text(res.Stdout), text(res.Stderr))
							}
						case 1: // cancelled once it runs
							ctx, cancel := context.WithCancel(context.Background())
							started := make(chan struct{})
							go func() {
								select {
								case <-started:
								case <-time.After(10 * time.Second):
								}
								cancel()
							}()
							res, err := Run(ctx, Spec{Command: "sleep 600", Env: env, Grace: 20 * time.Millisecond, OnStart: func(int) { close(started) }})
							cancel()
							if err != nil || res.Outcome != Cancelled {
								report("cancelled %d: %v %+v", i, err, res)
							}
						case 3: // a timeout, or leftovers, each ended by the runner
							cmd, timeout := "sleep 600", 5*time.Millisecond
							if i%8 == 7 {
								cmd, timeout = "sleep 600 & sleep 600 & echo left", 0
							}
							res, err := Run(context.Background(), Spec{Command: cmd, Env: env, Timeout: timeout, Grace: 20 * time.Millisecond})
							if err != nil {
								report("%q %d: %v", cmd, i, err)
							} else if timeout > 0 && res.Outcome != TimedOut && res.Outcome != Exited {
								report("%q %d: %v", cmd, i, res.Outcome)
							}
						}
					}
				}()
			}
			for i := range n {
				jobs <- i
			}
			close(jobs)
			wg.Wait()
			for _, b := range bad {
				t.Error(b)
			}
			proctest.NoSurvivors(t, token)
		})
	}
}
