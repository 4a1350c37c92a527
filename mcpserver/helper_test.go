//go:build linux

package mcpserver

import (
	"context"
	"fmt"
	"os"

	"github.com/agentexec/agentexec/config"
	"github.com/agentexec/agentexec/host"
)

// helperStdio serves the test configuration (from $AGENTEXEC_TEST_CONFIG)
// over stdin and stdout: the real path an agent host takes.
func helperStdio([]string) int {
	cfg, err := config.Parse("test.toml", os.Getenv("AGENTEXEC_TEST_CONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.Workspace = os.Getenv("AGENTEXEC_TEST_WORKSPACE")
	h, err := host.New(cfg, host.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s := New(h, Options{})
	err = s.ServeStdio(context.Background())
	s.Shutdown(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
