//go:build !linux

package sandbox

import (
	"fmt"

	"github.com/agentexec/agentexec/runner"
)

// Main does nothing where there is no trampoline.
func Main() {}

// Probe reports that nothing is available.
func Probe() State { return State{} }

// Status says that this platform has no sandbox.
func Status() []Layer {
	return []Layer{{Name: "sandbox", State: "missing", Detail: "only Linux is supported", Open: "everything: commands run unconfined", Fix: "run agentexec on Linux"}}
}

// StatusOf is Status: nothing is available.
func StatusOf(*Spec) []Layer { return Status() }

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
