//go:build linux

package terminal

import (
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/runner"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ptyFDs counts this process's descriptors on a pseudo-terminal.
func ptyFDs(t testing.TB) int { return proctest.PTYDescriptors(t) }

// start starts a session with a token in its environment and checks, at
// the end of the test, that it ended, that none of its processes survived
// and that its pseudo-terminal is gone.
func start(t *testing.T, spec Spec) *Session {
	t.Helper()
	fds := ptyFDs(t)
	token := proctest.Token(t)
	spec.Env = append(runner.SafeEnv(), token)
	s, err := Start(spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		if left := proctest.Survivors(token); len(left) > 0 {
			t.Errorf("processes survived the session: %v", left)
		}
		if n := ptyFDs(t); n > fds {
			t.Errorf("%d descriptors on a pseudo-terminal were left open (%d before)", n, fds)
		}
	})
	return s
}

// waitFor reads the session's output until it contains want, or fails
// after a generous bound.
func waitFor(t *testing.T, s *Session, want string) string {
	t.Helper()
	var got strings.Builder
	deadline := time.After(20 * time.Second)
	for {
		ch := s.Changed()
		b, _ := s.Read(0)
		got.Write(b)
		if strings.Contains(Readable([]byte(got.String())), want) {
			return got.String()
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %q in the output after 20s; got %q", want, got.String())
		}
		if s.Result() != nil && s.Unread() == 0 {
			b, _ := s.Read(0)
			got.Write(b)
			if !strings.Contains(Readable([]byte(got.String())), want) {
				t.Fatalf("the session ended without %q; got %q", want, got.String())
			}
			return got.String()
		}
	}
}
