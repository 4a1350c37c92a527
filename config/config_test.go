package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDefault(t *testing.T) {
	c, err := Parse("", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Profile != "guarded" || strings.Join(c.Tools.Enabled, ",") != "bash" || time.Duration(c.Tools.Grace) != 2*time.Second ||
		c.Audit.MaxSize != 10<<20 || c.Audit.Keep != 3 || time.Duration(c.Tools.ShellExec.DefaultTimeout) != 2*time.Minute {
		t.Errorf("default %+v", c)
	}
	if c.Source("profile") != "default" {
		t.Errorf("source %q", c.Source("profile"))
	}
}

func TestFileOverrides(t *testing.T) {
	text := `profile = "strict"

[env]
pass = ["GOPATH", "npm_config_*"]
set = { NODE_ENV = "test" }

[tools]
enabled = ["bash", "Exec"]
names = { "shell.exec" = "shell_exec" }

[tools.shell_exec]
deny_executables = ["rm"]

[[rules]]
id = "no-publish"
action = "deny"
prefix = "npm publish"
must_match = ["npm publish"]
must_not_match = ["npm test"]
`
	c, err := Parse("/etc/agentexec.toml", text)
	if err != nil {
		t.Fatal(err)
	}
	if c.Profile != "strict" || c.Env.Set["NODE_ENV"] != "test" || c.Tools.Names["shell.exec"] != "shell_exec" || len(c.Rules) != 1 ||
		strings.Join(c.Tools.ShellExec.DenyExecutables, ",") != "rm" || c.Audit.Keep != 3 {
		t.Errorf("config %+v", c)
	}
	for key, want := range map[string]string{"profile": "/etc/agentexec.toml:1", "env.pass": "/etc/agentexec.toml:4", "tools.enabled": "/etc/agentexec.toml:8", "audit.keep": "default"} {
		if got := c.Source(key); got != want {
			t.Errorf("Source(%s) = %q, want %q", key, got, want)
		}
	}
	if _, err := c.Engine(); err != nil {
		t.Error(err)
	}
}

// TestErrors: every error names the file, the line and the key, and says
// what is accepted.
func TestErrors(t *testing.T) {
	cases := []struct{ text, want string }{
		{`profile = "paranoid"`, `config: f.toml:1: profile: "paranoid" is not a profile; use open, guarded or strict`},
		{"\n\nprofle = \"open\"", "config: f.toml:3: profle: unknown key; the keys at the top level are workspace, profile, env, tools, sandbox, grants, audit, jobs, server, rules"},
		{"[tools]\nenabeld = []", "config: f.toml:2: tools.enabeld: unknown key; the keys in [tools] are enabled, names, grace, detach_after, cgroup, job_tools, shell_exec"},
		{"[tools]\nenabled = [\"zsh\"]", `config: f.toml:2: tools.enabled: "zsh" is not a contract; the contracts are exec, bash, Exec, shell.exec`},
		{"[tools]\ngrace = \"soon\"", `config: f.toml:2: tools.grace: `},
		{"[tools]\ncgroup = \"sometimes\"", `config: f.toml:2: tools.cgroup: "sometimes": use auto, off, or the absolute path of a cgroup v2 directory`},
		{"[audit]\nmax_size = \"lots\"", `config: f.toml:2: audit.max_size: `},
		{"[audit]\nkeep = \"three\"", `config: f.toml:2: audit.keep: `},
		{"profile = ", "config: f.toml:1: "},
		{"[grants]\nfs = [\"/usr\"]", `config: f.toml:2: grants.fs: "/usr": use MODE:PATH`},
		{"[env]\npass = [\"A*B\"]", `config: f.toml:2: env.pass: "A*B": use a variable name`},
		{"[tools.shell_exec]\ndeny_executables = [\"bin/rm\"]", `config: f.toml:1: tools.shell_exec: deny_executables[0] = "bin/rm"`},
		{"workspace = \"relative\"", `config: f.toml:1: workspace: "relative": use an absolute path`},
		{"[[rules]]\nid = \"x\"\naction = \"block\"\nprefix = \"rm\"", `config: f.toml:3: rules[0].action: "block": use allow, ask or deny`},
		{"[[rules]]\nid = \"a\"\naction = \"deny\"\nprefix = \"x\"\n\n[[rules]]\nid = \"b\"\naction = \"deny\"\nprefix = \"npm publish\"\nmust_match = [\"npm test\"]",
			`config: f.toml:10: rules[1].must_match: the example "npm test" does not match this rule`},
		{"[[rules]]\nid = \"a\"\naction = \"deny\"", `config: f.toml:1: rules[0]: a rule needs at least one of`},
		{"[[rules]]\nid = \"a\"\naction = \"deny\"\nbuiltin = \"no-such\"", `config: f.toml:4: rules[0].builtin: "no-such" is not a built-in rule`},
		{"[sandbox.network]\nmode = \"some\"", `config: f.toml:2: sandbox.network.mode: "some": use off, on or allowlist`},
		{"[sandbox]\nprofile = \"off\"\n[sandbox.network]\nmode = \"allowlist\"", `config: f.toml:4: sandbox.network.mode: "allowlist" needs a sandbox profile`},
		{"[sandbox.network]\nmode = \"allowlist\"\nallow = [\"ok.example\", \"*\"]", `config: f.toml:3: sandbox.network.allow: egress rule "*": "*" would allow every host`},
		{"[sandbox.network]\ndeny = [\"*.com\"]", `config: f.toml:2: sandbox.network.deny: egress rule "*.com": a wildcard over a whole top-level domain`},
		{"[sandbox.network]\npresets = [\"everything\"]", `config: f.toml:2: sandbox.network.presets: "everything" is not a preset; the presets are package-managers, git-remotes`},
		{"[sandbox.network]\non_unknown = \"maybe\"", `config: f.toml:2: sandbox.network.on_unknown: "maybe": use deny or ask`},
		{"[[rules]]\nid = \"a\"\nactoin = \"deny\"", `config: f.toml:3: rules.actoin: unknown key; the keys in [rules] are id, action`},
	}
	for _, c := range cases {
		_, err := Parse("f.toml", c.text)
		var ce *Error
		if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q:\ngot  %v\nwant %q", c.text, err, c.want)
		}
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	xdg := filepath.Join(dir, "xdg")
	os.MkdirAll(filepath.Join(xdg, "agentexec"), 0o755)
	os.WriteFile(filepath.Join(xdg, "agentexec", "config.toml"), []byte(`profile = "open"`), 0o644)
	env := map[string]string{"XDG_CONFIG_HOME": xdg}
	getenv := func(k string) string { return env[k] }
	if p, _ := Find(Options{Getenv: getenv, Dir: dir}); p != filepath.Join(xdg, "agentexec", "config.toml") {
		t.Errorf("xdg: %q", p)
	}
	os.WriteFile(filepath.Join(dir, "agentexec.toml"), []byte(`profile = "strict"`), 0o644)
	if p, _ := Find(Options{Getenv: getenv, Dir: dir}); p != filepath.Join(dir, "agentexec.toml") {
		t.Errorf("./agentexec.toml: %q", p)
	}
	env["AGENTEXEC_CONFIG"] = "/from/env.toml"
	if p, explicit := Find(Options{Getenv: getenv, Dir: dir}); p != "/from/env.toml" || !explicit {
		t.Errorf("env: %q", p)
	}
	if p, _ := Find(Options{Getenv: getenv, Dir: dir, File: "/flag.toml"}); p != "/flag.toml" {
		t.Errorf("flag: %q", p)
	}
	_, err := Load(Options{Getenv: getenv, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "/from/env.toml: no such file") {
		t.Errorf("missing explicit file: %v", err)
	}
	delete(env, "AGENTEXEC_CONFIG")
	c, err := Load(Options{Getenv: getenv, Dir: dir})
	if err != nil || c.Profile != "strict" {
		t.Errorf("load: %+v %v", c, err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"65536": 65536, "64KiB": 64 << 10, "10MiB": 10 << 20, "1MB": 1000000, "2GiB": 2 << 30} {
		if got, err := ParseSize(in); got != want || err != nil {
			t.Errorf("ParseSize(%q) = %d %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "-1", "0", "1XB", "lots", "99999999999GiB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

// FuzzParse: the loader never panics, and what it accepts is valid.
func FuzzParse(f *testing.F) {
	f.Add(Default())
	f.Add("profile = \"strict\"\n[[rules]]\nid = \"a\"\naction = \"deny\"\nprefix = \"rm\"\n")
	f.Add("[tools]\nenabled = [\"bash\"]\nnames = { bash = \"sh\" }\n")
	f.Add("[env]\nset = { A = \"b\" }\npass = [\"GO*\"]")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := Parse("f.toml", text)
		if err != nil {
			return
		}
		if err := c.Check(); err != nil {
			t.Fatalf("accepted, then invalid: %v", err)
		}
	})
}

// leafKeys lists every key of the Config struct by its toml tags, walked
// independently of Entries: tables recurse, [[rules]] is its own form.
func leafKeys(t reflect.Type, table string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || (table == "" && name == "rules") {
			continue
		}
		key := name
		if table != "" {
			key = table + "." + name
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[Duration]() && f.Type != reflect.TypeFor[Size]() {
			out = append(out, leafKeys(f.Type, key)...)
			continue
		}
		out = append(out, key)
	}
	return out
}

// TestEveryKeyIsListed fails when a key is added to the configuration but
// not to Entries (what `config show` prints), to the list of accepted
// keys in "unknown key" errors, or to the commented starter file.
func TestEveryKeyIsListed(t *testing.T) {
	c, err := Parse("", "")
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]bool{}
	for _, e := range c.Entries() {
		entries[e.Key] = true
	}
	keys := leafKeys(reflect.TypeFor[Config](), "")
	if len(keys) < 28 {
		t.Fatalf("found only %d keys: %v", len(keys), keys)
	}
	starter := scan(Default())
	for _, k := range keys {
		if !entries[k] {
			t.Errorf("%s is not in Entries (config show would leave it out)", k)
		}
		table, name := "", k
		if i := strings.LastIndexByte(k, '.'); i >= 0 {
			table, name = k[:i], k[i+1:]
		}
		if !slices.Contains(known[table], name) {
			t.Errorf("%s is not in known[%q] (unknown-key errors would not offer it)", k, table)
		}
		found := false
		for _, l := range starter {
			found = found || (l.table == table && l.key == name)
		}
		if !found {
			t.Errorf("%s is not in default.toml (the starter configuration)", k)
		}
	}
	if len(entries) != len(keys) {
		t.Errorf("Entries has %d keys, the struct %d", len(entries), len(keys))
	}
	// A table's own keys come before its sub-tables, as TOML needs.
	seen := map[string]bool{}
	last := ""
	for _, e := range c.Entries() {
		if e.Table != last {
			if seen[e.Table] {
				t.Errorf("table [%s] is split", e.Table)
			}
			seen[e.Table], last = true, e.Table
		}
	}
}

// TestSources: each key says where its value came from, rules by entry.
func TestSources(t *testing.T) {
	text := "[sandbox]\nprofile = \"strict\"\n\n[jobs]\nmax_live = 2\n\n[[rules]]\nid = \"a\"\naction = \"deny\"\nprefix = \"x\"\n\n[[rules]]\nid = \"b\"\naction = \"deny\"\nprefix = \"y\"\n"
	c, err := Parse("f.toml", text)
	if err != nil {
		t.Fatal(err)
	}
	c.SetSource("tools.enabled", "flag --tools")
	for key, want := range map[string]string{"sandbox.profile": "f.toml:2", "jobs.max_live": "f.toml:5", "jobs.max_output": "default",
		"rules[0]": "f.toml:7", "rules[1]": "f.toml:12", "tools.enabled": "flag --tools"} {
		if got := c.Source(key); got != want {
			t.Errorf("Source(%s) = %q, want %q", key, got, want)
		}
	}
}

// TestStarterComments: in the starter configuration, each table's comment
// sits right above its own header.
func TestStarterComments(t *testing.T) {
	lines := strings.Split(Default(), "\n")
	above := func(header string) string {
		i := slices.Index(lines, header)
		if i < 0 {
			t.Fatalf("no %s in default.toml", header)
		}
		var c []string
		for j := i - 1; j >= 0 && strings.HasPrefix(lines[j], "#"); j-- {
			c = append(c, lines[j])
		}
		return strings.Join(c, "\n")
	}
	if c := above("[grants]"); !strings.Contains(c, "grants") || !strings.Contains(c, "--grant-tool") {
		t.Errorf("[grants] comment: %q", c)
	}
	if c := above("[sandbox]"); strings.Contains(strings.ToLower(c), "grant") {
		t.Errorf("[sandbox] is preceded by another table's comment: %q", c)
	}
	if c := above("[tools.shell_exec]"); !strings.Contains(c, "shell.exec") {
		t.Errorf("[tools.shell_exec] comment: %q", c)
	}
}
