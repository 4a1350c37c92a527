// Command agentexec runs commands for AI agents: see the README.
package main

import (
	"os"

	"github.com/agentexec/agentexec/internal/cli"
)

func main() { os.Exit(cli.Run()) }
