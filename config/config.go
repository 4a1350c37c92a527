// Package config reads agentexec's configuration: an embedded default that
// serves with no file at all, then at most one TOML file (from --config,
// $AGENTEXEC_CONFIG, ./agentexec.toml or
// $XDG_CONFIG_HOME/agentexec/config.toml, first found). Unknown keys and bad
// values are errors naming the file, the line, the key and the accepted
// form. The configuration remembers where each value came from.
package config

import (
	_ "embed"
	"encoding"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/agentexec/agentexec/egress"
	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/sandbox"
)

//go:embed default.toml
var defaultTOML string

// Default returns the text of the embedded default configuration, which is
// also the commented starter file `agentexec config init` writes.
func Default() string { return defaultTOML }

// Contracts are the tool contracts a configuration may enable.
var Contracts = []string{"exec", "bash", "Exec", "shell.exec", "exec_command", "write_stdin"}

// Config is the effective configuration.
type Config struct {
	Workspace string    `toml:"workspace"`
	Profile   string    `toml:"profile"`
	Env       EnvConfig `toml:"env"`
	Tools     Tools     `toml:"tools"`
	Sandbox   Sandbox   `toml:"sandbox"`
	Grants    Grants    `toml:"grants"`
	Audit     Audit     `toml:"audit"`
	Jobs      Jobs      `toml:"jobs"`
	Server    Server    `toml:"server"`
	Rules     []Rule    `toml:"rules"`

	// File is the file read, or "" when only the default applies.
	File string `toml:"-"`
	// sources maps a key ("tools.enabled", "rules[0].id") to where its
	// value came from.
	sources map[string]string
}

// EnvConfig is the [env] table.
type EnvConfig struct {
	Pass []string          `toml:"pass"`
	Set  map[string]string `toml:"set"`
}

// Tools is the [tools] table.
type Tools struct {
	Enabled     []string          `toml:"enabled"`
	Names       map[string]string `toml:"names"`
	Grace       Duration          `toml:"grace"`
	DetachAfter Duration          `toml:"detach_after"`
	Cgroup      string            `toml:"cgroup"`
	JobTools    bool              `toml:"job_tools"`
	ShellExec   ShellExec         `toml:"shell_exec"`
	Sessions    Sessions          `toml:"sessions"`
}

// Sessions is [tools.sessions]: the limits of exec_command's interactive
// sessions, and the decision on input typed into a program that is not a
// shell in a session without a sandbox.
type Sessions struct {
	MaxLive            int      `toml:"max_live"`
	MaxPerConversation int      `toml:"max_per_conversation"`
	IdleTimeout        Duration `toml:"idle_timeout"`
	ProgramInput       string   `toml:"program_input"`
}

// ShellExec is [tools.shell_exec]: the shell.exec tool's executable
// policy and default timeout.
type ShellExec struct {
	AllowExecutables          []string `toml:"allow_executables"`
	DenyExecutables           []string `toml:"deny_executables"`
	RequireApprovalForUnknown bool     `toml:"require_approval_for_unknown"`
	DefaultTimeout            Duration `toml:"default_timeout"`
}

// Sandbox is [sandbox].
type Sandbox struct {
	Profile    string   `toml:"profile"`
	BestEffort bool     `toml:"best_effort"`
	Hidden     []string `toml:"hidden"`
	ReadOnly   []string `toml:"read_only"`
	ReadWrite  []string `toml:"read_write"`
	Network    Network  `toml:"network"`
}

// Network is [sandbox.network]: what sandboxed commands may reach.
type Network struct {
	// Mode is "" (the profile's: on, or off for no-network and strict),
	// "off", "on" or "allowlist" (only through the egress proxy, to the
	// hosts Allow names and Deny does not).
	Mode string `toml:"mode"`
	// Allow and Deny are host rules: "host", "*.domain", either with
	// ":port"; deny wins.
	Allow []string `toml:"allow"`
	Deny  []string `toml:"deny"`
	// Presets add the hosts the machine's tools use: "package-managers",
	// "git-remotes".
	Presets []string `toml:"presets"`
	// AllowPrivate lets the proxy reach loopback, private and link-local
	// addresses.
	AllowPrivate bool `toml:"allow_private"`
	// OnUnknown is "deny" or "ask" (the approver is asked about a host no
	// rule names).
	OnUnknown string `toml:"on_unknown"`
}

