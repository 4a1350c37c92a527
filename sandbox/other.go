//go:build !linux

package sandbox

import (
	"fmt"

	"github.com/agentexec/agentexec/runner"
)

// Main does nothing where there is no trampoline.
func Main() {}

// Options say how the host starts the trampoline.
type Options struct{ Executable string }

// State is what this system can do for the sandbox: nothing here.
type State struct {
	LandlockABI int
	Seccomp     bool
	UserNS      bool
	PidsCgroup  string
	CgroupV2    bool
	Bwrap       string
}

// Probe reports that nothing is available.
func Probe() State { return State{} }

// Layer is one line of `agentexec sandbox status`.
type Layer struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Detail    string `json:"detail"`
	Fix       string `json:"fix,omitempty"`
}

// Status says that this platform has no sandbox.
func Status() []Layer {
	return []Layer{{Name: "sandbox", Detail: "only Linux is supported", Fix: "run agentexec on Linux"}}
}

// Missing lists everything s asks for.
func (s *Spec) Missing() []string {
	if s.Enabled() {
		return []string{"the sandbox needs Linux"}
	}
	return nil
}

// Wrapper fails for a spec that confines anything, unless BestEffort.
func (s *Spec) Wrapper(Options) (func(path string, argv, env []string) (*runner.Wrapped, error), error) {
	if !s.Enabled() || s.BestEffort {
		return nil, nil
	}
	return nil, fmt.Errorf("sandbox: the sandbox needs Linux: %w", ErrUnavailable)
}
