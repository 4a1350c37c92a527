package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentexec/agentexec/config"
	"github.com/agentexec/agentexec/egress"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/sandbox"
	"github.com/spf13/cobra"
)

func newSandboxCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Short: "What the sandbox can do on this system"}
	var asJSON bool
	o := &setupOptions{}
	status := &cobra.Command{
		Use:   "status",
		Short: "Print each sandbox layer as available or not, with the reason and the fix",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			layers := append(sandbox.Status(), treeCgroupLayer())
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(layers)
			}
			fmt.Fprintln(stdout, "layers (used by the default profile, workspace-write; available; or missing):")
			for _, l := range layers {
				mark := l.State
				if mark == "" {
					mark = map[bool]string{true: "available", false: "missing"}[l.Available]
				}
				fmt.Fprintf(stdout, "%-28s %-10s %s\n", l.Name, mark, l.Detail)
				if !l.Available && l.Open != "" {
					fmt.Fprintf(stdout, "%-28s %-10s left open: %s\n", "", "", l.Open)
				}
				if l.Fix != "" && !l.Available {
					fmt.Fprintf(stdout, "%-28s %-10s fix: %s\n", "", "", l.Fix)
				}
			}
			// With best_effort (the container image's configuration), a
			// profile whose layers are missing runs without them: say so.
			bestEffort := false
			if cfg, err := config.Load(config.Options{}); err == nil {
				bestEffort = cfg.Sandbox.BestEffort
			}
			for _, p := range sandbox.Profiles {
				spec, _ := sandbox.Profile(p, sandbox.ProfileOptions{Workspace: "/"})
				state := "can run"
				if missing := spec.Missing(); len(missing) > 0 {
					state = "cannot run: " + missing[0]
					if bestEffort {
						state = "runs best effort (best_effort = true) without: " + strings.Join(missing, "; ")
					}
				}
				fmt.Fprintf(stdout, "profile %-20s %s\n", p, state)
			}
			if cfg, err := o.load(cmd); err == nil {
				wd := cfg.Workspace
				if wd == "" {
					wd, _ = os.Getwd()
				}
				for _, line := range networkLines(cfg, wd) {
					fmt.Fprintln(stdout, line)
				}
			}
			return nil
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	o.addPolicyFlags(status.Flags())
	o.addNetworkFlags(status.Flags())
	cmd.AddCommand(status)
	return cmd
}

// treeCgroupLayer says whether commands' process trees can be held in a
// cgroup (tools.cgroup = "auto" and run --cgroup auto use it then).
func treeCgroupLayer() sandbox.Layer {
	l := sandbox.Layer{Name: "process-tree cgroup"}
	pool, err := runner.FindCgroups()
	if err != nil {
		l.Detail = strings.TrimPrefix(err.Error(), runner.ErrNoCgroups.Error()+": ")
		l.Fix = "run agentexec as root, or in a delegated cgroup (systemd-run --user --scope -p Delegate=yes); sessions and the subreaper sweep still end the tree"
		return l
	}
	defer pool.Close()
	l.Available = true
	l.Detail = "each command's tree in its own cgroup under " + pool.Parent() + ", ended with cgroup.kill"
	return l
}

// networkLines describe the configuration's sandbox network: the mode
// and, for an allowlist, every rule with the hosts its presets resolve to
// on this machine now.
func networkLines(cfg *config.Config, workspace string) []string {
	n := cfg.Sandbox.Network
	mode := n.Mode
	if mode == "" {
		mode = "the profile's (" + cfg.Sandbox.Profile + ")"
	}
	lines := []string{"network " + mode}
	if n.Mode != "allowlist" {
		return lines
	}
	onUnknown := n.OnUnknown
	if onUnknown == "" {
		onUnknown = "deny"
	}
	lines[0] += fmt.Sprintf(" (other hosts: %s; private addresses: %s)", onUnknown, map[bool]string{true: "allowed", false: "refused"}[n.AllowPrivate])
	for _, h := range n.Allow {
		lines = append(lines, "  allow "+h)
	}
	for _, h := range n.Deny {
		lines = append(lines, "  deny  "+h)
	}
	for _, r := range egress.ResolvePresets(context.Background(), n.Presets, workspace) {
		for _, h := range r.Hosts {
			lines = append(lines, "  allow "+h+"  (preset "+r.Preset+")")
		}
		for _, src := range r.Sources {
			lines = append(lines, "  # "+r.Preset+": "+src)
		}
	}
	return lines
}