// NetworkPresets are the values of sandbox.network.presets.
var NetworkPresets = []string{"package-managers", "git-remotes"}

// Grants is [grants]: the agent's tool and fs grants (the Exec tool needs
// "Exec" in tools, and fs grants covering its program and cwd).
type Grants struct {
	Tools []string `toml:"tools"`
	FS    []string `toml:"fs"`
}

// Audit is [audit].
type Audit struct {
	Path       string `toml:"path"`
	MaxSize    Size   `toml:"max_size"`
	Keep       int    `toml:"keep"`
	FailClosed bool   `toml:"fail_closed"`
}

// Jobs is [jobs].
type Jobs struct {
	StateDir string `toml:"state_dir"`
	MaxLive  int    `toml:"max_live"`
	// MaxLiveTotal caps the running jobs of one process (all
	// conversations).
	MaxLiveTotal int  `toml:"max_live_total"`
	MaxOutput    Size `toml:"max_output"`
}

// Server is [server]: the limits of `agentexec mcp` and `serve`.
type Server struct {
	MaxSessions        int      `toml:"max_sessions"`
	MaxCalls           int      `toml:"max_calls"`
	MaxCallsPerSession int      `toml:"max_calls_per_session"`
	SessionIdle        Duration `toml:"session_idle"`
	// Grace is the time `serve` has, after SIGTERM, to end every call,
	// session and job and flush the audit log (keep it under the 30 s
	// Kubernetes gives a pod).
	Grace Duration `toml:"grace"`
	// MetricsListen is where `serve` serves Prometheus metrics (GET
	// /metrics, a listener of its own); empty: off.
	MetricsListen string `toml:"metrics_listen"`
	// Otel exports traces over OTLP/HTTP even when no
	// OTEL_EXPORTER_OTLP_ENDPOINT is set (the exporter's default
	// endpoint is then used).
	Otel bool `toml:"otel"`
	// OtelRecordCommands puts each command's text on its span.
	OtelRecordCommands bool `toml:"otel_record_commands"`
}

// Rule is one [[rules]] entry.
type Rule struct {
	ID           string   `toml:"id" json:"id,omitempty"`
	Action       string   `toml:"action" json:"action,omitempty"`
	Reason       string   `toml:"reason" json:"reason,omitempty"`
	Alternative  string   `toml:"alternative" json:"alternative,omitempty"`
	Executables  []string `toml:"executables" json:"executables,omitempty"`
	Prefix       string   `toml:"prefix" json:"prefix,omitempty"`
	Builtin      string   `toml:"builtin" json:"builtin,omitempty"`
	CwdRoots     []string `toml:"cwd_roots" json:"cwd_roots,omitempty"`
	EnvKeys      []string `toml:"env_keys" json:"env_keys,omitempty"`
	Tools        []string `toml:"tools" json:"tools,omitempty"`
	MustMatch    []string `toml:"must_match" json:"must_match,omitempty"`
	MustNotMatch []string `toml:"must_not_match" json:"must_not_match,omitempty"`
}

// Duration is a Go duration written as a string ("30s", "2m").
type Duration time.Duration

// UnmarshalText reads "30s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil || v < 0 {
		return fmt.Errorf("want a duration such as \"30s\" or \"2m\", not %q", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes "30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Size is a byte count written as "10MiB", "64KiB" or a number.
type Size int64

// UnmarshalText reads "10MiB".
func (s *Size) UnmarshalText(b []byte) error {
	n, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

// MarshalText writes the size in bytes.
func (s Size) MarshalText() ([]byte, error) { return []byte(strconv.FormatInt(int64(s), 10)), nil }

// ParseSize reads a positive byte count: 65536, 64KiB, 64KB, 64K (KiB),
// 1MiB, 1MB, 1M, 2GiB, 2GB or 2G; at most 1 PiB.
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000_000}, {"GB", 1000_000_000},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/mult {
		return 0, fmt.Errorf("want a positive size such as 65536, 64KiB or 10MiB, not %q", s)
	}
	return n * mult, nil
}

