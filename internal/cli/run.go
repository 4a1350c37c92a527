package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentexec/agentexec/capture"
	"github.com/agentexec/agentexec/host"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/sandbox"
	"github.com/spf13/cobra"
)

type runOptions struct {
	argv          bool
	json          bool
	shell         string
	timeout       time.Duration
	grace         time.Duration
	cwd           string
	env           []string
	inherit       []string
	maxOutput     int64
	strategy      capture.Strategy
	keepLeftovers bool
	stdinFile     string
	sandbox       string
	cgroup        string
}

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &runOptions{grace: runner.DefaultGrace, maxOutput: capture.DefaultMax, strategy: capture.Middle, cgroup: "auto"}
	cmd := &cobra.Command{
		Use:   "run [flags] COMMAND | run [flags] --argv -- PROGRAM [ARGS...]",
		Short: "Run one command and stream its output",
		Long: `Run one command in its own session and stream its stdout and stderr.

COMMAND is one shell command line, run with bash -c (or sh -c where bash is
missing). With --argv the arguments are a program and its arguments, run
without a shell: nothing is expanded.

The command sees only a safe environment (PATH, HOME, LANG, ... and settings
that keep tools from prompting), plus --env and --inherit. When it exits,
anything it left running is killed (unless --keep-leftovers). On timeout or
interrupt its whole process tree gets SIGTERM, then SIGKILL after --grace.

Exit status: the command's own; 124 on timeout; 128+N when killed by signal
N; 126 when the program cannot be run; 127 when it is not found; 125 when
agentexec itself failed.`,
		Example: `  agentexec run 'echo hello'
  agentexec run --timeout 10s --json 'make test'
  agentexec run --argv -- /usr/bin/printf '%s\n' '$HOME;*'`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return &exitError{code: ExitFailed, msg: "run: give a command, such as: agentexec run 'echo hello'"}
			case !o.argv && len(args) > 1:
				return &exitError{code: ExitFailed, msg: fmt.Sprintf("run: got %d arguments; give the command as one quoted argument, or use --argv -- PROGRAM ARGS...", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.argv, "argv", false, "run the arguments as PROGRAM ARGS... without a shell")
	f.BoolVar(&o.json, "json", false, "print the structured result as one JSON object instead of streaming")
	f.StringVar(&o.shell, "shell", "", "shell for COMMAND (default bash, or sh where bash is missing)")
	f.Var(durationFlag{&o.timeout}, "timeout", "end the command after this long, e.g. 30s or 5m (0: no timeout)")
	f.Var(durationFlag{&o.grace}, "grace", "time between SIGTERM and SIGKILL when ending the command")
	f.StringVar(&o.cwd, "cwd", "", "working directory (default: the current one)")
	f.Var(envFlag{&o.env}, "env", "set KEY=value in the command's environment (repeatable)")
	f.StringSliceVar(&o.inherit, "inherit", nil, "pass these host environment variables through (repeatable, comma-separated)")
	f.Var(sizeFlag{&o.maxOutput}, "max-output", "output kept per stream for --json, e.g. 64KiB or 1MiB")
	f.Var(strategyFlag{&o.strategy}, "truncate", "which part of long output --json keeps: head, tail or middle")
	f.BoolVar(&o.keepLeftovers, "keep-leftovers", false, "leave running what the command started in the background")
	f.StringVar(&o.sandbox, "sandbox", "off", "sandbox profile: "+strings.Join(sandbox.Profiles, ", ")+" (the workspace is --cwd, or the current directory)")
	f.StringVar(&o.cgroup, "cgroup", "auto", "hold the command's process tree in a cgroup v2: auto (where this process may create one), off, or a cgroup v2 directory")
	f.StringVar(&o.stdinFile, "stdin-file", "", "give the command this file's bytes on stdin ('-': agentexec's own stdin); default /dev/null")
	return cmd
}

func (o *runOptions) spec(args []string) (runner.Spec, error) {
	spec := runner.Spec{
		Shell:         o.shell,
		Dir:           o.cwd,
		Timeout:       o.timeout,
		Grace:         o.grace,
		KeepLeftovers: o.keepLeftovers,
	}
	if o.grace == 0 {
		spec.Grace = -1 // --grace 0: SIGKILL at once
	}
	if o.argv {
		spec.Argv = args
	} else {
		spec.Command = args[0]
	}
	spec.Env = runner.SafeEnv()
	for _, name := range o.inherit {
		if v, ok := os.LookupEnv(name); ok {
			spec.Env = append(spec.Env, name+"="+v)
		}
	}
	spec.Env = append(spec.Env, o.env...)
	lim := capture.Limit{Strategy: o.strategy, Max: o.maxOutput}
	spec.Stdout, spec.Stderr, spec.Combined = lim, lim, lim
	if o.sandbox != "off" {
		ws := o.cwd
		if ws == "" {
			ws, _ = os.Getwd()
		}
		ws, _ = filepath.Abs(ws)
		box, err := sandbox.Profile(o.sandbox, sandbox.ProfileOptions{Workspace: ws})
		if err != nil {
			return spec, &exitError{code: ExitFailed, msg: "--sandbox: " + strings.TrimPrefix(err.Error(), "sandbox: ")}
		}
		wrap, err := box.Wrapper(sandbox.Options{})
		if err != nil {
			return spec, &exitError{code: ExitFailed, msg: "--sandbox: " + err.Error()}
		}
		spec.Wrap = wrap
	}
	if o.stdinFile != "" {
		var data []byte
		var err error
		if o.stdinFile == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(o.stdinFile)
		}
		if err != nil {
			return spec, &exitError{code: ExitFailed, msg: "--stdin-file: " + err.Error()}
		}
		if data == nil {
			data = []byte{}
		}
		spec.Stdin = data
	}
	return spec, nil
}

