//go:build linux

package unifiedexec

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
	"github.com/agentexec/agentexec/tool/bash"
)

// BenchmarkTrue compares exec_command of `true` with the bash tool's call
// of `true` (the baseline), both through a registry with the guarded
// policy, without a sandbox. Target: exec_command within 1.2x.
func BenchmarkTrue(b *testing.B) {
	eng, err := policy.NewEngine(policy.Guarded, nil)
	if err != nil {
		b.Fatal(err)
	}
	c := &tool.Call{Conversation: "bench", WorkDir: b.TempDir()}
	b.Run("baseline=bash", func(b *testing.B) {
		r := tool.NewRegistry()
		r.Checkers = []policy.Checker{eng}
		r.Register(bash.New())
		in := json.RawMessage(`{"command": "true"}`)
		for b.Loop() {
			if res := r.Dispatch(context.Background(), c, bash.Name, in); res.IsError {
				b.Fatal(res.Text)
			}
		}
	})
	for _, mode := range []string{"pipes", "tty"} {
		b.Run("exec_command/"+mode, func(b *testing.B) {
			m := &Manager{}
			defer m.Close()
			r := tool.NewRegistry()
			r.Checkers = []policy.Checker{eng}
			for _, tl := range All(m, &ExecCommand{}, &WriteStdin{}) {
				r.Register(tl)
			}
			in := json.RawMessage(`{"cmd": "true", "tty": ` + map[string]string{"pipes": "false", "tty": "true"}[mode] + `}`)
			for b.Loop() {
				if res := r.Dispatch(context.Background(), c, ExecCommandName, in); res.IsError || !strings.Contains(res.Text, "exited with code 0") {
					b.Fatal(res.Text)
				}
			}
		})
	}
}

// BenchmarkTrueInterleaved runs the three calls of BenchmarkTrue in turn
// in every iteration, so that a machine whose load changes during the run
// affects them alike, and reports each one's mean time and the ratios to
// the bash baseline.
func BenchmarkTrueInterleaved(b *testing.B) {
	eng, err := policy.NewEngine(policy.Guarded, nil)
	if err != nil {
		b.Fatal(err)
	}
	c := &tool.Call{Conversation: "bench", WorkDir: b.TempDir()}
	m := &Manager{}
	defer m.Close()
	r := tool.NewRegistry()
	r.Checkers = []policy.Checker{eng}
	r.Register(bash.New())
	for _, tl := range All(m, &ExecCommand{}, &WriteStdin{}) {
		r.Register(tl)
	}
	calls := []struct {
		name, tool string
		in         json.RawMessage
	}{
		{"bash", bash.Name, json.RawMessage(`{"command": "true"}`)},
		{"pipes", ExecCommandName, json.RawMessage(`{"cmd": "true"}`)},
		{"tty", ExecCommandName, json.RawMessage(`{"cmd": "true", "tty": true}`)},
	}
	total := make([]time.Duration, len(calls))
	for b.Loop() {
		for i, cl := range calls {
			start := time.Now()
			if res := r.Dispatch(context.Background(), c, cl.tool, cl.in); res.IsError {
				b.Fatal(res.Text)
			}
			total[i] += time.Since(start)
		}
	}
	for i, cl := range calls {
		b.ReportMetric(float64(total[i].Microseconds())/float64(b.N)/1000, "ms/"+cl.name)
	}
	b.ReportMetric(float64(total[1])/float64(total[0]), "ratio-pipes")
	b.ReportMetric(float64(total[2])/float64(total[0]), "ratio-tty")
}

// BenchmarkFirstOutput measures how long a pending empty write_stdin (a
// poll) takes to return after the process prints: the session prints a
// line each time it reads one, and the time runs from the write that makes
// it print to the poll's answer. The baseline is the same session's
// terminal.Session.Changed signal, which fires as soon as the bytes are
// read from the terminal. Target: under 50 ms.
func BenchmarkFirstOutput(b *testing.B) {
	for _, name := range []string{"baseline=changed", "write_stdin_poll"} {
		b.Run(name, func(b *testing.B) {
			m := &Manager{}
			defer m.Close()
			r := tool.NewRegistry()
			for _, tl := range All(m, &ExecCommand{}, &WriteStdin{ProgramInput: "allow"}) {
				r.Register(tl)
			}
			c := &tool.Call{Conversation: "bench"}
			res := r.Dispatch(context.Background(), c, ExecCommandName, json.RawMessage(`{"cmd": "while read -r l; do echo \"got $l\"; done", "pipe_stdin": true, "yield_time_ms": 250}`))
			id := sessionRE.FindStringSubmatch(res.Text)
			if id == nil {
				b.Fatal(res.Text)
			}
			e, _ := m.Get(id[1], "bench")
			poll := json.RawMessage(`{"session_id": "` + id[1] + `", "yield_time_ms": 30000}`)
			var total time.Duration
			for b.Loop() {
				done := make(chan *tool.Result, 1)
				ch := e.Session.Changed()
				if name == "write_stdin_poll" {
					go func() { done <- r.Dispatch(context.Background(), c, WriteStdinName, poll) }()
				}
				time.Sleep(time.Millisecond) // let the poll start waiting: not part of the measure
				start := time.Now()
				e.Session.Write([]byte("x\n"))
				if name == "write_stdin_poll" {
					res := <-done
					if !strings.Contains(res.Text, "got x") {
						b.Fatal(res.Text)
					}
				} else {
					<-ch
					e.Session.Read(0)
				}
				total += time.Since(start)
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/first-output")
		})
	}
}
