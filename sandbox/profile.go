package sandbox

import (
	"fmt"
	"github.com/agentexec/agentexec/runner"
	"os"
	"path/filepath"
	"strings"
)

// Profiles are the named specs the configuration chooses from.
var Profiles = []string{"off", "workspace-write", "read-only", "no-network", "strict"}

// DefaultHidden are the secrets that stay unreadable inside readable trees
// ("~" is the home directory of the user running agentexec).
// Under the namespace wall they are covered wherever a shown directory
// holds them (the workspace may be HOME itself); with Landlock alone they
// are left out of the readable rules.
var DefaultHidden = []string{
	"~/.ssh", "~/.aws", "~/.config/gcloud", "~/.azure", "~/.gnupg", "~/.netrc", "~/.docker/config.json", "~/.kube",
	"~/.git-credentials", "~/.config/gh", "~/.config/hub", "~/.npmrc", "~/.yarnrc", "~/.pypirc", "~/.cargo/credentials",
	"~/.cargo/credentials.toml", "~/.vault-token", "~/.claude", "~/.claude.json", "~/.codex", "~/.config/agentexec",
	"~/.local/state/agentexec", "~/.local/share/keyrings", "~/.password-store", "~/.pgpass", "~/.my.cnf",
	"~/.terraform.d/credentials.tfrc.json", "~/.bash_history", "~/.zsh_history", "~/.python_history",
	"~/.node_repl_history", "~/.psql_history", "~/.mysql_history", "~/.lesshst", "~/.viminfo",
}

// DefaultHomeAllow are the files of the home directory a namespaced
// profile shows (read-only) in the otherwise empty HOME: tool
// configuration that normally holds no credentials, and the usual places
// of user-installed toolchains. The directories of the host's PATH that
// are under HOME are shown read-only too.
var DefaultHomeAllow = []string{
	"~/.gitconfig", "~/.config/git", "~/.gitignore_global", "~/.editorconfig", "~/.inputrc", "~/.vimrc",
	"~/.local/bin", "~/go/bin", "~/.cargo/bin", "~/.rustup", "~/.nvm", "~/.pyenv", "~/.rbenv", "~/.volta", "~/.bun",
	"~/.deno", "~/.sdkman", "~/.asdf", "~/.local/share/mise", "~/sdk",
}

// DefaultCacheDir is the persistent, writable directory of the tool
// caches under the namespaced profiles: $XDG_CACHE_HOME/agentexec/tools,
// or ~/.cache/agentexec/tools ("" without a home directory).
func DefaultCacheDir() string {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "agentexec", "tools")
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) {
		return filepath.Join(home, ".cache", "agentexec", "tools")
	}
	return ""
}

// ProfileOptions complete a profile.
type ProfileOptions struct {
	// Workspace is the writable directory of workspace-write, no-network
	// and strict.
	Workspace string
	// Hidden replaces DefaultHidden when not nil; "~/" is expanded.
	Hidden []string
	// ReadOnly and ReadWrite are extra paths.
	ReadOnly, ReadWrite []string
	// HomeAllow replaces DefaultHomeAllow when not nil; "~/" is expanded.
	HomeAllow []string
	// Secrets are paths never visible in any profile other than off
	// (the state directory, the audit log, token and configuration
	// files), added to the hidden ones.
	Secrets []string
	// Cache replaces DefaultCacheDir when not empty; "-" means none.
	Cache string
	// BestEffort runs with the layers the kernel has.
	BestEffort bool
	// Network replaces the profile's network: "off", "on", or
	// "allowlist" (only through Egress); "" keeps the profile's (on for
	// workspace-write and read-only, off for no-network and strict).
	Network string
	// Egress is the proxy of network "allowlist".
	Egress EgressProxy
}

// NetworkModes are the values of ProfileOptions.Network.
var NetworkModes = []string{"off", "on", "allowlist"}

// Profile returns the named spec:
//
//   - off: nothing is confined;
//   - workspace-write (the default): the system read-only, the workspace
//     and a private tmp writable, secrets hidden, network on;
//   - read-only: the workspace is shown read-only; only the private tmp
//     and the (empty, per-run) HOME are writable;
//   - no-network: workspace-write without network;
//   - strict: no-network with seed 003's limits: CPU 60 s, memory 512 MB,
//     files up to 64 MB, 256 open files (and 512 processes).
func Profile(name string, o ProfileOptions) (Spec, error) {
	s, err := profile(name, o)
	if err == nil {
		err = s.setNetwork(name, o)
	}
	s.Name = name
	if name == "" {
		s.Name = "off"
	}
	return s, err
}