func (o *runOptions) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	spec, err := o.spec(args)
	if err != nil {
		return err
	}
	pool, err := host.OpenCgroups(o.cgroup)
	if err != nil {
		return &exitError{code: ExitFailed, msg: "--cgroup: " + strings.TrimPrefix(err.Error(), "host: ")}
	}
	if pool != nil {
		runner.UseCgroups(pool)
		defer func() {
			runner.UseCgroups(nil)
			pool.Close()
		}()
	}
	// An interrupt or termination of agentexec cancels the command, which
	// ends its whole tree.
	ctx, gotSignal, stop := interruptible(ctx)
	defer stop()

	if !o.json {
		spec.OnOutput = func(s runner.Stream, p []byte) {
			if s == runner.Stderr {
				stderr.Write(p)
			} else {
				stdout.Write(p)
			}
		}
	}
	res, err := runner.Run(ctx, spec)
	if err != nil {
		return startFailure(err)
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(newJSONResult(res)); err != nil {
			return &exitError{code: ExitFailed, msg: "writing the result: " + err.Error()}
		}
	} else {
		o.explain(res, stderr)
	}
	code := exitCode(res)
	if res.Cancelled() {
		if s, ok := gotSignal().(syscall.Signal); ok {
			code = exitSignalBase + int(s)
		}
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// explain tells a person, on stderr, what agentexec did beyond running the
// command.
func (o *runOptions) explain(res *runner.Result, stderr io.Writer) {
	switch {
	case res.TimedOut():
		fmt.Fprintf(stderr, "agentexec: timed out after %s; the command and everything it started were ended\n", o.timeout)
	case res.Cancelled():
		fmt.Fprintln(stderr, "agentexec: interrupted; the command and everything it started were ended")
	}
	if res.LeftoversKilled > 0 && !res.TimedOut() && !res.Cancelled() {
		fmt.Fprintf(stderr, "agentexec: killed %d process(es) the command left running; use --keep-leftovers to keep them\n", res.LeftoversKilled)
	}
}

// exitCode maps a result to agentexec's exit status.
func exitCode(res *runner.Result) int {
	switch res.Outcome {
	case runner.TimedOut:
		return ExitTimedOut
	case runner.Signaled:
		return exitSignalBase + res.Signal
	case runner.Cancelled:
		return exitSignalBase + int(syscall.SIGTERM)
	}
	return res.ExitCode
}

// startFailure maps an error from runner.Run to an exit error.
func startFailure(err error) error {
	msg := strings.TrimPrefix(err.Error(), "runner: ")
	switch {
	case errors.Is(err, runner.ErrNotFound):
		return &exitError{code: ExitNotFound, msg: msg}
	case errors.Is(err, runner.ErrNotExecutable), errors.Is(err, runner.ErrPermission):
		return &exitError{code: ExitCannotInvoke, msg: msg}
	}
	return &exitError{code: ExitFailed, msg: msg}
}

// jsonResult is the --json output.
type jsonResult struct {
	Pid             int     `json:"pid"`
	Outcome         string  `json:"outcome"`
	ExitCode        int     `json:"exit_code"`
	Signal          int     `json:"signal"`
	TimedOut        bool    `json:"timed_out"`
	Cancelled       bool    `json:"cancelled"`
	DurationMS      float64 `json:"duration_ms"`
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	StdoutBytes     int64   `json:"stdout_bytes"`
	StderrBytes     int64   `json:"stderr_bytes"`
	StdoutTruncated bool    `json:"stdout_truncated"`
	StderrTruncated bool    `json:"stderr_truncated"`
	LeftoversKilled int     `json:"leftovers_killed"`
	LeftoversKept   int     `json:"leftovers_kept"`
	OutputCut       bool    `json:"output_cut"`
}

func newJSONResult(r *runner.Result) jsonResult {
	return jsonResult{
		Pid:             r.Pid,
		Outcome:         r.Outcome.String(),
		ExitCode:        r.ExitCode,
		Signal:          r.Signal,
		TimedOut:        r.TimedOut(),
		Cancelled:       r.Cancelled(),
		DurationMS:      float64(r.Duration.Microseconds()) / 1000,
		Stdout:          r.Stdout.Text(),
		Stderr:          r.Stderr.Text(),
		StdoutBytes:     r.Stdout.TotalBytes,
		StderrBytes:     r.Stderr.TotalBytes,
		StdoutTruncated: r.Stdout.Truncated,
		StderrTruncated: r.Stderr.Truncated,
		LeftoversKilled: r.LeftoversKilled,
		LeftoversKept:   r.LeftoversKept,
		OutputCut:       r.OutputCut,
	}
}
