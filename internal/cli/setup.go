package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentexec/agentexec/config"
	"github.com/agentexec/agentexec/host"
	"github.com/agentexec/agentexec/sandbox"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// setupOptions are the flags that override the configuration, shared by
// tools, call and check.
type setupOptions struct {
	configFile string
	profile    string
	tools      []string
	names      []string // CONTRACT=NAME
	allowExe   []string
	denyExe    []string
	askExe     bool
	stateDir   string
	grantTools []string
	grantFS    []string
	cwd        string
	auditLog   string
	auditMax   int64
	auditFail  bool
	sandbox    string
	secrets    []string // files sandboxed commands must never see (a token file)
	allowHosts []string // --allow-host
	observe    observeFlags
}

// addNetworkFlags adds --allow-host (run, call, mcp, serve, tools and
// config show).
func (o *setupOptions) addNetworkFlags(f *pflag.FlagSet) {
	f.StringArrayVar(&o.allowHosts, "allow-host", nil, "let sandboxed commands reach HOST[:PORT] (or *.DOMAIN[:PORT]) through agentexec's egress proxy, and nothing else not allowed in [sandbox.network] (sets sandbox.network.mode = \"allowlist\"; repeatable)")
}

func (o *setupOptions) addPolicyFlags(f *pflag.FlagSet) {
	f.StringVar(&o.configFile, "config", "", "configuration file (default: $AGENTEXEC_CONFIG, ./agentexec.toml, $XDG_CONFIG_HOME/agentexec/config.toml)")
	f.StringVar(&o.profile, "profile", "", "policy profile: open, guarded or strict (overrides the configuration)")
}

func (o *setupOptions) addToolFlags(f *pflag.FlagSet) {
	f.StringSliceVar(&o.tools, "tools", nil, "tool contracts to register: "+strings.Join(config.Contracts, ", ")+" (default from the configuration: bash)")
	f.StringArrayVar(&o.names, "name", nil, "expose a tool under another name, e.g. shell.exec=shell_exec (repeatable)")
	f.StringSliceVar(&o.allowExe, "allow-exe", nil, "shell.exec: programs allowed (names or absolute paths)")
	f.StringSliceVar(&o.denyExe, "deny-exe", nil, "shell.exec: programs refused (names or absolute paths)")
	f.BoolVar(&o.askExe, "ask-unknown", false, "shell.exec: programs in neither list need approval")
	f.StringVar(&o.stateDir, "state-dir", "", "directory for background jobs (default: $XDG_RUNTIME_DIR/agentexec or a private directory in /tmp)")
	f.StringVar(&o.cwd, "cwd", "", "workspace: the working directory of calls (default: the configuration's, or the current one)")
	f.StringVar(&o.sandbox, "sandbox", "", "sandbox profile: "+strings.Join(sandbox.Profiles, ", ")+" (default from the configuration: workspace-write)")
	o.addNetworkFlags(f)
}

func (o *setupOptions) addCallFlags(f *pflag.FlagSet) {
	f.StringSliceVar(&o.grantTools, "grant-tool", nil, "limit the agent to these tools (config key grants.tools); the Exec tool needs --grant-tool Exec")
	f.StringArrayVar(&o.grantFS, "grant-fs", nil, "let the agent's Exec calls use MODE:PATH (r, w or rw), e.g. r:/usr (repeatable; config key grants.fs)")
	f.StringVar(&o.auditLog, "audit-log", "", "audit log file ('off' to disable; default from the configuration)")
	f.Var(sizeFlag{&o.auditMax}, "audit-max-size", "rotate the audit log past this size (default 10MiB)")
	f.BoolVar(&o.auditFail, "audit-fail-closed", false, "refuse to run a call that cannot be recorded in the audit log")
}

// flagKeys maps each flag that overrides the configuration to its key.
var flagKeys = map[string]string{
	"profile": "profile", "sandbox": "sandbox.profile", "tools": "tools.enabled", "name": "tools.names",
	"allow-exe": "tools.shell_exec.allow_executables", "deny-exe": "tools.shell_exec.deny_executables",
	"ask-unknown": "tools.shell_exec.require_approval_for_unknown", "state-dir": "jobs.state_dir", "cwd": "workspace",
	"grant-tool": "grants.tools", "grant-fs": "grants.fs", "audit-log": "audit.path", "audit-max-size": "audit.max_size",
	"audit-fail-closed": "audit.fail_closed", "allow-host": "sandbox.network.allow",
}

