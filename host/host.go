// Package host assembles what serves tool calls from a configuration: the
// policy engine, the tool registry with the enabled contracts under their
// names, the environment commands get, the agent's grants, the audit log
// and the job manager. The CLI and the MCP server both start here.
package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentexec/agentexec/audit"
	"github.com/agentexec/agentexec/config"
	"github.com/agentexec/agentexec/egress"
	"github.com/agentexec/agentexec/jobs"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/runner"
	"github.com/agentexec/agentexec/sandbox"
	"github.com/agentexec/agentexec/tool"
	"github.com/agentexec/agentexec/tool/bash"
	toolexec "github.com/agentexec/agentexec/tool/exec"
	"github.com/agentexec/agentexec/tool/execv"
	"github.com/agentexec/agentexec/tool/jobtools"
	"github.com/agentexec/agentexec/tool/shellexec"
	"github.com/agentexec/agentexec/tool/unifiedexec"
)

// Host is an assembled configuration. Close it when done.
type Host struct {
	Config *config.Config
	// Engine is the policy every call passes (also registered as the
	// registry's checker).
	Engine   *policy.Engine
	Registry *tool.Registry
	Jobs     *jobs.Manager
	// Env is the environment commands get (before per-call env).
	Env []string
	// Workspace is the default working directory (absolute).
	Workspace string
	// Grants are the agent's grants from the configuration; nil when none
	// are configured.
	Grants *tool.Grants
	// AuditFile is the open audit log, or nil when it is off.
	AuditFile *audit.File
	// Sandbox is the configured profile every command runs under.
	Sandbox *sandbox.Spec
	// Cgroups is the pool holding each command's process tree (set as
	// the runner's with runner.UseCgroups), or nil when tools.cgroup is
	// off or the machine offers none.
	Cgroups *runner.Cgroups
	// Sessions holds the interactive sessions of exec_command and
	// write_stdin (always set; empty when those tools are not enabled).
	Sessions *unifiedexec.Manager
	// Egress is the one egress proxy of sandbox.network.mode =
	// "allowlist" (nil otherwise): its listeners start on demand, with
	// the first sandboxed run. Set Egress.Ask before serving to ask a
	// person about hosts no rule names (on_unknown = "ask").
	Egress *egress.Proxy
	// NetworkPresets are what sandbox.network.presets resolved to when
	// the host was built.
	NetworkPresets []egress.Resolved
}

// DefaultAuditPath is where the audit log goes when the configuration
// leaves audit.path empty: $XDG_STATE_HOME/agentexec/audit.jsonl, or
// ~/.local/state/agentexec/audit.jsonl.
func DefaultAuditPath() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "agentexec", "audit.jsonl")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "agentexec", "audit.jsonl")
	}
	return ""
}

// Options adjust what New builds.
type Options struct {
	// AuditWarn, if set, receives audit problems that do not stop the
	// host (the log cannot be opened and fail_closed is off).
	AuditWarn func(error)
	// Secrets are more files sandboxed commands must never see (a token
	// file), beside the audit log, the jobs' state directory and the
	// configuration file, which are always hidden.
	Secrets []string
}