// setNetwork applies o.Network.
func (s *Spec) setNetwork(name string, o ProfileOptions) error {
	switch o.Network {
	case "":
	case "off":
		s.NoNetwork, s.Allowlist = true, false
	case "on":
		s.NoNetwork, s.Allowlist = false, false
	case "allowlist":
		if name == "off" || name == "" {
			return fmt.Errorf("sandbox: network = \"allowlist\" needs a sandbox profile (the off profile confines nothing, so it cannot hold the network to the proxy); choose workspace-write, read-only, no-network or strict")
		}
		s.NoNetwork, s.Allowlist, s.Egress = false, true, o.Egress
	default:
		return fmt.Errorf("sandbox: network = %q: write %s", o.Network, strings.Join(NetworkModes, ", "))
	}
	if o.Network == "off" && (name == "off" || name == "") {
		return fmt.Errorf("sandbox: network = \"off\" needs a sandbox profile; choose no-network")
	}
	return nil
}

func profile(name string, o ProfileOptions) (Spec, error) {
	hidden := o.Hidden
	if hidden == nil {
		hidden = DefaultHidden
	}
	home, _ := os.UserHomeDir()
	expand := func(list []string) []string {
		var expanded []string
		for _, h := range list {
			if rest, ok := strings.CutPrefix(h, "~/"); ok {
				if home == "" {
					continue
				}
				h = filepath.Join(home, rest)
			}
			expanded = append(expanded, h)
		}
		return expanded
	}
	allow := o.HomeAllow
	if allow == nil {
		allow = DefaultHomeAllow
		for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
			if home != "" && filepath.IsAbs(dir) && strings.HasPrefix(filepath.Clean(dir), filepath.Clean(home)+"/") {
				allow = append(allow[:len(allow):len(allow)], filepath.Clean(dir))
			}
		}
	}
	cache := o.Cache
	switch cache {
	case "":
		cache = DefaultCacheDir()
	case "-":
		cache = ""
	}
	base := Spec{Filesystem: true, ReadOnly: append([]string{"/"}, o.ReadOnly...), Hidden: append(expand(hidden), o.Secrets...),
		PrivateTmp: true, BestEffort: o.BestEffort, Isolate: true, HomeDir: home, Home: expand(allow), Cache: cache}
	withWorkspace := func(s Spec) Spec {
		if o.Workspace != "" {
			s.ReadWrite = append([]string{o.Workspace}, o.ReadWrite...)
		}
		return s
	}
	switch name {
	case "off", "":
		return Spec{}, nil
	case "workspace-write":
		return withWorkspace(base), nil
	case "read-only":
		base.ReadWrite = o.ReadWrite
		base.Cache = "" // nothing persistent is written
		if o.Workspace != "" {
			base.ReadOnly = append(base.ReadOnly, o.Workspace)
		}
		return base, nil
	case "no-network":
		s := withWorkspace(base)
		s.NoNetwork = true
		return s, nil
	case "strict":
		s := withWorkspace(base)
		s.NoNetwork = true
		s.CPUSeconds, s.MemoryBytes, s.FileSizeBytes, s.OpenFiles, s.Processes = 60, 512<<20, 64<<20, 256, 512
		s.TmpBytes = 256 << 20
		return s, nil
	}
	return Spec{}, fmt.Errorf("sandbox: unknown profile %q; the profiles are %s", name, strings.Join(Profiles, ", "))
}

// Label names the spec for results and the audit log: the profile, and
// the layers skipped under best effort.
func (s *Spec) Label() string {
	if s == nil || !s.Enabled() {
		return "off"
	}
	name := s.Name
	if name == "" {
		name = "custom"
	}
	if s.Allowlist {
		name += ", network allowlist"
	}
	if s.BestEffort {
		if missing := s.Missing(); len(missing) > 0 {
			name += " (best effort; skipped: " + strings.Join(missing, "; ") + ")"
		}
	}
	return name
}

// Hook returns the runner hook for s (nil when s is nil or confines
// nothing), and the label of what it applies.
func (s *Spec) Hook() (func(path string, argv, env []string) (*runner.Wrapped, error), string, error) {
	if s == nil {
		return nil, "off", nil
	}
	w, err := s.Wrapper(Options{})
	return w, s.Label(), err
}