// Error is a configuration error with its place.
type Error struct {
	File string // "" for the embedded default
	Line int    // 0 when unknown
	Key  string
	Msg  string
}

// Error returns "file:line: key: message".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Options say where to look.
type Options struct {
	// File is --config; it must exist when set.
	File string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// Dir is where ./agentexec.toml is looked for; empty means the
	// current directory.
	Dir string
}

// Find returns the configuration file to read and whether it was named
// explicitly (so that its absence is an error).
func Find(o Options) (path string, explicit bool) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if o.File != "" {
		return o.File, true
	}
	if f := getenv("AGENTEXEC_CONFIG"); f != "" {
		return f, true
	}
	dir := o.Dir
	if dir == "" {
		dir = "."
	}
	candidates := []string{filepath.Join(dir, "agentexec.toml")}
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		candidates = append(candidates, filepath.Join(x, "agentexec", "config.toml"))
	} else if h := getenv("HOME"); h != "" {
		candidates = append(candidates, filepath.Join(h, ".config", "agentexec", "config.toml"))
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c, false
		}
	}
	return "", false
}

// Load reads the default and the file Find chooses, and validates the
// result.
func Load(o Options) (*Config, error) {
	path, explicit := Find(o)
	if path == "" {
		return Parse("", "")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && explicit {
			return nil, &Error{File: path, Msg: "no such file (named by --config or $AGENTEXEC_CONFIG)"}
		}
		return nil, &Error{File: path, Msg: err.Error()}
	}
	return Parse(path, string(b))
}

// Parse reads the default, then text (the content of file, which names it
// in errors), and validates the result. Empty text means the default
// alone.
func Parse(file, text string) (*Config, error) {
	c := &Config{sources: map[string]string{}}
	if _, err := toml.Decode(defaultTOML, c); err != nil {
		return nil, fmt.Errorf("config: the embedded default is broken: %w", err)
	}
	if text != "" {
		c.File = file
		before := *c
		c.Rules = nil // rules come from the file only
		c.Env.Set, c.Tools.Names = nil, nil
		md, err := toml.Decode(text, c)
		if err != nil {
			return nil, decodeError(file, text, err)
		}
		if c.Env.Set == nil {
			c.Env.Set = before.Env.Set
		}
		if c.Tools.Names == nil {
			c.Tools.Names = before.Tools.Names
		}
		if undecoded := md.Undecoded(); len(undecoded) > 0 {
			k := undecoded[0]
			return nil, &Error{File: file, Line: lineOf(text, k), Key: k.String(), Msg: "unknown key; " + accepted(k)}
		}
		for _, k := range md.Keys() {
			c.sources[keyName(k)] = fmt.Sprintf("%s:%d", file, lineOf(text, k))
		}
		for i := range c.Rules {
			c.sources[fmt.Sprintf("rules[%d]", i)] = fmt.Sprintf("%s:%d", file, lineOfRule(text, i, ""))
		}
	}
	if err := c.validate(text); err != nil {
		return nil, err
	}
	return c, nil
}

// keyName writes a key path with array indexes: rules[0].id.
func keyName(k toml.Key) string {
	return strings.Join(k, ".")
}

// Source says where the value of key came from: "file:line", what
// SetSource recorded ("flag --sandbox", "env $NAME"), or "default". A
// [[rules]] entry's key is "rules[i]".
func (c *Config) Source(key string) string {
	if s, ok := c.sources[key]; ok {
		return s
	}
	return "default"
}

// SetSource records that the value of key (a dotted key, as Entries
// names them) now comes from src, such as "flag --sandbox" or
// "env $AGENTEXEC_SANDBOX". Callers that change a field after Load (flags,
// environment variables) call it so that `agentexec config show` and
// error messages name the right origin.
func (c *Config) SetSource(key, src string) {
	if c.sources == nil {
		c.sources = map[string]string{}
	}
	c.sources[key] = src
}

