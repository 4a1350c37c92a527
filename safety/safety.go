// Package safety reads bash source the way bash would and reports the
// commands it would run and the findings of the built-in rules: blind
// git add, forced git push, rm of critical paths, writes into git hooks or
// authorized_keys, git's core.hooksPath, piping downloads or decoded data
// into a shell, and loader or hook variables on a command.
//
// It is a guardrail against an agent's mistakes, not a security boundary:
// a command whose name is only known at run time ($cmd, $(...)), or a
// nested script it cannot read, is reported as not analysable so that the
// policy can ask a person; the sandbox is what contains a determined one.
//
// The package is pure: it parses with mvdan.cc/sh/v3/syntax, expands static
// words with mvdan.cc/sh/v3/expand (quotes, escapes, $'...', braces; never
// variables, substitutions or globs), and runs nothing.
package safety

import (
	"strconv"
	"strings"
)

// MaxDepth bounds how deep nested scripts (bash -c '...', eval '...') are
// re-parsed.
const MaxDepth = 4

// Word is one argument of a command.
type Word struct {
	// Value is the argument as bash would pass it, for static words; for
	// dynamic ones it is the source text.
	Value string `json:"value"`
	// Dynamic is set when the word holds a variable, a command or process
	// substitution or arithmetic: its value is only known at run time.
	Dynamic bool `json:"dynamic,omitempty"`
	// Raw is the word's source text.
	Raw string `json:"raw"`
}

// Redirect is a redirection of a command.
type Redirect struct {
	Op     string `json:"op"`
	Target Word   `json:"target"`
}

// Command is one command the source would run, with the wrappers that
// would run it (sudo, env, timeout, xargs, find -exec, bash -c, ...)
// already taken off.
type Command struct {
	// Args is the argv; Args[0] is the program as written.
	Args []Word `json:"args"`
	// Name is the program's base name ("" when dynamic).
	Name string `json:"name"`
	// Dynamic is set when the program is only known at run time.
	Dynamic bool `json:"dynamic,omitempty"`
	// Wrappers are the wrappers taken off, outermost first.
	Wrappers []string `json:"wrappers,omitempty"`
	// Assigns are the variables set for this command only (VAR=x cmd,
	// env VAR=x cmd) or exported (export VAR=x).
	Assigns []string `json:"assigns,omitempty"`
	// Redirects are the command's redirections.
	Redirects []Redirect `json:"redirects,omitempty"`
	// Depth is how many nested scripts deep the command was found.
	Depth int `json:"depth,omitempty"`
	// Pos is line:column in the source it was found in.
	Pos string `json:"pos"`

	// assignVals are the values of Assigns (never reported: they may
	// hold secrets).
	assignVals []Word
	// stdin is where a redirection takes the command's input from.
	stdin *stdinFrom
}

// Argv returns the values of c's arguments.
func (c *Command) Argv() []string {
	out := make([]string, len(c.Args))
	for i, w := range c.Args {
		out[i] = w.Value
	}
	return out
}

// String writes the command as a short line for people.
func (c *Command) String() string {
	var b strings.Builder
	for _, w := range c.Wrappers {
		b.WriteString("[" + w + "] ")
	}
	for i, w := range c.Args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if w.Dynamic {
			b.WriteString("<dynamic " + w.Raw + ">")
		} else {
			b.WriteString(quote(w.Value))
		}
	}
	return b.String()
}

func quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`;&|<>(){}*?[]#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Finding is what a built-in rule found.
type Finding struct {
	// Rule is the rule's id (see Rules).
	Rule string `json:"rule"`
	// Message is the text the model sees when the finding refuses the
	// command (seed 001's words for its three checks).
	Message string `json:"message"`
	// Reason and Alternative are Message in two parts.
	Reason      string `json:"reason"`
	Alternative string `json:"alternative"`
	// Command indexes Report.Commands, or is -1 for findings about the
	// source as a whole.
	Command int `json:"command"`
	// Ask is set when the rule asks a person rather than refuses (see
	// RuleInfo.Ask).
	Ask bool `json:"ask,omitempty"`
}

// Unanalysable is a part of the source the checker could not read.
type Unanalysable struct {
	// Kind is "dynamic-command" (the program is only known at run time),
	// "nested-script" (a script bash would run, from bash -c, eval, a
	// pipe, a trap, an alias, a subscript, ..., that is dynamic or too
	// deep) or "dynamic-argument" (a destructive command whose target is
	// only known at run time).
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
	Pos    string `json:"pos"`
}

// Report is everything the checker learned about a source.
type Report struct {
	Commands     []Command      `json:"commands"`
	Findings     []Finding      `json:"findings"`
	Unanalysable []Unanalysable `json:"unanalysable,omitempty"`
	// ParseError is set when bash would refuse the source; the other
	// fields are then empty.
	ParseError error `json:"-"`
}

// Options switch built-in rules off.
type Options struct {
	// Disabled holds the ids of rules not to apply.
	Disabled map[string]bool
}

func (o *Options) enabled(rule string) bool { return o == nil || !o.Disabled[rule] }

// ParseError says why the source could not be parsed.
type ParseError struct {
	Err error
}

// Error returns "cannot parse the script: <detail>".
func (e *ParseError) Error() string { return "cannot parse the script: " + e.Err.Error() }

// Unwrap returns the parser's error.
func (e *ParseError) Unwrap() error { return e.Err }

func pos(line, col uint) string {
	return strconv.FormatUint(uint64(line), 10) + ":" + strconv.FormatUint(uint64(col), 10)
}
