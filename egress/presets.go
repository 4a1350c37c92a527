package egress

import (
	"bufio"
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Presets are the names ResolvePresets knows.
var Presets = []string{"package-managers", "git-remotes"}

// PresetTimeout bounds the resolution of all presets.
const PresetTimeout = 10 * time.Second

// Resolved is what one preset resolved to on this machine.
type Resolved struct {
	Preset string `json:"preset"`
	// Hosts are allow rules ("host:port").
	Hosts []string `json:"hosts"`
	// Sources say where each group of hosts came from, and which tools
	// were skipped (not installed, failed, too slow).
	Sources []string `json:"sources,omitempty"`
}

// ResolvePresets resolves the named presets, within PresetTimeout: no
// host name is built in, each comes from the machine's own tools.
//
//   - package-managers: `npm config get registry`, `go env GOPROXY
//     GOSUMDB`, pip's index-url and extra-index-url (`pip config list`, or
//     pip's own default index when none is set) and the registries and
//     source replacements in cargo's config.toml;
//   - git-remotes: the hosts of `git remote -v` in workspace.
//
// A tool that is missing, fails or is too slow is skipped and named in
// Sources.
func ResolvePresets(ctx context.Context, names []string, workspace string) []Resolved {
	ctx, cancel := context.WithTimeout(ctx, PresetTimeout)
	defer cancel()
	var out []Resolved
	for _, n := range names {
		switch n {
		case "package-managers":
			out = append(out, packageManagers(ctx))
		case "git-remotes":
			out = append(out, gitRemotes(ctx, workspace))
		}
	}
	return out
}

// command runs a tool and returns its output, or "" and why not.
func command(ctx context.Context, dir, name string, args ...string) (string, string) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", name + ": not installed"
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return "", name + ": too slow, skipped"
		}
		return "", name + " " + strings.Join(args, " ") + ": " + err.Error()
	}
	return string(out), ""
}

// hostOf returns "host:port" of a URL (the scheme's port when none is
// written), or "".
func hostOf(raw string) string {
	raw = strings.TrimSpace(raw)
	raw = strings.TrimPrefix(raw, "sparse+")
	raw = strings.TrimPrefix(raw, "git+")
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		case "ssh":
			port = "22"
		default:
			return ""
		}
	}
	r, err := ParseRule(net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return ""
	}
	return r.Text
}

