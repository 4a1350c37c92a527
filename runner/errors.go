package runner

import (
	"errors"
	"fmt"
)

// Kinds of StartError; test with errors.Is.
var (
	// ErrEmptyCommand: the Spec has neither a command nor an argv, or
	// the command is only white space.
	ErrEmptyCommand = errors.New("empty command")
	// ErrInvalidSpec: the Spec is inconsistent (both Command and Argv,
	// an empty argv[0], a bad output limit, NUL bytes in arguments).
	ErrInvalidSpec = errors.New("invalid spec")
	// ErrNotFound: the program (or shell) does not exist.
	ErrNotFound = errors.New("program not found")
	// ErrNotExecutable: the program exists but is not an executable file.
	ErrNotExecutable = errors.New("not an executable file")
	// ErrPermission: the system refused to run the program.
	ErrPermission = errors.New("permission denied")
	// ErrBadDir: the working directory does not exist or is not a directory.
	ErrBadDir = errors.New("bad working directory")
	// ErrUnsupported: this platform cannot run commands as the runner must.
	ErrUnsupported = errors.New("not supported on this platform")
	// ErrResources: the system or this process ran out of something a
	// start needs (open files, processes, memory); Detail names the limit.
	ErrResources = errors.New("out of system resources")
	// ErrSandbox: the sandbox could not be set up; Err says which step.
	ErrSandbox = errors.New("sandbox setup failed")
)

// StartError says why a command could not be started. Nothing ran when Run
// returns one. Kind is one of the Err* values above; Err, if set, is the
// underlying system error.
type StartError struct {
	Kind    error
	Program string // the program or shell, as given
	Dir     string // the working directory, as given
	Detail  string // what to do about it, for people and models
	Err     error
}

// Error returns a one-line message naming what failed and why.
func (e *StartError) Error() string {
	msg := "runner: cannot start"
	if e.Program != "" {
		msg += fmt.Sprintf(" %q", e.Program)
	}
	msg += ": " + e.Kind.Error()
	if e.Kind == ErrBadDir && e.Dir != "" {
		msg += fmt.Sprintf(" %q", e.Dir)
	}
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the kind and the underlying error, so errors.Is matches
// both.
func (e *StartError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}
