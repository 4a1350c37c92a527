package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentexec/agentexec/jobs"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/tool"
	"github.com/agentexec/agentexec/tool/bash"
	toolexec "github.com/agentexec/agentexec/tool/exec"
	"github.com/agentexec/agentexec/tool/execv"
	"github.com/agentexec/agentexec/tool/shellexec"
	"github.com/spf13/pflag"
)

// contracts are the tool contracts agentexec ships, by canonical name.
var contracts = []string{toolexec.Name, bash.Name, execv.Name, shellexec.Name}

// defaultContracts are registered unless --tools says otherwise; Exec is
// opt-in, as its seed requires.
var defaultContracts = []string{toolexec.Name, bash.Name, shellexec.Name}

// toolOptions choose which contracts are registered, under which names,
// and with which command policy.
type toolOptions struct {
	tools    []string
	names    []string // CANONICAL=EXPOSED
	allowExe []string
	denyExe  []string
	askExe   bool
	stateDir string
}

func (o *toolOptions) addFlags(f *pflag.FlagSet) {
	f.StringSliceVar(&o.tools, "tools", defaultContracts, "tool contracts to register: "+strings.Join(contracts, ", ")+" (Exec is opt-in)")
	f.StringArrayVar(&o.names, "name", nil, "expose a tool under another name, e.g. shell.exec=shell_exec (repeatable)")
	f.StringSliceVar(&o.allowExe, "allow-exe", nil, "shell.exec: programs allowed (names or absolute paths)")
	f.StringSliceVar(&o.denyExe, "deny-exe", nil, "shell.exec: programs refused (names or absolute paths)")
	f.BoolVar(&o.askExe, "ask-unknown", false, "shell.exec: programs in neither list need approval")
	f.StringVar(&o.stateDir, "state-dir", "", "directory for background jobs (default: $XDG_RUNTIME_DIR/agentexec or a private directory in /tmp)")
}

// registry builds the registry the options describe.
func (o *toolOptions) registry() (*tool.Registry, error) {
	renames := map[string]string{}
	for _, n := range o.names {
		canon, exposed, ok := strings.Cut(n, "=")
		if !ok || !slices.Contains(contracts, canon) || exposed == "" {
			return nil, fmt.Errorf("--name %q: want CONTRACT=NAME with CONTRACT one of %s", n, strings.Join(contracts, ", "))
		}
		renames[canon] = exposed
	}
	pol := policy.CommandPolicy{Allow: o.allowExe, Deny: o.denyExe, RequireApprovalForUnknown: o.askExe}
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	m := &jobs.Manager{StateDir: o.stateDir}
	r := tool.NewRegistry()
	seen := map[string]bool{}
	for _, name := range o.tools {
		if seen[name] {
			continue
		}
		seen[name] = true
		var t tool.Tool
		switch name {
		case toolexec.Name:
			t = toolexec.New()
		case bash.Name:
			t = &bash.Tool{Jobs: m}
		case execv.Name:
			t = &execv.Tool{}
		case shellexec.Name:
			t = &shellexec.Tool{Policy: pol}
		default:
			return nil, fmt.Errorf("--tools: unknown contract %q; the contracts are %s", name, strings.Join(contracts, ", "))
		}
		exposed := name
		if n, ok := renames[name]; ok {
			exposed = n
		}
		if err := r.RegisterAs(exposed, t); err != nil {
			return nil, err
		}
	}
	return r, nil
}
