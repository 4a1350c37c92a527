package jobs

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentexec/agentexec/sandbox"
)

// TestStartRefusedInsideSandbox: a nested agentexec inside a sandboxed
// command refuses background jobs, which would otherwise outlive it.
func TestStartRefusedInsideSandbox(t *testing.T) {
	t.Setenv(sandbox.EnvVar, "workspace-write")
	m := &Manager{StateDir: filepath.Join(t.TempDir(), "state")}
	_, err := m.Start(context.Background(), Spec{Command: "sleep 60"})
	var se *StartError
	if !errors.As(err, &se) || !strings.Contains(se.Msg, "inside a sandboxed command") {
		t.Fatalf("got %v", err)
	}
}