// New builds a Host from cfg.
func New(cfg *config.Config, o Options) (*Host, error) {
	eng, err := cfg.Engine()
	if err != nil {
		return nil, err
	}
	h := &Host{Config: cfg, Engine: eng, Jobs: &jobs.Manager{StateDir: cfg.Jobs.StateDir, MaxLive: cfg.Jobs.MaxLive, MaxLiveTotal: cfg.Jobs.MaxLiveTotal, MaxOutput: int64(cfg.Jobs.MaxOutput)}}
	h.Workspace = cfg.Workspace
	if h.Workspace == "" {
		if h.Workspace, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("host: cannot find the current directory: %w", err)
		}
	}
	if fi, err := os.Stat(h.Workspace); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("host: workspace %s is not an existing directory", h.Workspace)
	}
	var set []string
	keys := make([]string, 0, len(cfg.Env.Set))
	for k := range cfg.Env.Set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		set = append(set, k+"="+cfg.Env.Set[k])
	}
	h.Env = runner.BuildEnv(cfg.Env.Pass, set)

	if len(cfg.Grants.Tools) > 0 || len(cfg.Grants.FS) > 0 {
		h.Grants = &tool.Grants{Tools: cfg.Grants.Tools}
		for _, g := range cfg.Grants.FS {
			mode, p, _ := strings.Cut(g, ":")
			h.Grants.FS = append(h.Grants.FS, tool.FSGrant{Mode: mode, Path: p})
		}
	}

	var hidden []string
	if len(cfg.Sandbox.Hidden) > 0 {
		hidden = cfg.Sandbox.Hidden
	}
	expand := func(paths []string) []string {
		home, _ := os.UserHomeDir()
		var out []string
		for _, p := range paths {
			if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
				p = filepath.Join(home, rest)
			}
			out = append(out, p)
		}
		return out
	}
	var proxy sandbox.EgressProxy
	if cfg.Sandbox.Network.Mode == "allowlist" {
		if h.Egress, h.NetworkPresets, err = newEgress(cfg, h.Workspace); err != nil {
			return nil, err
		}
		proxy = h.Egress
	}
	box, err := sandbox.Profile(cfg.Sandbox.Profile, sandbox.ProfileOptions{
		Workspace: h.Workspace, Hidden: hidden, ReadOnly: expand(cfg.Sandbox.ReadOnly), ReadWrite: expand(cfg.Sandbox.ReadWrite),
		BestEffort: cfg.Sandbox.BestEffort, Secrets: secretPaths(cfg, o.Secrets),
		Network: cfg.Sandbox.Network.Mode, Egress: proxy,
	})
	if err != nil {
		h.Close()
		return nil, err
	}
	if box.Enabled() && !box.BestEffort {
		if missing := box.Missing(); len(missing) > 0 {
			return nil, fmt.Errorf("host: the %s sandbox profile needs what this system lacks: %s. Run `agentexec sandbox status`, "+
				"choose another profile, or set sandbox.best_effort = true", box.Name, strings.Join(missing, "; "))
		}
	}
	h.Sandbox = &box
	h.Sessions = &unifiedexec.Manager{MaxLive: cfg.Tools.Sessions.MaxLive, MaxPerConversation: cfg.Tools.Sessions.MaxPerConversation,
		IdleTimeout: time.Duration(cfg.Tools.Sessions.IdleTimeout)}
	grace := time.Duration(cfg.Tools.Grace)
	detach := time.Duration(cfg.Tools.DetachAfter)
	r := tool.NewRegistry()
	r.Checkers = []policy.Checker{eng}
	seen := map[string]bool{}
	for _, name := range cfg.Tools.Enabled {
		if seen[name] {
			continue
		}
		seen[name] = true
		var t tool.Tool
		switch name {
		case toolexec.Name:
			t = &toolexec.Tool{Env: h.Env, Grace: grace, Sandbox: h.Sandbox}
		case bash.Name:
			t = &bash.Tool{Env: h.Env, Grace: grace, Jobs: h.Jobs, DetachAfter: detach, Sandbox: h.Sandbox}
		case execv.Name:
			t = &execv.Tool{Sandbox: h.Sandbox}
		case shellexec.Name:
			t = &shellexec.Tool{
				Env:   h.Env,
				Grace: grace,
				Policy: policy.CommandPolicy{
					Allow: cfg.Tools.ShellExec.AllowExecutables, Deny: cfg.Tools.ShellExec.DenyExecutables,
					RequireApprovalForUnknown: cfg.Tools.ShellExec.RequireApprovalForUnknown,
				},
				DefaultTimeout: time.Duration(cfg.Tools.ShellExec.DefaultTimeout),
				DetachAfter:    detach,
				Jobs:           h.Jobs,
				Sandbox:        h.Sandbox,
			}
		case unifiedexec.ExecCommandName:
			t = &unifiedexec.ExecCommand{Sessions: h.Sessions, Env: h.Env, Grace: grace, Sandbox: h.Sandbox}
		case unifiedexec.WriteStdinName:
			t = &unifiedexec.WriteStdin{Sessions: h.Sessions, ProgramInput: programInput(cfg), Checks: []policy.Checker{eng}}
		default:
			return nil, fmt.Errorf("host: unknown contract %q; the contracts are %s", name, strings.Join(config.Contracts, ", "))
		}
		exposed := name
		if n, ok := cfg.Tools.Names[name]; ok {
			exposed = n
		}
		if err := r.RegisterAs(exposed, t); err != nil {
			return nil, err
		}
	}
	if cfg.Tools.JobTools && (seen[bash.Name] || (detach > 0 && seen[shellexec.Name])) {
		for _, t := range jobtools.All(h.Jobs) {
			if err := r.Register(t); err != nil {
				return nil, err
			}
		}
	}
	if seen[unifiedexec.ExecCommandName] || seen[unifiedexec.WriteStdinName] {
		for _, t := range []tool.Tool{&unifiedexec.List{Sessions: h.Sessions}, &unifiedexec.Kill{Sessions: h.Sessions}} {
			if err := r.Register(t); err != nil {
				return nil, err
			}
		}
	}
	h.Registry = r

	path := cfg.Audit.Path
	if path == "" {
		path = DefaultAuditPath()
	}
	r.FailClosed = cfg.Audit.FailClosed
	if path != "off" && path != "" {
		f, err := audit.OpenFile(path, int64(cfg.Audit.MaxSize), cfg.Audit.Keep)
		switch {
		case err != nil && cfg.Audit.FailClosed:
			return nil, fmt.Errorf("%w (and audit.fail_closed is set)", err)
		case err != nil:
			if o.AuditWarn != nil {
				o.AuditWarn(err)
			}
		default:
			h.AuditFile = f
			r.Audit = f
			h.Sessions.Audit = f
			if h.Egress != nil {
				h.Egress.Audit = func(e egress.Event) {
					err := f.Write(audit.Event{Time: time.Now(), Type: audit.Egress, Tool: "network", Host: e.Host, Port: e.Port, Protocol: e.Protocol,
						Decision: e.Decision, Rule: e.Rule, Reason: e.Reason, Addr: e.Addr})
					if err != nil && o.AuditWarn != nil {
						o.AuditWarn(err)
					}
				}
			}
		}
	}
	if o.AuditWarn != nil {
		r.OnAuditError = o.AuditWarn
	}
	if h.Cgroups, err = OpenCgroups(cfg.Tools.Cgroup); err != nil {
		h.Close()
		return nil, fmt.Errorf("host: tools.cgroup = %q cannot be used: %w", cfg.Tools.Cgroup, err)
	}
	if h.Cgroups != nil {
		runner.UseCgroups(h.Cgroups)
		h.Jobs.Cgroups = h.Cgroups.Parent()
	}
	return h, nil
}

