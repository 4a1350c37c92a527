//go:build linux

package observe_test

import (
	"runtime"
	"testing"

	"github.com/agentexec/agentexec/jobs"
	"github.com/agentexec/agentexec/sandbox"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	sandbox.Main()
	jobs.Main()
	goleak.VerifyTestMain(m)
}

func runtimeVersion() string { return runtime.Version() }
