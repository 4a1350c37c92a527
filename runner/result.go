package runner

import (
	"fmt"
	"time"

	"github.com/agentexec/agentexec/capture"
)

// Outcome says how a run ended.
type Outcome uint8

const (
	// Exited: the main process exited by itself (see ExitCode).
	Exited Outcome = iota + 1
	// Signaled: the main process was killed by a signal nobody in the
	// runner sent (see Signal).
	Signaled
	// TimedOut: Spec.Timeout passed and the runner ended the command.
	TimedOut
	// Cancelled: the context was cancelled and the runner ended the
	// command.
	Cancelled
)

// String returns "exited", "signaled", "timed out" or "cancelled".
func (o Outcome) String() string {
	switch o {
	case Exited:
		return "exited"
	case Signaled:
		return "signaled"
	case TimedOut:
		return "timed out"
	case Cancelled:
		return "cancelled"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Result is what a run produced. A non-zero exit is a Result, not an error.
type Result struct {
	// Pid is the main process's id (also its session and group id).
	Pid int
	// Outcome says how the run ended.
	Outcome Outcome
	// ExitCode is the main process's exit status, or -1 if a signal
	// killed it.
	ExitCode int
	// Signal is the signal that killed the main process, or 0.
	Signal int
	// Start is when the command started; Duration is how long the main
	// process ran.
	Start    time.Time
	Duration time.Duration
	// Stdout, Stderr and Combined are what was kept of each stream, with
	// exact totals and truncation flags.
	Stdout, Stderr, Combined capture.Snapshot
	// LeftoversKilled counts processes the command started that were still
	// running when the main process ended (or when the runner began ending
	// it) and that the runner then killed.
	LeftoversKilled int
	// LeftoversKept counts processes left running because of
	// Spec.KeepLeftovers.
	LeftoversKept int
	// OutputCut reports that the output may be incomplete: when Run stopped
	// reading (Spec.Drain after the main process exited and its leftovers
	// were dealt with), a process was still holding the output pipes open
	// (one kept by KeepLeftovers, or one that escaped the tracked tree), so
	// whatever it wrote after that was not captured. Output written by
	// processes that had exited is never lost.
	OutputCut bool
}

// TimedOut reports whether the run was ended by its timeout.
func (r *Result) TimedOut() bool { return r.Outcome == TimedOut }

// Cancelled reports whether the run was ended by its context.
func (r *Result) Cancelled() bool { return r.Outcome == Cancelled }

// Describe returns a short phrase for people: "exit code 0", "killed by
// signal 9", "timed out after 2s", "cancelled".
func (r *Result) Describe() string {
	switch r.Outcome {
	case TimedOut:
		return "timed out after " + r.Duration.Round(time.Millisecond).String()
	case Cancelled:
		return "cancelled"
	case Signaled:
		return fmt.Sprintf("killed by signal %d", r.Signal)
	}
	return fmt.Sprintf("exit code %d", r.ExitCode)
}
