package unifiedexec

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/tool"
)

// answer reads the output after the session's cursor and words the reply:
// the header, then the output made readable and cut to maxTokens. When the
// session has ended, everything it wrote has been read and its record is
// forgotten.
func (m *Manager) answer(e *Entry, started time.Time, maxTokens int) *tool.Result {
	r := e.Session.Result() // before reading: an ended session's output is complete
	e.readMu.Lock()
	raw, dropped := e.Session.Read(0)
	text := e.filter.Render(raw)
	e.readMu.Unlock()

	var b strings.Builder
	fmt.Fprintf(&b, "Wall time: %.1f seconds\n", time.Since(started).Seconds())
	info := &tool.RunInfo{Pid: e.Session.Pid(), Outcome: "running", Sandbox: e.Sandbox, StdoutBytes: e.Session.Total()}
	if r != nil {
		code := exitCode(r.ExitCode, r.Signal)
		fmt.Fprintf(&b, "Process exited with code %d\n", code)
		info.Outcome, info.ExitCode, info.Signal, info.Duration = r.Outcome.String(), code, r.Signal, r.Duration
		m.forget(e)
	} else {
		fmt.Fprintf(&b, "Process running with session ID %s\n", e.ID)
	}
	b.WriteString("Output:\n")
	if dropped > 0 {
		fmt.Fprintf(&b, "[%d bytes of earlier output were lost: a session keeps its newest %d KiB between reads; poll more often, or redirect large output to a file]\n",
			dropped, e.ringSize()/1024)
	}
	out, cut := truncate(text, maxTokens*BytesPerToken)
	info.Truncated = cut || dropped > 0
	b.WriteString(out)
	return &tool.Result{Text: b.String(), Run: info}
}

func (e *Entry) ringSize() int { return e.ring }

// truncate keeps the head and tail of s within limit bytes, cut on rune
// boundaries, and says how much was left out between them.
func truncate(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	half := limit / 2
	head := s[:half]
	for len(head) > 0 && !utf8.RuneStart(s[len(head)]) {
		head = head[:len(head)-1]
	}
	tailStart := len(s) - (limit - len(head))
	for tailStart < len(s) && !utf8.RuneStart(s[tailStart]) {
		tailStart++
	}
	omitted := tailStart - len(head)
	return fmt.Sprintf("%s\n[... %d bytes (about %d tokens) of output omitted here ...]\n%s", head, omitted, (omitted+BytesPerToken-1)/BytesPerToken, s[tailStart:]), true
}

// wait waits until the session ends, deadline passes or ctx is done. With
// early set it also returns once new output has arrived and then been
// quiet for Settle (or output is already waiting).
func wait(ctx context.Context, e *Entry, deadline time.Time, early bool) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		ch := e.Session.Changed()
		select {
		case <-e.Session.Ended():
			return
		default:
		}
		if early && e.Session.Unread() > 0 {
			settle(ctx, e, deadline)
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// settle waits until the output has been quiet for Settle (at most four
// times that, and never past deadline), so that a reply does not cut a
// burst of output in the middle.
func settle(ctx context.Context, e *Entry, deadline time.Time) {
	limit := time.Now().Add(4 * Settle)
	if deadline.Before(limit) {
		limit = deadline
	}
	for {
		ch := e.Session.Changed()
		wait := min(Settle, time.Until(limit))
		if wait <= 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ch:
			t.Stop()
			select {
			case <-e.Session.Ended():
				return
			default:
			}
		case <-t.C:
			// Quiet. A process that has exited is reported as such: wait
			// for its last output rather than answer "running".
			select {
			case <-e.Session.Exited():
				t := time.NewTimer(time.Until(deadline))
				defer t.Stop()
				select {
				case <-e.Session.Ended():
				case <-t.C:
				case <-ctx.Done():
				}
			default:
			}
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// startFailure words a session that could not start.
func startFailure(err error) *tool.Result {
	if se, ok := err.(*runner.StartError); ok {
		return tool.Errorf(tool.KindExecution, "exec_command: the command could not start: %v", se)
	}
	return tool.Errorf(tool.KindExecution, "exec_command: the session could not start: %v", err)
}
