//go:build linux

package terminal

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/runner"
)

// TestCgroupEndsSessionEscapees: with the runner's cgroup pool in use, a
// process that left the session's process group and session and cleared
// its environment (the run's marker with it) is still ended with the
// session, when the session is closed and when its main process exits.
func TestCgroupEndsSessionEscapees(t *testing.T) {
	pool, err := runner.FindCgroups()
	if err != nil {
		if !errors.Is(err, runner.ErrNoCgroups) {
			t.Fatal(err)
		}
		t.Skipf("no cgroup tracking here: %v", err)
	}
	runner.UseCgroups(pool)
	t.Cleanup(func() {
		runner.UseCgroups(nil)
		if err := pool.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	for _, c := range []struct {
		name, command string
		close         bool
	}{
		{"closed", "setsid env -i PATH=" + runner.DefaultPath + " TOKEN sleep 600 & sleep 0.3; echo started; sleep 600", true},
		{"exited", "setsid env -i PATH=" + runner.DefaultPath + " TOKEN sleep 600 & sleep 0.3; echo started", false},
	} {
		for _, tty := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/tty=%v", c.name, tty), func(t *testing.T) {
				token := proctest.Token(t)
				s, err := Start(Spec{Command: strings.ReplaceAll(c.command, "TOKEN", token), TTY: tty, Grace: 100 * time.Millisecond, Env: []string{"PATH=" + runner.DefaultPath}})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				waitFor(t, s, "started")
				if c.close {
					s.Close()
				} else {
					<-s.Ended()
				}
				proctest.NoSurvivors(t, token)
			})
		}
	}
}
