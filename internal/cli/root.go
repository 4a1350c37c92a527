// Package cli holds agentexec's command-line interface: cobra commands,
// flags parsed into the library's structs, and rendering for people (and
// JSON for scripts). It is the only package that imports cobra.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Exit codes agentexec uses for its own failures, as coreutils timeout does.
const (
	ExitRefused      = 123 // the policy refused the command; nothing ran
	ExitTimedOut     = 124 // the command timed out
	ExitFailed       = 125 // agentexec itself failed (bad flags, bad input)
	ExitCannotInvoke = 126 // the program exists but cannot be run
	ExitNotFound     = 127 // the program does not exist
	exitSignalBase   = 128 // 128+N: killed by signal N
)

// exitError carries the process exit code out of a command. A zero message
// means nothing more needs printing.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// Main runs the CLI with args (without the program name) and returns the
// process exit code. Input is read from stdin; output goes to stdout and
// stderr.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "agentexec: "+ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "agentexec: "+err.Error())
	return ExitFailed
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "agentexec",
		Short: "Run commands for AI agents without hangs, leaks, floods or wreckage",
		Long: `agentexec runs commands on behalf of AI agents: every command passes the
policy (built-in guardrails, your rules) and runs in the sandbox, gets its own
session, ends together with everything it started (on exit, timeout or
cancel), sees only the environment it is given, and has its output captured
in bounded memory.

Start with: agentexec run 'echo hello' (a command as an agent's call runs it),
agentexec tools, agentexec call, agentexec mcp, agentexec config show.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.Version = versionText(debug.ReadBuildInfo())
	root.SetVersionTemplate("{{.Version}}")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: usageCode(c), msg: err.Error() + " (see '" + c.CommandPath() + " --help')"}
	})
	root.AddCommand(newRunCmd(stdin, stdout, stderr))
	root.AddCommand(newToolsCmd(stdout))
	root.AddCommand(newCallCmd(stdin, stdout, stderr))
	root.AddCommand(newCheckCmd(stdout))
	root.AddCommand(newHookCmd(stdin, stdout, stderr))
	root.AddCommand(newConfigCmd(stdout))
	root.AddCommand(newMCPCmd(stderr))
	root.AddCommand(newServeCmd(stderr))
	root.AddCommand(newJobsCmd(stdout, stderr))
	root.AddCommand(newSandboxCmd(stdout))
	return root
}

// Run is Main for the real process: it uses os.Args, os.Stdout and
// os.Stderr.
func Run() int {
	return Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}
