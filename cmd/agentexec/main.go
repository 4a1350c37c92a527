// Command agentexec runs commands for AI agents: see the README.
package main

import (
	"os"

	"github.com/agentexec/agentexec/internal/cli"
	"github.com/agentexec/agentexec/jobs"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/sandbox"
)

func main() {
	sandbox.Main() // the sandbox trampoline: confines itself and executes the command
	jobs.Main()    // a background job's supervisor: runs it and exits
	runner.Main()  // a server's watchdog: ends its commands if it is killed
	os.Exit(cli.Run())
}
