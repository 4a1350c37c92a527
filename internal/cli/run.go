package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/agentexec/agentexec/capture"
	"github.com/agentexec/agentexec/host"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/sandbox"
	"github.com/agentexec/agentexec/tool"
	"github.com/spf13/cobra"
)

type runOptions struct {
	setup         setupOptions // --config, --profile, --sandbox, --cwd
	policy        string       // "on" or "off"
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
	cgroup        string
}

func newRunCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	o := &runOptions{grace: runner.DefaultGrace, maxOutput: capture.DefaultMax, strategy: capture.Middle, cgroup: "auto", policy: "on"}
	cmd := &cobra.Command{
		Use:   "run [flags] COMMAND | run [flags] --argv -- PROGRAM [ARGS...]",
		Short: "Run one command the way an agent's call runs it, and stream its output",
		Long: `Run one command the way an agent's call runs it, and stream its stdout and
stderr: the configuration's policy decides first, then the command runs under
its sandbox profile, in its own session, with the configured environment.

COMMAND is one shell command line, run with bash -c (or sh -c where bash is
missing). With --argv the arguments are a program and its arguments, run
without a shell: nothing is expanded.

The policy is the configuration's profile and rules and the built-in
guardrails (` + "`agentexec check`" + ` shows its decision). Rules limited with
"tools" apply to run when they name "run". A command the policy refuses does
not run: agentexec prints the reason and what to do instead and exits 123.
When the policy asks, agentexec asks on the terminal; with no terminal the
command is refused (exit 123) with the rule that would allow it.
--policy off runs the command without the policy.

The sandbox is the configuration's [sandbox] profile (workspace-write unless
the configuration says otherwise; the workspace is --cwd, or the current
directory); --sandbox chooses another, --sandbox off runs unconfined.

The command sees only a safe environment (PATH, HOME, LANG, ... and settings
that keep tools from prompting), the configuration's [env], then --inherit
and --env. When it exits, anything it left running is killed (unless
--keep-leftovers). On timeout or interrupt its whole process tree gets
SIGTERM, then SIGKILL after --grace.

Exit status: the command's own; 123 when the policy refused it (nothing
ran); 124 on timeout; 128+N when killed by signal N; 126 when the program
cannot be run; 127 when it is not found; 125 when agentexec itself failed.`,
		Example: `  agentexec run 'echo hello'
  agentexec run --timeout 10s --json 'make test'
  agentexec run --argv -- /usr/bin/printf '%s\n' '$HOME;*'
  agentexec run --policy off --sandbox off 'git add -A'   # a plain runner`,
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
			return o.run(cmd, args, stdin, stdout, stderr)
		},
	}
	f := cmd.Flags()
	o.setup.addPolicyFlags(f)
	f.StringVar(&o.policy, "policy", "on", "on: the configuration's policy decides before the command runs; off: run it without the policy")
	f.StringVar(&o.setup.sandbox, "sandbox", "", "sandbox profile: "+strings.Join(sandbox.Profiles, ", ")+" (default from the configuration: workspace-write; the workspace is --cwd, or the current directory)")
	o.setup.addNetworkFlags(f)
	f.StringVar(&o.setup.cwd, "cwd", "", "working directory, and the sandbox's workspace (default: the configuration's workspace, or the current directory)")
	f.BoolVar(&o.argv, "argv", false, "run the arguments as PROGRAM ARGS... without a shell")
	f.BoolVar(&o.json, "json", false, "print the structured result as one JSON object instead of streaming")
	f.StringVar(&o.shell, "shell", "", "shell for COMMAND (default bash, or sh where bash is missing)")
	f.Var(durationFlag{&o.timeout}, "timeout", "end the command after this long, e.g. 30s or 5m (0: no timeout)")
	f.Var(durationFlag{&o.grace}, "grace", "time between SIGTERM and SIGKILL when ending the command")
	f.Var(envFlag{&o.env}, "env", "set KEY=value in the command's environment (repeatable)")
	f.StringSliceVar(&o.inherit, "inherit", nil, "pass these host environment variables through (repeatable, comma-separated)")
	f.Var(sizeFlag{&o.maxOutput}, "max-output", "output kept per stream for --json, e.g. 64KiB or 1MiB")
	f.Var(strategyFlag{&o.strategy}, "truncate", "which part of long output --json keeps: head, tail or middle")
	f.BoolVar(&o.keepLeftovers, "keep-leftovers", false, "leave running what the command started in the background")
	f.StringVar(&o.cgroup, "cgroup", "auto", "hold the command's process tree in a cgroup v2: auto (where this process may create one), off, or a cgroup v2 directory (default from the configuration's tools.cgroup)")
	f.StringVar(&o.stdinFile, "stdin-file", "", "give the command this file's bytes on stdin ('-': agentexec's own stdin); default /dev/null")
	return cmd
}

