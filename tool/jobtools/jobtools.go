// Package jobtools are the tools that let a model follow its background
// jobs (seed 001's background mode, and foreground calls that detached):
// job_list, job_output (paging by byte or line, waiting for more),
// job_kill and job_wait. A model sees only the jobs of its own
// conversation.
package jobtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentexec/agentexec/jobs"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
)

// Names of the tools.
const (
	ListName   = "job_list"
	OutputName = "job_output"
	KillName   = "job_kill"
	WaitName   = "job_wait"
)

// Limits.
const (
	MaxWaitOutput  = 60 * time.Second
	DefaultWait    = 30 * time.Second
	MaxWait        = 10 * time.Minute
	waitTailBytes  = 2 << 10
	killGraceLimit = 2 * time.Second
)

// All returns the four tools over m.
func All(m *jobs.Manager) []tool.Tool {
	return []tool.Tool{&List{M: m}, &Output{M: m}, &Kill{M: m}, &Wait{M: m}}
}

// action is a validated job-tool call: it runs no command, so policy sees
// an empty request.
type action struct {
	run func(ctx context.Context, call *tool.Call) *tool.Result
}

func (a *action) Request() policy.Request { return policy.Request{} }
func (a *action) Run(ctx context.Context, call *tool.Call) *tool.Result {
	return a.run(ctx, call)
}

func invalid(err error) *tool.Result {
	return tool.Errorf(tool.KindValidation, "invalid input: %v", err)
}

// jobError words a jobs error for the model.
func jobError(id string, err error) *tool.Result {
	switch {
	case errors.Is(err, jobs.ErrNoJob):
		return tool.Errorf(tool.KindValidation, "no job with id %q in this conversation; job_list shows your jobs", id)
	case errors.Is(err, jobs.ErrOtherConversation):
		return tool.Errorf(tool.KindPermissionDenied, "permission denied: job %q belongs to another conversation", id)
	}
	return tool.Errorf(tool.KindExecution, "job %s: %v", id, err)
}

func jobID(a *tool.Args) (string, *tool.Result) {
	id, ok, err := a.String("job_id")
	if err != nil {
		return "", invalid(err)
	}
	if !ok || id == "" {
		return "", invalid(&tool.ValidationError{Field: "job_id", Problem: "is required; job_list shows your jobs"})
	}
	return id, nil
}

func seconds(a *tool.Args, field string, def, limit time.Duration) (time.Duration, *tool.Result) {
	f, ok, err := a.Number(field, tool.NumberRule{Fractions: true})
	if err != nil {
		return 0, invalid(err)
	}
	if !ok {
		return def, nil
	}
	if f < 0 || f > limit.Seconds() {
		return 0, invalid(&tool.ValidationError{Field: field, Problem: fmt.Sprintf("must be between 0 and %g; got %v", limit.Seconds(), f)})
	}
	return time.Duration(f * float64(time.Second)), nil
}

func summary(i *jobs.Info) map[string]any {
	m := map[string]any{"id": i.ID, "pid": i.Pid, "state": i.Describe(), "command": i.Command, "started": i.Started, "output_file": i.JobDir + "/output"}
	if i.Note != "" {
		m["note"] = i.Note
	}
	if i.ExitCode != nil {
		m["exit_code"] = *i.ExitCode
	}
	return m
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}

func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// List is job_list.
type List struct{ M *jobs.Manager }

// Name returns "job_list".
func (*List) Name() string { return ListName }

// Description tells the model what the tool does.
func (*List) Description(*tool.Call) string {
	return "List your background jobs (started with mode=\"background\", or foreground calls that ran long and were detached): id, pid, state, age and command."
}

// InputSchema takes no input.
func (*List) InputSchema() json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`)
}

// Annotations: read-only.
func (*List) Annotations() tool.Annotations {
	return tool.Annotations{Title: "List background jobs", ReadOnly: true, Idempotent: true}
}

// Prepare validates the (empty) input.
func (t *List) Prepare(call *tool.Call, raw json.RawMessage) (tool.Action, *tool.Result) {
	if _, err := tool.ParseArgs(raw); err != nil {
		return nil, invalid(err)
	}
	return &action{run: func(ctx context.Context, call *tool.Call) *tool.Result {
		list, err := t.M.List(call.Conversation)
		if err != nil {
			return tool.Errorf(tool.KindExecution, "%v", err)
		}
		if len(list) == 0 {
			return &tool.Result{Text: "No background jobs in this conversation.", Structured: map[string]any{"jobs": []any{}}}
		}
		var b strings.Builder
		var items []any
		for _, j := range list {
			fmt.Fprintf(&b, "%s  pid %d  %s  %s ago  %s\n", j.ID, j.Pid, j.Describe(), age(j.Started), shorten(j.Command, 80))
			if j.Note != "" {
				fmt.Fprintf(&b, "  [note: %s]\n", j.Note)
			}
			items = append(items, summary(j))
		}
		return &tool.Result{Text: strings.TrimRight(b.String(), "\n"), Structured: map[string]any{"jobs": items}}
	}}, nil
}

// Output is job_output.
type Output struct{ M *jobs.Manager }

// Name returns "job_output".
func (*Output) Name() string { return OutputName }

// Description tells the model what the tool does.
func (*Output) Description(*tool.Call) string {
	return "Read a page of a background job's output. offset and limit count bytes, or lines with lines=true; the answer says where the next page starts. " +
		"wait_seconds (up to 60) waits for new output or the job's end before answering, to follow a running job."
}

// InputSchema describes job_output's input.
func (*Output) InputSchema() json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {
  "job_id": {"type": "string", "description": "The job's id (from the background answer or job_list)"},
  "offset": {"type": "integer", "minimum": 0, "description": "Where to start: a byte offset, or a line index with lines=true. Default 0"},
  "limit": {"type": "integer", "minimum": 1, "description": "How much to read: bytes (default 65536, at most 1048576), or lines with lines=true (default 200)"},
  "lines": {"type": "boolean", "description": "Count offset and limit in lines"},
  "wait_seconds": {"type": "number", "minimum": 0, "maximum": 60, "description": "Wait up to this long for output past offset, or the job's end"}
}, "required": ["job_id"], "additionalProperties": false}`)
}

