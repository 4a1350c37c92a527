// Command agentexec runs commands for AI agents: see the README.
package main

import (
	"os"

	"github.com/agentexec/agentexec/internal/cli"
	"github.com/agentexec/agentexec/jobs"
)

func main() {
	jobs.Main() // a background job's supervisor: runs it and exits
	os.Exit(cli.Run())
}