// load reads the configuration and applies the flags that were given,
// recording them as the source of their keys. A flag's bad value is
// reported against the flag, never against the file.
func (o *setupOptions) load(cmd *cobra.Command) (*config.Config, error) {
	cfg, err := config.Load(config.Options{File: o.configFile})
	if err != nil {
		return nil, &exitError{code: ExitFailed, msg: err.Error()}
	}
	changed := func(name string) bool {
		f := cmd.Flags().Lookup(name)
		if f == nil || !f.Changed {
			return false
		}
		if key, ok := flagKeys[name]; ok {
			cfg.SetSource(key, "flag --"+name)
		}
		return true
	}
	if changed("profile") {
		switch o.profile {
		case "open", "guarded", "strict":
			cfg.Profile = o.profile
		default:
			return nil, &exitError{code: usageCode(cmd), msg: fmt.Sprintf("--profile %q: use open, guarded or strict", o.profile)}
		}
	}
	if changed("sandbox") {
		cfg.Sandbox.Profile = o.sandbox
	}
	if changed("allow-host") {
		cfg.Sandbox.Network.Allow = append(cfg.Sandbox.Network.Allow, o.allowHosts...)
		cfg.Sandbox.Network.Mode = "allowlist"
		cfg.SetSource("sandbox.network.mode", "flag --allow-host")
	}
	if changed("tools") {
		cfg.Tools.Enabled = o.tools
	}
	if changed("name") {
		for _, n := range o.names {
			canon, exposed, ok := strings.Cut(n, "=")
			if !ok || exposed == "" {
				return nil, &exitError{code: ExitFailed, msg: fmt.Sprintf("--name %q: want CONTRACT=NAME with CONTRACT one of %s", n, strings.Join(config.Contracts, ", "))}
			}
			if cfg.Tools.Names == nil {
				cfg.Tools.Names = map[string]string{}
			}
			cfg.Tools.Names[canon] = exposed
		}
	}
	if changed("allow-exe") {
		cfg.Tools.ShellExec.AllowExecutables = o.allowExe
	}
	if changed("deny-exe") {
		cfg.Tools.ShellExec.DenyExecutables = o.denyExe
	}
	if changed("ask-unknown") {
		cfg.Tools.ShellExec.RequireApprovalForUnknown = o.askExe
	}
	if changed("state-dir") {
		cfg.Jobs.StateDir = o.stateDir
	}
	if changed("cwd") {
		abs, err := filepath.Abs(o.cwd)
		if err != nil {
			return nil, &exitError{code: ExitFailed, msg: "--cwd: " + err.Error()}
		}
		cfg.Workspace = abs
	}
	if changed("grant-tool") {
		cfg.Grants.Tools = o.grantTools
	}
	if changed("grant-fs") {
		cfg.Grants.FS = o.grantFS
	}
	if changed("audit-log") {
		cfg.Audit.Path = o.auditLog
	}
	if changed("audit-max-size") {
		cfg.Audit.MaxSize = config.Size(o.auditMax)
	}
	if changed("audit-fail-closed") {
		cfg.Audit.FailClosed = o.auditFail
	}
	// Flags bypass the file's validation: check the result again, and
	// blame the flag that set a bad value.
	if err := cfg.Check(); err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			if src := cfg.Source(ce.Key); strings.HasPrefix(src, "flag ") {
				return nil, &exitError{code: usageCode(cmd), msg: strings.TrimPrefix(src, "flag ") + ": " + ce.Msg}
			}
		}
		return nil, &exitError{code: ExitFailed, msg: err.Error()}
	}
	return cfg, nil
}

// host builds the host the options describe.
func (o *setupOptions) host(cmd *cobra.Command, warn func(error)) (*host.Host, error) {
	cfg, err := o.load(cmd)
	if err != nil {
		return nil, err
	}
	h, err := host.New(cfg, host.Options{AuditWarn: warn, Secrets: o.secrets})
	if err != nil {
		return nil, &exitError{code: ExitFailed, msg: err.Error()}
	}
	return h, nil
}

// usageCode is the exit status for bad usage: 2 for check and hook (their
// documented contract), 125 elsewhere.
func usageCode(cmd *cobra.Command) int {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Name() == "check" || c.Name() == "hook" {
			return 2
		}
	}
	return ExitFailed
}

// openTTY opens the controlling terminal for approval prompts; tests
// replace it.
var openTTY = func() (*os.File, error) { return os.OpenFile("/dev/tty", os.O_RDWR, 0) }