func (o *runOptions) spec(args []string, h *host.Host) (runner.Spec, error) {
	spec := runner.Spec{
		Shell:         o.shell,
		Dir:           h.Workspace,
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
	spec.Env = append([]string(nil), h.Env...)
	for _, name := range o.inherit {
		if v, ok := os.LookupEnv(name); ok {
			spec.Env = append(spec.Env, name+"="+v)
		}
	}
	spec.Env = append(spec.Env, o.env...)
	lim := capture.Limit{Strategy: o.strategy, Max: o.maxOutput}
	spec.Stdout, spec.Stderr, spec.Combined = lim, lim, lim
	if h.Sandbox.Enabled() {
		wrap, err := h.Sandbox.Wrapper(sandbox.Options{})
		if err != nil {
			return spec, &exitError{code: ExitFailed, msg: "sandbox " + h.Sandbox.Name + ": " + err.Error() + " (--sandbox off runs without one)"}
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

// host assembles what run needs from the configuration and the flags: the
// policy engine, the environment, the workspace and the sandbox. run
// registers no tools, writes no audit log and opens its own cgroup pool.
func (o *runOptions) host(cmd *cobra.Command) (*host.Host, error) {
	if o.policy != "on" && o.policy != "off" {
		return nil, &exitError{code: ExitFailed, msg: fmt.Sprintf("--policy %q: use on or off", o.policy)}
	}
	if o.setup.cwd != "" {
		if fi, err := os.Stat(o.setup.cwd); err != nil || !fi.IsDir() {
			return nil, &exitError{code: ExitFailed, msg: fmt.Sprintf("--cwd: bad working directory %q: not an existing directory", o.setup.cwd)}
		}
	}
	cfg, err := o.setup.load(cmd)
	if err != nil {
		return nil, err
	}
	if !cmd.Flags().Changed("cgroup") {
		o.cgroup = cfg.Tools.Cgroup
	}
	cfg.Tools.Enabled, cfg.Tools.JobTools, cfg.Tools.Cgroup, cfg.Audit.Path = nil, false, "off", "off"
	h, err := host.New(cfg, host.Options{})
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "host: ")
		if strings.Contains(msg, "sandbox") {
			msg += " (--sandbox off runs without one)"
		}
		return nil, &exitError{code: ExitFailed, msg: msg}
	}
	return h, nil
}

// decide puts the command to the configuration's policy. It returns nil
// when the command may run, and an exit error with ExitRefused, the reason,
// what to do instead and the rule that would allow it, when it may not.
// When the policy asks, a person at the terminal answers.
func (o *runOptions) decide(ctx context.Context, h *host.Host, args []string) error {
	if o.policy == "off" {
		return nil
	}
	req := policy.Request{Tool: "run", Cwd: h.Workspace}
	if o.argv {
		req.Executable, req.Args = args[0], args[1:]
	} else {
		req.Command, req.Shell = args[0], "bash"
	}
	for _, kv := range o.env {
		k, _, _ := strings.Cut(kv, "=")
		req.EnvKeys = append(req.EnvKeys, k)
	}
	d := h.Engine.Check(req)
	declined := ""
	if d.Verdict == policy.Ask {
		approver, done, err := runApprover()
		if err != nil {
			declined = "it needs a person's approval, and there is no terminal to ask on"
		} else {
			defer done()
			a, err := approver.Approve(ctx, tool.ApprovalRequest{Tool: "run", Request: req, Decision: d})
			switch {
			case err != nil:
				declined = "approval could not be obtained: " + err.Error()
			case a.Approved:
				return nil
			default:
				declined = "declined at the terminal"
			}
		}
	}
	if d.Verdict == policy.Allow {
		return nil
	}
	return &exitError{code: ExitRefused, msg: refusalText(req, d, declined)}
}

// runApprover returns who answers run's "ask" decisions: the person at
// the terminal (run prints the rule to paste itself). Tests replace it.
var runApprover = func() (tool.Approver, func(), error) {
	tty, err := openTTY()
	if err != nil {
		return nil, nil, err
	}
	return &promptApprover{in: tty, out: tty, quiet: true}, func() { tty.Close() }, nil
}

// refusalText tells a person why run refused a command and how to run it.
func refusalText(req policy.Request, d policy.Decision, declined string) string {
	var b strings.Builder
	rule := d.Rule
	if rule == "" {
		rule = "(default)"
	}
	if declined != "" {
		fmt.Fprintf(&b, "refused (policy rule %s asks: %s): %s; nothing ran", rule, d.Reason, declined)
	} else {
		fmt.Fprintf(&b, "refused by policy rule %s; nothing ran: %s", rule, d.Message())
		if d.Text != "" && d.Alternative != "" && !strings.Contains(d.Text, d.Alternative) {
			fmt.Fprintf(&b, " %s", d.Alternative)
		}
	}
	if r := tool.AllowRule(req, d); r != "" {
		b.WriteString("\nTo allow it, add to the configuration (agentexec config show names the file):\n\n")
		for _, line := range strings.Split(strings.TrimRight(r, "\n"), "\n") {
			b.WriteString("    " + line + "\n")
		}
	}
	b.WriteString("\nTo run it without the policy: agentexec run --policy off ...")
	return b.String()
}

func (o *runOptions) run(cmd *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	h, err := o.host(cmd)
	if err != nil {
		return err
	}
	defer h.Close()
	if h.Egress != nil {
		h.Egress.Ask = ttyNetworkAsker // on_unknown = "ask"
	}
	// An interrupt or termination of agentexec cancels the command, which
	// ends its whole tree.
	ctx, gotSignal, stop := interruptible(cmd.Context())
	defer stop()
	if err := o.decide(ctx, h, args); err != nil {
		return err
	}
	spec, err := o.spec(args, h)
	if err != nil {
		return err
	}
	pool, err := host.OpenCgroups(o.cgroup)
	if err != nil {
		from := "--cgroup"
		if !cmd.Flags().Changed("cgroup") {
			from = "tools.cgroup in the configuration (--cgroup overrides it)"
		}
		return &exitError{code: ExitFailed, msg: from + ": " + strings.TrimPrefix(err.Error(), "host: ")}
	}
	if pool != nil {
		runner.UseCgroups(pool)
		defer func() {
			runner.UseCgroups(nil)
			pool.Close()
		}()
	}

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
	case errors.Is(err, runner.ErrSandbox) && strings.Contains(msg, "cannot execute the program"):
		// The sandbox's trampoline could not execute the program; its
		// error carries no kind, only the system's words.
		if strings.Contains(msg, "no such file or directory") {
			return &exitError{code: ExitNotFound, msg: msg}
		}
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
