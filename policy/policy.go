// Package policy decides whether a tool call may run: requests in,
// decisions out. It starts no processes and keeps no state between calls;
// its only contact with the system is resolving symlinks in program paths.
//
// A Decision is Allow, Ask (a person must approve) or Deny, with the rule
// that made it, the reason and an alternative the model can act on. When
// several checks look at one request, Combine keeps the strictest: deny
// beats ask, ask beats allow.
package policy

import (
	"strings"
)

// Verdict is what a check concluded.
type Verdict uint8

const (
	// Allow lets the call run.
	Allow Verdict = iota
	// Ask runs the call only if a person approves it.
	Ask
	// Deny refuses the call.
	Deny
)

// String returns "allow", "ask" or "deny".
func (v Verdict) String() string {
	switch v {
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return "allow"
}

// Request is what a tool call is about to do, as far as policy needs to
// know. Env values are never part of it: only their keys.
type Request struct {
	// Tool is the contract's canonical name ("bash", "exec", "Exec",
	// "shell.exec").
	Tool string
	// Conversation identifies the calling conversation, if known.
	Conversation string
	// Command is the shell source when the tool runs a shell; Shell names
	// that shell ("bash", "sh").
	Command string
	Shell   string
	// Executable is the program as the caller named it, for argv tools.
	Executable string
	// ResolvedPath is the absolute path Executable resolved to (symlinks
	// evaluated), or "" when it could not be resolved.
	ResolvedPath string
	// Args are the arguments after the program, for argv tools.
	Args []string
	// Cwd is the absolute working directory.
	Cwd string
	// EnvKeys are the names of the variables the caller passes explicitly.
	EnvKeys []string
	// Background is set when the command will outlive the call.
	Background bool
	// Metadata is free-form context from the host (never secrets).
	Metadata map[string]string
}

// Decision is the outcome of a check.
type Decision struct {
	Verdict Verdict
	// Rule identifies what decided ("git-push-force", "deny_executables").
	// Empty for the default decision.
	Rule string
	// Reason says why, for the model and the audit log.
	Reason string
	// Alternative says what the model can do instead; may be empty.
	Alternative string
	// Text, if set, is the exact refusal text the model sees (a contract
	// that must reproduce a seed's message verbatim sets it); otherwise
	// Message builds one from Reason and Alternative.
	Text string
}

// Allowed is the decision that lets a call run without a rule.
var Allowed = Decision{Verdict: Allow}

// Message returns the text the model sees when the call is refused.
func (d Decision) Message() string {
	if d.Text != "" {
		return d.Text
	}
	msg := "permission denied"
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	if d.Alternative != "" {
		msg = strings.TrimRight(msg, ".") + ". " + d.Alternative
	}
	return msg
}

// Checker is one source of decisions.
type Checker interface {
	Check(Request) Decision
}

// CheckerFunc adapts a function to Checker.
type CheckerFunc func(Request) Decision

// Check calls f.
func (f CheckerFunc) Check(r Request) Decision { return f(r) }

// Combine returns the strictest of ds (deny beats ask beats allow); among
// equals the first wins. No decisions means Allowed.
func Combine(ds ...Decision) Decision {
	best := Allowed
	for _, d := range ds {
		if d.Verdict > best.Verdict {
			best = d
		}
	}
	return best
}

// CheckAll runs every checker on r and combines their decisions.
func CheckAll(r Request, cs ...Checker) Decision {
	best := Allowed
	for _, c := range cs {
		if c == nil {
			continue
		}
		if d := c.Check(r); d.Verdict > best.Verdict {
			best = d
		}
	}
	return best
}