func packageManagers(ctx context.Context) Resolved {
	res := Resolved{Preset: "package-managers"}
	var mu sync.Mutex
	add := func(source string, hosts []string, skipped string) {
		mu.Lock()
		defer mu.Unlock()
		if skipped != "" {
			res.Sources = append(res.Sources, skipped)
			return
		}
		var kept []string
		for _, h := range hosts {
			if h != "" && !slices.Contains(res.Hosts, h) {
				res.Hosts = append(res.Hosts, h)
				kept = append(kept, h)
			}
		}
		if len(kept) > 0 {
			res.Sources = append(res.Sources, source+": "+strings.Join(kept, ", "))
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		out, skip := command(ctx, "", "npm", "config", "get", "registry")
		add("npm", []string{hostOf(out)}, skip)
	})
	wg.Go(func() {
		out, skip := command(ctx, "", "go", "env", "GOPROXY", "GOSUMDB")
		if skip != "" {
			add("go", nil, skip)
			return
		}
		lines := strings.Split(out, "\n")
		var hosts []string
		if len(lines) > 0 {
			for _, p := range strings.FieldsFunc(lines[0], func(r rune) bool { return r == ',' || r == '|' }) {
				hosts = append(hosts, hostOf(p)) // "direct" and "off" are no hosts
			}
		}
		if len(lines) > 1 {
			// GOSUMDB: "off", "NAME", "NAME+KEY" or "NAME+KEY URL".
			f := strings.Fields(lines[1])
			switch {
			case len(f) >= 2:
				hosts = append(hosts, hostOf(f[1]))
			case len(f) == 1 && f[0] != "off":
				name, _, _ := strings.Cut(f[0], "+")
				hosts = append(hosts, hostOf("https://"+name))
			}
		}
		add("go", hosts, "")
	})
	wg.Go(func() {
		pip := "pip3"
		if _, err := exec.LookPath(pip); err != nil {
			pip = "pip"
		}
		out, skip := command(ctx, "", pip, "config", "list")
		if skip != "" {
			add("pip", nil, skip)
			return
		}
		var hosts []string
		for _, line := range strings.Split(out, "\n") {
			k, v, ok := strings.Cut(line, "=")
			if !ok || !(strings.HasSuffix(k, ".index-url") || strings.HasSuffix(k, ".extra-index-url")) {
				continue
			}
			for _, u := range strings.Fields(strings.Trim(v, "'\"")) {
				hosts = append(hosts, hostOf(u))
			}
		}
		for _, env := range []string{"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"} {
			for _, u := range strings.Fields(os.Getenv(env)) {
				hosts = append(hosts, hostOf(u))
			}
		}
		if len(hosts) == 0 {
			// pip's own default index and file host, asked of pip.
			out, skip := command(ctx, "", "python3", "-c", "from pip._internal.models.index import PyPI as p; print(p.simple_url); print('https://' + p.file_storage_domain)")
			if skip != "" {
				add("pip", nil, "pip: no index configured, and its default could not be read ("+skip+")")
				return
			}
			for _, u := range strings.Fields(out) {
				hosts = append(hosts, hostOf(u))
			}
		}
		add("pip", hosts, "")
	})
	wg.Go(func() {
		hosts, skip := cargoRegistries()
		add("cargo", hosts, skip)
	})
	wg.Wait()
	slices.Sort(res.Sources)
	return res
}

// cargoRegistries reads the registry and source URLs of cargo's
// configuration ($CARGO_HOME/config.toml, ~/.cargo/config.toml). Cargo
// cannot print its default registry, so crates.io is found only when a
// configuration names it.
func cargoRegistries() ([]string, string) {
	var files []string
	if d := os.Getenv("CARGO_HOME"); d != "" {
		files = append(files, filepath.Join(d, "config.toml"), filepath.Join(d, "config"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		files = append(files, filepath.Join(home, ".cargo", "config.toml"), filepath.Join(home, ".cargo", "config"))
	}
	var hosts []string
	read := false
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		read = true
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), "=")
			k = strings.TrimSpace(k)
			if ok && (k == "index" || k == "registry") {
				if h := hostOf(strings.Trim(strings.TrimSpace(v), `"'`)); h != "" {
					hosts = append(hosts, h)
				}
			}
		}
		fh.Close()
	}
	if !read {
		if _, err := exec.LookPath("cargo"); err != nil {
			return nil, "cargo: not installed"
		}
		return nil, "cargo: no config.toml names a registry (cargo cannot print its default; allow its hosts by name)"
	}
	return hosts, ""
}

func gitRemotes(ctx context.Context, workspace string) Resolved {
	res := Resolved{Preset: "git-remotes"}
	out, skip := command(ctx, workspace, "git", "remote", "-v")
	if skip != "" {
		res.Sources = append(res.Sources, skip)
		return res
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		h := remoteHost(f[1])
		if h != "" && !slices.Contains(res.Hosts, h) {
			res.Hosts = append(res.Hosts, h)
		}
	}
	res.Sources = append(res.Sources, "git remote -v in "+workspace+": "+strconv.Itoa(len(res.Hosts))+" hosts")
	return res
}

// remoteHost returns "host:port" of a git remote URL: a URL, or the
// scp-like "user@host:path" (SSH, port 22). Local paths have none.
func remoteHost(remote string) string {
	if strings.Contains(remote, "://") {
		return hostOf(remote)
	}
	at := strings.IndexByte(remote, '@')
	colon := strings.IndexByte(remote, ':')
	if colon > 0 && (at < 0 || at < colon) && !strings.Contains(remote[:colon], "/") {
		return hostOf("ssh://" + remote[at+1:colon])
	}
	return ""
}
