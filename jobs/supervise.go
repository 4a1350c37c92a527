package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
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
	var p plan
	err := json.NewDecoder(specFile).Decode(&p)
	specFile.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentexec supervisor: cannot read the job spec:", err)
		json.NewEncoder(status).Encode(report{Error: "jobs: the supervisor could not read the job spec: " + err.Error()})
		return 2
	}
	out, err := os.OpenFile(filepath.Join(p.JobDir, "output"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		json.NewEncoder(status).Encode(report{Error: "jobs: the supervisor cannot open the output file: " + err.Error()})
		return 2
	}
	defer out.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()

	info := &Info{
		ID: p.ID, SupervisorPid: os.Getpid(), Command: p.Spec.Command, Dir: p.Spec.Dir,
		Tool: p.Spec.Tool, Conversation: p.Spec.Conversation, Lifetime: Duration(p.Spec.Lifetime), State: "running",
	}
	var once sync.Once
	small := capture.Limit{Strategy: capture.Tail, Max: 4 << 10}
	res, err := runner.Run(ctx, runner.Spec{
		Command:  p.Spec.Command,
		Shell:    p.Spec.Shell,
		Dir:      p.Spec.Dir,
		Env:      p.Spec.Env,
		Timeout:  p.Spec.Lifetime,
		Grace:    p.Spec.Grace,
		Stdout:   small,
		Stderr:   small,
		Combined: small,
		// One pipe for both streams, as the seed's shared output file:
		// the file keeps the exact order of writes.
		MergeOutput: true,
		OnStart: func(pid int) {
			once.Do(func() {
				info.Pid, info.Started = pid, time.Now().UTC()
				writeInfo(p.JobDir, info)
				json.NewEncoder(status).Encode(report{Pid: pid})
				status.Close()
			})
		},
		OnOutput: func(_ runner.Stream, b []byte) { out.Write(b) },
	})
	if err != nil {
		r := report{Error: err.Error()}
		var se *runner.StartError
		if errors.As(err, &se) {
			r.Kind = se.Kind.Error()
		}
		json.NewEncoder(status).Encode(r)
		return 1
	}
	info.State = res.Outcome.String()
	if res.Outcome == runner.Exited {
		code := res.ExitCode
		info.ExitCode = &code
	}
	info.Signal = res.Signal
	info.Ended = time.Now().UTC()
	out.WriteString(CompletionLine(res, p.Spec.Lifetime))
	writeInfo(p.JobDir, info)
	return 0
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