// Entry is one configuration key and its effective value.
type Entry struct {
	// Key is the dotted key: "profile", "tools.shell_exec.allow_executables".
	Key string
	// Table is the table the key is written in ("" for the top level).
	Table string
	// Value is the field's value: a string, bool, int, []string,
	// map[string]string, Duration or Size.
	Value any
}

// Entries returns every key of the configuration except the [[rules]]
// entries, with its value, in the order a TOML file writes them (a
// table's own keys before its sub-tables). It walks the Config struct by
// its toml tags, so a key added to the struct is listed without further
// work.
func (c *Config) Entries() []Entry {
	var out []Entry
	var walk func(table string, v reflect.Value)
	walk = func(table string, v reflect.Value) {
		t := v.Type()
		var subs []int
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if !f.IsExported() || name == "" || name == "-" || (table == "" && name == "rules") {
				continue
			}
			if isTable(f.Type) {
				subs = append(subs, i)
				continue
			}
			key := name
			if table != "" {
				key = table + "." + name
			}
			out = append(out, Entry{Key: key, Table: table, Value: v.Field(i).Interface()})
		}
		for _, i := range subs {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
			if table != "" {
				name = table + "." + name
			}
			walk(name, v.Field(i))
		}
	}
	walk("", reflect.ValueOf(c).Elem())
	return out
}

// isTable reports whether a field of type t is written as a TOML table:
// a struct that does not read itself from text.
func isTable(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	return !reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]())
}

// known lists the keys of each table, for "unknown key" errors.
var known = map[string][]string{
	"":                 {"workspace", "profile", "env", "tools", "sandbox", "grants", "audit", "jobs", "server", "rules"},
	"sandbox":          {"profile", "best_effort", "hidden", "read_only", "read_write", "network"},
	"sandbox.network":  {"mode", "allow", "deny", "presets", "allow_private", "on_unknown"},
	"env":              {"pass", "set"},
	"tools":            {"enabled", "names", "grace", "detach_after", "cgroup", "job_tools", "shell_exec", "sessions"},
	"tools.sessions":   {"max_live", "max_per_conversation", "idle_timeout", "program_input"},
	"tools.shell_exec": {"allow_executables", "deny_executables", "require_approval_for_unknown", "default_timeout"},
	"grants":           {"tools", "fs"},
	"audit":            {"path", "max_size", "keep", "fail_closed"},
	"jobs":             {"state_dir", "max_live", "max_live_total", "max_output"},
	"server":           {"max_sessions", "max_calls", "max_calls_per_session", "session_idle", "grace", "metrics_listen", "otel", "otel_record_commands"},
	"rules":            {"id", "action", "reason", "alternative", "executables", "prefix", "builtin", "cwd_roots", "env_keys", "tools", "must_match", "must_not_match"},
}

func accepted(k toml.Key) string {
	table := strings.Join(k[:len(k)-1], ".")
	keys, ok := known[table]
	if !ok {
		return "this table takes no such key"
	}
	where := "at the top level"
	if table != "" {
		where = "in [" + table + "]"
	}
	return "the keys " + where + " are " + strings.Join(keys, ", ")
}

// decodeError turns a TOML error into an Error with its line.
func decodeError(file, text string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		msg := pe.Message
		if pe.LastKey != "" {
			return &Error{File: file, Line: pe.Position.Line, Key: pe.LastKey, Msg: msg}
		}
		return &Error{File: file, Line: pe.Position.Line, Msg: msg}
	}
	if m := typeErr.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: line, Key: m[2], Msg: m[3]}
	}
	return &Error{File: file, Msg: err.Error()}
}

// typeErr matches the decoder's errors for values of the wrong type.
var typeErr = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

// Check validates the configuration again, after a caller changed fields
// (command-line flags); errors carry no line.
func (c *Config) Check() error { return c.validate("") }