// Annotations: read-only.
func (*Output) Annotations() tool.Annotations {
	return tool.Annotations{Title: "Read a background job's output", ReadOnly: true, Idempotent: true}
}

// Prepare validates the input.
func (t *Output) Prepare(call *tool.Call, raw json.RawMessage) (tool.Action, *tool.Result) {
	a, err := tool.ParseArgs(raw, "job_id", "offset", "limit", "lines", "wait_seconds")
	if err != nil {
		return nil, invalid(err)
	}
	id, res := jobID(a)
	if res != nil {
		return nil, res
	}
	var offset, limit int64
	if f, ok, err := a.Number("offset", tool.NumberRule{}); err != nil {
		return nil, invalid(err)
	} else if ok {
		if f < 0 {
			return nil, invalid(&tool.ValidationError{Field: "offset", Problem: "must not be negative"})
		}
		offset = tool.Saturate(f)
	}
	if f, ok, err := a.Number("limit", tool.NumberRule{}); err != nil {
		return nil, invalid(err)
	} else if ok {
		if f < 1 {
			return nil, invalid(&tool.ValidationError{Field: "limit", Problem: "must be at least 1"})
		}
		limit = tool.Saturate(f)
	}
	lines := false
	if a.Has("lines") {
		v, ok := a.Bool("lines")
		if !ok {
			return nil, invalid(&tool.ValidationError{Field: "lines", Problem: "must be true or false"})
		}
		lines = v
	}
	wait, res := seconds(a, "wait_seconds", 0, MaxWaitOutput)
	if res != nil {
		return nil, res
	}
	return &action{run: func(ctx context.Context, call *tool.Call) *tool.Result {
		if wait > 0 && !lines {
			if err := t.M.WaitOutput(ctx, id, call.Conversation, offset, wait); err != nil && !errors.Is(err, context.Canceled) {
				return jobError(id, err)
			}
		}
		info, err := t.M.Get(id, call.Conversation)
		if err != nil {
			return jobError(id, err)
		}
		p, err := t.M.ReadOutput(id, call.Conversation, offset, limit, lines)
		if err != nil {
			return jobError(id, err)
		}
		var b strings.Builder
		if info.Note != "" {
			fmt.Fprintf(&b, "[note: %s]\n", info.Note)
		}
		if !lines && p.Offset != offset && p.Dropped == 0 && offset < p.Total {
			fmt.Fprintf(&b, "[offset %d is inside a UTF-8 character; this page starts at its first byte, %d]\n", offset, p.Offset)
		}
		if lines {
			fmt.Fprintf(&b, "[job %s: %s; lines %d to %d (bytes %d to %d of %d so far); next line offset %d]\n",
				id, info.Describe(), p.FirstLine, max(p.NextLine-1, p.FirstLine), p.Offset, p.Next, p.Total, p.NextLine)
		} else {
			fmt.Fprintf(&b, "[job %s: %s; bytes %d to %d of %d so far; next offset %d]\n", id, info.Describe(), p.Offset, p.Next, p.Total, p.Next)
		}
		if p.Dropped > 0 {
			fmt.Fprintf(&b, "[%d earlier bytes were dropped to keep the output file under its size cap]\n", p.Dropped)
		}
		b.WriteString(strings.ToValidUTF8(string(p.Data), "\uFFFD"))
		switch {
		case p.EOF && p.Ended:
			b.WriteString("\n[end of output: the job has ended]")
		case p.EOF && info.Running():
			b.WriteString("\n[no more output yet: the job is still running; use wait_seconds to wait for more]")
		case p.EOF:
			b.WriteString("\n[end of output so far: the job is " + info.Describe() + "]")
		}
		next := p.Next
		if lines {
			next = p.NextLine
		}
		return &tool.Result{Text: b.String(), Structured: map[string]any{
			"job_id": id, "state": info.Describe(), "offset": p.Offset, "next": next, "total_bytes": p.Total, "eof": p.EOF, "ended": p.Ended,
		}}
	}}, nil
}

