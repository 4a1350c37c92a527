package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/agentexec/agentexec/capture"
	"github.com/agentexec/agentexec/runner"
)

// Descriptors the supervisor inherits.
const (
	specFD   = 3
	statusFD = 4
	lifeFD   = 5 // the host's life pipe: EOF when the host is gone
)

// Main turns this process into a job supervisor and exits when it was
// started as one; otherwise it returns at once. Call it first thing in main
// (and in TestMain) of any program that starts jobs.
func Main() {
	if len(os.Args) < 2 || os.Args[1] != supervisorArg {
		return
	}
	os.Exit(supervise())
}

// supervise reads the plan, runs the job, records its end and returns the
// supervisor's exit status.
func supervise() int {
	specFile := os.NewFile(specFD, "spec")
	status := os.NewFile(statusFD, "status")
	if specFile == nil || status == nil {
		fmt.Fprintln(os.Stderr, "agentexec supervisor: started without its descriptors; this mode is internal")
		return 2
	}
	// The job must inherit none of these.
	syscall.CloseOnExec(statusFD)
	var p plan
	err := json.NewDecoder(specFile).Decode(&p)
	specFile.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentexec supervisor: cannot read the job spec:", err)
		json.NewEncoder(status).Encode(report{Error: "jobs: the supervisor could not read the job spec: " + err.Error()})
		return 2
	}
	if p.Cgroups != "" {
		if pool, err := runner.OpenCgroups(p.Cgroups); err == nil {
			runner.UseCgroups(pool)
			defer pool.Close()
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	if p.Watch {
		// The host holds the only writer of this pipe: EOF means it is
		// gone (however it died), and the job ends with it.
		syscall.CloseOnExec(lifeFD)
		life := os.NewFile(lifeFD, "life")
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			var b [1]byte
			for {
				if _, err := life.Read(b[:]); err != nil {
					cancel()
					return
				}
			}
		}()
	}
	var once sync.Once
	reported := func(r report) {
		once.Do(func() { json.NewEncoder(status).Encode(r) })
	}
	_, last, err := runJobStreams(ctx, &p, func(info *Info) { reported(report{Pid: info.Pid, Info: info}) }, nil)
	if err != nil {
		r := report{Error: err.Error()}
		var se *runner.StartError
		if errors.As(err, &se) {
			r.Kind = se.Kind.Error()
		}
		reported(r)
		status.Close()
		return 1
	}
	// The last record, for a host that could not read it from the
	// directory (deleted or read-only); a host that is gone does not
	// matter.
	json.NewEncoder(status).Encode(report{Pid: last.Pid, Info: last})
	status.Close()
	return 0
}

// runJobStreams runs a planned job to its end: output into the job's file
// (capped), the record written when it starts, when output is dropped and
// when it ends, and the completion line appended. onStart gets the pid;
// onOutput, if set, sees every chunk too. It returns the runner's result,
// or the error that kept the command from starting.
func runJobStreams(ctx context.Context, p *plan, onStart func(*Info), onOutput func(runner.Stream, []byte)) (*runner.Result, *Info, error) {
	info := &Info{
		ID: p.ID, OwnerPid: os.Getpid(), Command: p.Spec.describe(), Dir: p.Spec.Dir,
		Tool: p.Spec.Tool, Conversation: p.Spec.Conversation, Lifetime: Duration(p.Spec.Lifetime), State: "running",
	}
	info.OwnerStart, _ = procStart(info.OwnerPid)
	wrap, _, err := p.Spec.Sandbox.Hook()
	if err != nil {
		return nil, nil, err
	}
	out, err := openOutput(p.JobDir, p.Spec.MaxOutputBytes, info)
	if err != nil {
		return nil, nil, err
	}
	defer out.close()
	small := capture.Limit{Strategy: capture.Tail, Max: 1}
	res, err := runner.Run(ctx, runner.Spec{
		Wrap:     wrap,
		Command:  p.Spec.Command,
		Shell:    p.Spec.Shell,
		Argv:     p.Spec.Argv,
		Dir:      p.Spec.Dir,
		Env:      p.Spec.Env,
		Timeout:  p.Spec.Lifetime,
		Grace:    p.Spec.Grace,
		Stdout:   small,
		Stderr:   small,
		Combined: small,
		// One pipe for both streams, as the seed's shared output file:
		// the file keeps the exact order of writes.
		MergeOutput: !p.Separate,
		OnStart: func(pid int) {
			out.mu.Lock()
			info.Pid, info.Started = pid, time.Now().UTC()
			info.PidStart, _ = procStart(pid)
			writeInfo(p.JobDir, info)
			first := *info
			out.mu.Unlock()
			onStart(&first)
		},
		OnOutput: func(st runner.Stream, b []byte) {
			out.write(b)
			if onOutput != nil {
				onOutput(st, b)
			}
		},
	})
	if err != nil {
		return nil, nil, err
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	info.State = res.Outcome.String()
	if res.Outcome == runner.Exited {
		code := res.ExitCode
		info.ExitCode = &code
	}
	info.Signal = res.Signal
	info.Ended = time.Now().UTC()
	out.f.WriteString(CompletionLine(res, p.Spec.Lifetime))
	writeInfo(p.JobDir, info)
	last := *info
	return res, &last, nil
}

// CompletionLine is what the supervisor appends to a job's output file when
// it ends, as seed 001 words it: "\n\n[background process completed]\n" on
// exit status 0, "\n\n[background process failed: exit status: N]\n" or
// "... failed: signal: 9 (SIGKILL)]" otherwise, followed by a note when the
// job's leftovers were stopped.
func CompletionLine(res *runner.Result, lifetime time.Duration) string {
	var line string
	switch {
	case res.Outcome == runner.Exited && res.ExitCode == 0:
		line = "\n\n[background process completed]\n"
	case res.Outcome == runner.Exited:
		line = fmt.Sprintf("\n\n[background process failed: exit status: %d]\n", res.ExitCode)
	case res.Outcome == runner.Signaled:
		line = fmt.Sprintf("\n\n[background process failed: signal: %d (%s)]\n", res.Signal, signalName(res.Signal))
	case res.Outcome == runner.TimedOut:
		line = fmt.Sprintf("\n\n[background process failed: stopped after reaching its lifetime of %s]\n", lifetime)
	default:
		line = "\n\n[background process failed: stopped because agentexec shut down]\n"
	}
	if res.LeftoversKilled > 0 {
		line += fmt.Sprintf("[note: %d process(es) it started were still running and were stopped]\n", res.LeftoversKilled)
	}
	return line
}