// validate checks values that TOML types alone do not.
func (c *Config) validate(text string) error {
	fail := func(key, format string, args ...any) error {
		return &Error{File: c.File, Line: lineOfName(text, key), Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	switch c.Profile {
	case "open", "guarded", "strict":
	default:
		return fail("profile", "%q is not a profile; use open, guarded or strict", c.Profile)
	}
	if c.Workspace != "" && !filepath.IsAbs(c.Workspace) {
		return fail("workspace", "%q: use an absolute path (or leave it empty for the current directory)", c.Workspace)
	}
	for _, t := range c.Tools.Enabled {
		if !slices.Contains(Contracts, t) {
			return fail("tools.enabled", "%q is not a contract; the contracts are %s", t, strings.Join(Contracts, ", "))
		}
	}
	for k, v := range c.Tools.Names {
		if !slices.Contains(Contracts, k) {
			return fail("tools.names", "%q is not a contract; the contracts are %s", k, strings.Join(Contracts, ", "))
		}
		if v == "" {
			return fail("tools.names", "the name for %q is empty", k)
		}
	}
	if m := c.Tools.Cgroup; m != "auto" && m != "off" && !filepath.IsAbs(m) {
		return fail("tools.cgroup", "%q: use auto, off, or the absolute path of a cgroup v2 directory", m)
	}
	for _, k := range c.Env.Pass {
		if k == "" || strings.ContainsAny(k, "= \x00") || strings.Contains(strings.TrimSuffix(k, "*"), "*") {
			return fail("env.pass", "%q: use a variable name, or a prefix ending in * such as \"GO*\"", k)
		}
	}
	for k := range c.Env.Set {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fail("env.set", "%q is not a variable name", k)
		}
	}
	for _, g := range c.Grants.FS {
		mode, p, ok := strings.Cut(g, ":")
		if !ok || (mode != "r" && mode != "w" && mode != "rw") || !filepath.IsAbs(p) {
			return fail("grants.fs", "%q: use MODE:PATH with MODE r, w or rw and an absolute path, such as \"r:/usr\"", g)
		}
	}
	if !slices.Contains(sandbox.Profiles, c.Sandbox.Profile) {
		return fail("sandbox.profile", "%q is not a sandbox profile; the profiles are %s", c.Sandbox.Profile, strings.Join(sandbox.Profiles, ", "))
	}
	for _, list := range []struct {
		key   string
		paths []string
	}{{"sandbox.hidden", c.Sandbox.Hidden}, {"sandbox.read_only", c.Sandbox.ReadOnly}, {"sandbox.read_write", c.Sandbox.ReadWrite}} {
		for _, p := range list.paths {
			if !filepath.IsAbs(p) && !strings.HasPrefix(p, "~/") {
				return fail(list.key, "%q: use an absolute path, or one starting with ~/", p)
			}
		}
	}
	if err := c.Sandbox.Network.check(c.Sandbox.Profile, fail); err != nil {
		return err
	}
	if ss := c.Tools.Sessions; ss.MaxLive < 1 || ss.MaxPerConversation < 1 {
		return fail("tools.sessions", "max_live and max_per_conversation must be at least 1")
	}
	switch c.Tools.Sessions.ProgramInput {
	case "", "allow", "ask", "deny":
	default:
		return fail("tools.sessions.program_input", "%q: use allow, ask or deny (or leave it empty: allow in the open profile, ask otherwise)", c.Tools.Sessions.ProgramInput)
	}
	if c.Jobs.MaxLive < 0 {
		return fail("jobs.max_live", "must not be negative (0: no cap)")
	}
	for _, v := range []struct {
		key string
		n   int
	}{{"jobs.max_live_total", c.Jobs.MaxLiveTotal}, {"server.max_sessions", c.Server.MaxSessions}, {"server.max_calls", c.Server.MaxCalls}, {"server.max_calls_per_session", c.Server.MaxCallsPerSession}} {
		if v.n < 0 {
			return fail(v.key, "must not be negative (0: the built-in default)")
		}
	}
	if c.Audit.Keep < 0 {
		return fail("audit.keep", "must not be negative")
	}
	if g := c.Server.Grace; g <= 0 || g <= c.Tools.Grace {
		return fail("server.grace", "%s: must be positive and longer than tools.grace (%s), the time a command gets between SIGTERM and SIGKILL",
			time.Duration(g), time.Duration(c.Tools.Grace))
	}
	if a := c.Server.MetricsListen; a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fail("server.metrics_listen", "%q: give host:port (127.0.0.1:9464), or leave it empty to serve no metrics", a)
		}
	}
	pol := policy.CommandPolicy{Allow: c.Tools.ShellExec.AllowExecutables, Deny: c.Tools.ShellExec.DenyExecutables}
	if err := pol.Validate(); err != nil {
		return fail("tools.shell_exec", "%s", strings.TrimPrefix(err.Error(), "policy: "))
	}
	if _, err := c.Engine(); err != nil {
		var re *policy.RuleError
		if errors.As(err, &re) {
			key := fmt.Sprintf("rules[%d]", re.Index)
			if re.Field != "" {
				key += "." + re.Field
			}
			return &Error{File: c.File, Line: lineOfRule(text, re.Index, re.Field), Key: key, Msg: re.Msg}
		}
		return fail("rules", "%v", err)
	}
	return nil
}