// Kill is job_kill.
type Kill struct{ M *jobs.Manager }

// Name returns "job_kill".
func (*Kill) Name() string { return KillName }

// Description tells the model what the tool does.
func (*Kill) Description(*tool.Call) string {
	return "Stop a background job and everything it started (SIGTERM, then SIGKILL after a grace period)."
}

// InputSchema describes job_kill's input.
func (*Kill) InputSchema() json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {"job_id": {"type": "string", "description": "The job's id"}}, "required": ["job_id"], "additionalProperties": false}`)
}

// Annotations: destructive.
func (*Kill) Annotations() tool.Annotations {
	return tool.Annotations{Title: "Stop a background job", Destructive: true, Idempotent: true}
}

// Prepare validates the input.
func (t *Kill) Prepare(call *tool.Call, raw json.RawMessage) (tool.Action, *tool.Result) {
	a, err := tool.ParseArgs(raw, "job_id")
	if err != nil {
		return nil, invalid(err)
	}
	id, res := jobID(a)
	if res != nil {
		return nil, res
	}
	return &action{run: func(ctx context.Context, call *tool.Call) *tool.Result {
		before, err := t.M.Get(id, call.Conversation)
		if err != nil {
			return jobError(id, err)
		}
		if !before.Running() && before.State != "lost" {
			return &tool.Result{Text: fmt.Sprintf("job %s had already ended: %s", id, before.Describe()), Structured: summary(before)}
		}
		info, err := t.M.Kill(ctx, id, call.Conversation, killGraceLimit)
		if err != nil {
			return jobError(id, err)
		}
		return &tool.Result{Text: fmt.Sprintf("job %s (pid %d) stopped: %s", id, info.Pid, info.Describe()), Structured: summary(info)}
	}}, nil
}

// Wait is job_wait.
type Wait struct{ M *jobs.Manager }

// Name returns "job_wait".
func (*Wait) Name() string { return WaitName }

// Description tells the model what the tool does.
func (*Wait) Description(*tool.Call) string {
	return "Wait for a background job to end (up to timeout_seconds, default 30, at most 600) and report how it ended with the end of its output."
}

// InputSchema describes job_wait's input.
func (*Wait) InputSchema() json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {
  "job_id": {"type": "string", "description": "The job's id"},
  "timeout_seconds": {"type": "number", "minimum": 0, "maximum": 600, "description": "How long to wait. Default 30"}
}, "required": ["job_id"], "additionalProperties": false}`)
}

// Annotations: read-only.
func (*Wait) Annotations() tool.Annotations {
	return tool.Annotations{Title: "Wait for a background job", ReadOnly: true, Idempotent: true}
}

// Prepare validates the input.
func (t *Wait) Prepare(call *tool.Call, raw json.RawMessage) (tool.Action, *tool.Result) {
	a, err := tool.ParseArgs(raw, "job_id", "timeout_seconds")
	if err != nil {
		return nil, invalid(err)
	}
	id, res := jobID(a)
	if res != nil {
		return nil, res
	}
	timeout, res := seconds(a, "timeout_seconds", DefaultWait, MaxWait)
	if res != nil {
		return nil, res
	}
	return &action{run: func(ctx context.Context, call *tool.Call) *tool.Result {
		info, err := t.M.Wait(ctx, id, call.Conversation, timeout)
		if err != nil && info == nil {
			return jobError(id, err)
		}
		var text string
		if info.Running() {
			text = fmt.Sprintf("job %s is still running after waiting %s (pid %d, started %s ago)", id, timeout, info.Pid, age(info.Started))
		} else if d := info.Ended.Sub(info.Started); !info.Ended.IsZero() && !info.Started.IsZero() && d >= 0 {
			text = fmt.Sprintf("job %s ended: %s after %s", id, info.Describe(), d.Round(time.Millisecond))
		} else {
			text = fmt.Sprintf("job %s ended: %s (when is not known)", id, info.Describe())
		}
		if info.Note != "" {
			text += "\n[note: " + info.Note + "]"
		}
		if p, err := t.M.ReadOutput(id, call.Conversation, 0, 1, false); err == nil && p.Total > 0 {
			tail, _ := t.M.ReadOutput(id, call.Conversation, max(p.Total-waitTailBytes, 0), waitTailBytes, false)
			if tail != nil {
				text += fmt.Sprintf("\nlast output (bytes %d to %d; job_output reads more):\n%s", tail.Offset, tail.Next, strings.ToValidUTF8(string(tail.Data), "\uFFFD"))
			}
		}
		return &tool.Result{Text: text, Structured: summary(info)}
	}}, nil
}