// Call returns a call context with the host's workspace and grants.
func (h *Host) Call(conversation string) *tool.Call {
	return &tool.Call{Conversation: conversation, WorkDir: h.Workspace, Grants: h.Grants}
}

// programInput is tools.sessions.program_input, or its default for the
// profile: allow in open, ask otherwise.
func programInput(cfg *config.Config) string {
	if v := cfg.Tools.Sessions.ProgramInput; v != "" {
		return v
	}
	if cfg.Profile == string(policy.Open) {
		return "allow"
	}
	return "ask"
}

// EndConversation ends what belongs to a conversation that is over: its
// interactive sessions.
func (h *Host) EndConversation(conversation string) {
	if h.Sessions != nil {
		h.Sessions.EndConversation(conversation)
	}
}

// Close ends every interactive session, then closes the audit log and the
// cgroup pool (after which commands run without cgroup tracking).
func (h *Host) Close() error {
	var errs []error
	if h.Sessions != nil {
		h.Sessions.Close()
	}
	if h.Egress != nil {
		h.Egress.Close()
	}
	if h.Cgroups != nil {
		if runner.ActiveCgroups() == h.Cgroups {
			runner.UseCgroups(nil)
		}
		errs = append(errs, h.Cgroups.Close())
	}
	if h.AuditFile != nil {
		errs = append(errs, h.AuditFile.Close())
	}
	return errors.Join(errs...)
}

// newEgress builds the egress proxy of sandbox.network, with the hosts of
// its presets (resolved now, in bounded time) added to its allow list.
func newEgress(cfg *config.Config, workspace string) (*egress.Proxy, []egress.Resolved, error) {
	n := cfg.Sandbox.Network
	presets := egress.ResolvePresets(context.Background(), n.Presets, workspace)
	allow := slices.Clone(n.Allow)
	for _, r := range presets {
		allow = append(allow, r.Hosts...)
	}
	p, err := egress.New(egress.Config{Allow: allow, Deny: n.Deny, AllowPrivate: n.AllowPrivate, OnUnknown: n.OnUnknown})
	if err != nil {
		return nil, nil, fmt.Errorf("host: sandbox.network: %w", err)
	}
	return p, presets, nil
}

// secretPaths are the files and directories of agentexec itself that no
// sandboxed command may see: the audit log's directory, the jobs' state
// directory (other conversations' output), the configuration file and
// the given ones (token files).
func secretPaths(cfg *config.Config, extra []string) []string {
	var out []string
	add := func(p string) {
		if p != "" {
			if abs, err := filepath.Abs(p); err == nil {
				out = append(out, abs)
			}
		}
	}
	audit := cfg.Audit.Path
	if audit == "" {
		audit = DefaultAuditPath()
	}
	if audit != "" {
		add(audit)
		if filepath.Base(filepath.Dir(audit)) == "agentexec" {
			add(filepath.Dir(audit)) // the default's directory, with the rotated logs
		}
	}
	state := cfg.Jobs.StateDir
	if state == "" {
		state = jobs.DefaultStateDir()
	}
	add(state)
	add(cfg.File)
	for _, p := range extra {
		add(p)
	}
	return out
}