// Engine builds the policy engine the configuration describes.
func (c *Config) Engine() (*policy.Engine, error) {
	rules := make([]policy.Rule, len(c.Rules))
	for i, r := range c.Rules {
		var v policy.Verdict
		switch r.Action {
		case "allow":
			v = policy.Allow
		case "ask":
			v = policy.Ask
		case "deny":
			v = policy.Deny
		default:
			return nil, &policy.RuleError{Index: i, ID: r.ID, Field: "action", Msg: fmt.Sprintf("%q: use allow, ask or deny", r.Action)}
		}
		rules[i] = policy.Rule{
			ID: r.ID, Action: v, Reason: r.Reason, Alternative: r.Alternative, Executables: r.Executables, Prefix: r.Prefix,
			Builtin: r.Builtin, CwdRoots: r.CwdRoots, EnvKeys: r.EnvKeys, Tools: r.Tools, MustMatch: r.MustMatch, MustNotMatch: r.MustNotMatch,
		}
	}
	return policy.NewEngine(policy.Profile(c.Profile), rules)
}

// BuiltinRules lists the ids a rule's builtin may name, for help texts.
func BuiltinRules() []string {
	return policy.BuiltinIDs()
}

// Keys returns the keys whose values came from the file, sorted.
func (c *Config) Keys() []string {
	var keys []string
	for k := range c.sources {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// check validates [sandbox.network]: the mode, the presets, the answer to
// unknown hosts and every rule (so that "*" and "*.com" are refused
// here, with the rule's text).
func (n *Network) check(profile string, failErr func(key, format string, args ...any) error) error {
	switch n.Mode {
	case "", "on":
	case "off", "allowlist":
		if profile == "off" {
			return failErr("sandbox.network.mode", "%q needs a sandbox profile to hold commands to it; the off profile confines nothing (choose workspace-write, read-only, no-network or strict)", n.Mode)
		}
	default:
		return failErr("sandbox.network.mode", "%q: use off, on or allowlist (or leave it empty: the profile decides)", n.Mode)
	}
	switch n.OnUnknown {
	case "", "deny", "ask":
	default:
		return failErr("sandbox.network.on_unknown", "%q: use deny or ask", n.OnUnknown)
	}
	for _, p := range n.Presets {
		if !slices.Contains(NetworkPresets, p) {
			return failErr("sandbox.network.presets", "%q is not a preset; the presets are %s", p, strings.Join(NetworkPresets, ", "))
		}
	}
	for key, list := range map[string][]string{"sandbox.network.allow": n.Allow, "sandbox.network.deny": n.Deny} {
		for _, r := range list {
			if _, err := egress.ParseRule(r); err != nil {
				return failErr(key, "%v", err)
			}
		}
	}
	return nil
}
