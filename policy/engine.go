package policy

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentexec/agentexec/safety"
)

// Profile is a starting stance of the Engine.
type Profile string

// Profiles.
const (
	// Open is seed 000's stance: no command filtering. Configured rules
	// still apply.
	Open Profile = "open"
	// Guarded (the default): the built-in guardrails deny; a command whose
	// program is only known at run time, or a nested script that cannot
	// be read, asks; a script bash would not parse is refused; everything
	// else is allowed.
	Guarded Profile = "guarded"
	// Strict allows only read-only commands (with their dangerous flags
	// excluded) and configured allow rules; everything else asks.
	Strict Profile = "strict"
)

// Ids of decisions that are not built-in rules of package safety but can
// be switched like them.
const (
	RuleParseError     = "parse-error"
	RuleDynamicCommand = "dynamic-command"
	RuleNestedScript   = "nested-script"
	// RuleDynamicArgument asks when a destructive command's target (rm
	// -r, find -delete, rsync --delete, git config's key) is only known
	// at run time.
	RuleDynamicArgument = "dynamic-argument"
	RuleStrict          = "strict-allowlist"
)

// seedParseMessage is seed 001's refusal of a script it cannot parse.
const seedParseMessage = "Failed to parse script"

// Rule is a configured rule. It matches a command by program, argv prefix,
// or a built-in rule id, or a request by working directory or env keys;
// a rule with several forms matches when any one does.
type Rule struct {
	ID     string
	Action Verdict
	// Reason and Alternative are shown to the model when the rule
	// refuses or asks.
	Reason      string
	Alternative string
	// Executables are program names ("rm") or absolute paths.
	Executables []string
	// Prefix is an argv prefix ("git push", "npm run test"): the program's
	// base name, then arguments, word for word.
	Prefix string
	// Builtin is the id of a built-in rule (safety.Rules, or parse-error,
	// dynamic-command, nested-script): the rule gives it its verdict.
	Builtin string
	// CwdRoots match requests whose working directory is inside one.
	CwdRoots []string
	// EnvKeys match requests that pass, or commands that set, one of these
	// variables.
	EnvKeys []string
	// Tools limits the rule to these tools (canonical names); empty means
	// all.
	Tools []string
	// MustMatch and MustNotMatch are example commands, checked when the
	// Engine is built: an example that does not behave is an error.
	MustMatch    []string
	MustNotMatch []string
}

// RuleError says which rule is wrong and why.
type RuleError struct {
	Index int
	ID    string
	Field string
	Msg   string
}

// Error returns "rules[i] (id): field: message".
func (e *RuleError) Error() string {
	s := fmt.Sprintf("rules[%d]", e.Index)
	if e.ID != "" {
		s += fmt.Sprintf(" (%s)", e.ID)
	}
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Msg
}

type compiled struct {
	Rule
	prefix []string
	roots  []string // CwdRoots, cleaned
	index  int
}

// Engine decides on requests: the safety checker's findings, the profile
// and the configured rules. Build one with NewEngine; it is safe for
// concurrent use.
type Engine struct {
	profile  Profile
	rules    []*compiled
	byName   map[string][]*compiled // executable names and prefix first words
	byPath   map[string][]*compiled // absolute executable paths
	requestR []*compiled            // cwd and env rules
	envR     []*compiled            // env rules
	builtin  map[string]*compiled   // overrides of built-in rules
}

// NewEngine checks the rules (forms, ids, examples) and builds an Engine.
func NewEngine(profile Profile, rules []Rule) (*Engine, error) {
	if profile == "" {
		profile = Guarded
	}
	if profile != Open && profile != Guarded && profile != Strict {
		return nil, fmt.Errorf("policy: unknown profile %q; use open, guarded or strict", profile)
	}
	e := &Engine{profile: profile, byName: map[string][]*compiled{}, byPath: map[string][]*compiled{}, builtin: map[string]*compiled{}}
	ids := map[string]bool{}
	for i, r := range rules {
		c := &compiled{Rule: r, index: i}
		fail := func(field, format string, args ...any) error {
			return &RuleError{Index: i, ID: r.ID, Field: field, Msg: fmt.Sprintf(format, args...)}
		}
		switch {
		case r.ID == "":
			return nil, fail("id", "every rule needs an id")
		case ids[r.ID]:
			return nil, fail("id", "another rule has this id")
		case r.Action > Deny:
			return nil, fail("action", "use allow, ask or deny")
		}
		ids[r.ID] = true
		forms := 0
		for _, x := range r.Executables {
			if x == "" || (strings.Contains(x, "/") && !filepath.IsAbs(x)) {
				return nil, fail("executables", "%q: use a program name such as \"rm\" or an absolute path such as \"/usr/bin/rm\"", x)
			}
			if filepath.IsAbs(x) {
				e.byPath[filepath.Clean(x)] = append(e.byPath[filepath.Clean(x)], c)
			} else {
				e.byName[x] = append(e.byName[x], c)
			}
			forms++
		}
		if r.Prefix != "" {
			c.prefix = strings.Fields(r.Prefix)
			if len(c.prefix) == 0 {
				return nil, fail("prefix", "empty prefix")
			}
			e.byName[path.Base(c.prefix[0])] = append(e.byName[path.Base(c.prefix[0])], c)
			forms++
		}
		if r.Builtin != "" {
			if _, ok := safety.RuleByID(r.Builtin); !ok && r.Builtin != RuleParseError && r.Builtin != RuleDynamicCommand && r.Builtin != RuleNestedScript && r.Builtin != RuleDynamicArgument {
				return nil, fail("builtin", "%q is not a built-in rule; the built-in rules are %s", r.Builtin, strings.Join(BuiltinIDs(), ", "))
			}
			if e.builtin[r.Builtin] != nil {
				return nil, fail("builtin", "another rule already sets %q", r.Builtin)
			}
			e.builtin[r.Builtin] = c
			forms++
		}
		for _, root := range r.CwdRoots {
			if !filepath.IsAbs(root) {
				return nil, fail("cwd_roots", "%q: use an absolute path", root)
			}
			c.roots = append(c.roots, filepath.Clean(root))
		}
		if len(r.CwdRoots) > 0 || len(r.EnvKeys) > 0 {
			e.requestR = append(e.requestR, c)
			forms++
		}
		if len(r.EnvKeys) > 0 {
			e.envR = append(e.envR, c)
		}
		if forms == 0 {
			return nil, fail("", "a rule needs at least one of executables, prefix, builtin, cwd_roots or env_keys")
		}
		e.rules = append(e.rules, c)
	}
	for _, c := range e.rules {
		for _, ex := range c.MustMatch {
			if !e.ruleMatchesExample(c, ex) {
				return nil, &RuleError{Index: c.index, ID: c.ID, Field: "must_match", Msg: fmt.Sprintf("the example %q does not match this rule", ex)}
			}
		}
		for _, ex := range c.MustNotMatch {
			if e.ruleMatchesExample(c, ex) {
				return nil, &RuleError{Index: c.index, ID: c.ID, Field: "must_not_match", Msg: fmt.Sprintf("the example %q matches this rule", ex)}
			}
		}
	}
	return e, nil
}

// BuiltinIDs lists the ids a rule's Builtin may name.
func BuiltinIDs() []string {
	var ids []string
	for _, r := range safety.Rules {
		ids = append(ids, r.ID)
	}
	return append(ids, RuleParseError, RuleDynamicCommand, RuleNestedScript, RuleDynamicArgument)
}

// Profile returns the engine's profile.
func (e *Engine) Profile() Profile { return e.profile }

func (e *Engine) ruleMatchesExample(c *compiled, example string) bool {
	rep := safety.Analyze(example, nil)
	if c.Builtin != "" {
		switch c.Builtin {
		case RuleParseError:
			return rep.ParseError != nil
		case RuleDynamicCommand, RuleNestedScript, RuleDynamicArgument:
			for _, u := range rep.Unanalysable {
				if u.Kind == c.Builtin {
					return true
				}
			}
		}
		for _, f := range rep.Findings {
			if f.Rule == c.Builtin {
				return true
			}
		}
	}
	for i := range rep.Commands {
		if e.matchCommand(c, &rep.Commands[i], "") {
			return true
		}
		for _, k := range c.EnvKeys {
			if slices.Contains(rep.Commands[i].Assigns, k) {
				return true
			}
		}
	}
	return false
}

// matchCommand reports whether rule c matches command cmd.
func (e *Engine) matchCommand(c *compiled, cmd *safety.Command, tool string) bool {
	if len(c.Tools) > 0 && tool != "" && !slices.Contains(c.Tools, tool) {
		return false
	}
	if cmd.Dynamic || len(cmd.Args) == 0 {
		return false
	}
	prog := cmd.Args[0].Value
	for _, x := range c.Executables {
		if x == cmd.Name || (filepath.IsAbs(x) && filepath.Clean(x) == filepath.Clean(prog)) {
			return true
		}
	}
	if len(c.prefix) > 0 && len(cmd.Args) >= len(c.prefix) && path.Base(c.prefix[0]) == cmd.Name {
		for i := 1; i < len(c.prefix); i++ {
			if cmd.Args[i].Dynamic || cmd.Args[i].Value != c.prefix[i] {
				return false
			}
		}
		return true
	}
	return false
}

func (c *compiled) decision(fallbackReason string) Decision {
	d := Decision{Verdict: c.Action, Rule: c.ID, Reason: c.Reason, Alternative: c.Alternative}
	if d.Reason == "" {
		d.Reason = fallbackReason
	}
	return d
}

// Check decides on r: a shell command is read by the safety checker, an
// argv (Executable and Args) is unwrapped the same way.
func (e *Engine) Check(r Request) Decision {
	var rep *safety.Report
	switch {
	case r.Command != "":
		rep = safety.Analyze(r.Command, nil)
	case r.Executable != "":
		rep = safety.AnalyzeArgv(append([]string{r.Executable}, r.Args...), nil)
	default:
		rep = &safety.Report{}
	}
	return e.Decide(r, rep)
}

// Decide is Check with the safety report already made.
func (e *Engine) Decide(r Request, rep *safety.Report) Decision {
	best := Allowed
	consider := func(d Decision) {
		// The strictest wins; among equals, one that names its rule.
		if d.Verdict > best.Verdict || (d.Verdict == best.Verdict && best.Rule == "" && d.Rule != "") {
			best = d
		}
	}
	if rep.ParseError != nil {
		d := Decision{Verdict: Deny, Rule: RuleParseError, Reason: rep.ParseError.Error(),
			Alternative: "Fix the script's syntax", Text: seedParseMessage}
		if e.profile != Open || e.builtin[RuleParseError] != nil {
			consider(e.override(RuleParseError, d))
		}
		return e.request(r, best)
	}
	for _, f := range rep.Findings {
		d := Decision{Verdict: Deny, Rule: f.Rule, Reason: f.Reason, Alternative: f.Alternative, Text: f.Message}
		if f.Ask {
			// Rules that ask (git-discard-work): a person decides.
			d.Verdict, d.Text = Ask, ""
		}
		if e.profile != Open || e.builtin[f.Rule] != nil {
			consider(e.override(f.Rule, d))
		}
	}
	for _, u := range rep.Unanalysable {
		d := Decision{Verdict: Ask, Rule: u.Kind, Reason: u.Detail,
			Alternative: "Write the command with literal program names and scripts, or ask the user to allow it"}
		if u.Kind == RuleDynamicArgument {
			d.Alternative = "Write the path literally, or ask the user to allow it"
		}
		if e.profile != Open || e.builtin[u.Kind] != nil {
			consider(e.override(u.Kind, d))
		}
	}
	for i := range rep.Commands {
		consider(e.command(r, &rep.Commands[i]))
	}
	return e.request(r, best)
}

// override applies a configured rule that names a built-in id.
func (e *Engine) override(id string, d Decision) Decision {
	c := e.builtin[id]
	if c == nil {
		return d
	}
	d.Verdict, d.Rule = c.Action, c.ID
	if c.Reason != "" {
		d.Reason, d.Text = c.Reason, ""
	}
	if c.Alternative != "" {
		d.Alternative, d.Text = c.Alternative, ""
	}
	return d
}

// command decides on one command: the strictest configured rule that
// matches it, or the profile's default.
func (e *Engine) command(r Request, cmd *safety.Command) Decision {
	best, matched := Allowed, false
	if !cmd.Dynamic && len(cmd.Args) > 0 {
		cands := e.byName[cmd.Name]
		if filepath.IsAbs(cmd.Args[0].Value) {
			cands = append(cands[:len(cands):len(cands)], e.byPath[filepath.Clean(cmd.Args[0].Value)]...)
		}
		for _, c := range cands {
			if e.matchCommand(c, cmd, r.Tool) {
				d := c.decision(fmt.Sprintf("%s matches rule %s", cmd.Name, c.ID))
				if !matched || d.Verdict > best.Verdict {
					best = d
				}
				matched = true
			}
		}
	}
	for _, c := range e.envR {
		for _, k := range c.EnvKeys {
			if slices.Contains(cmd.Assigns, k) && (len(c.Tools) == 0 || slices.Contains(c.Tools, r.Tool)) {
				if d := c.decision(fmt.Sprintf("the command sets %s", k)); !matched || d.Verdict > best.Verdict {
					best = d
				}
				matched = true
			}
		}
	}
	if matched || e.profile != Strict || cmd.Dynamic || len(cmd.Args) == 0 {
		return best
	}
	if readOnly(cmd) {
		return Allowed
	}
	return Decision{Verdict: Ask, Rule: RuleStrict, Reason: fmt.Sprintf("%s is not on the strict profile's list of read-only commands", cmd.Name),
		Alternative: "Use a read-only command, or ask the user to allow this one"}
}

// request applies the rules on the request as a whole: working directory
// and env keys.
func (e *Engine) request(r Request, best Decision) Decision {
	cwd := ""
	if r.Cwd != "" {
		cwd = filepath.Clean(r.Cwd)
	}
	for _, c := range e.requestR {
		if len(c.Tools) > 0 && !slices.Contains(c.Tools, r.Tool) {
			continue
		}
		hit := ""
		for i, root := range c.roots {
			if cwd != "" && within(root, cwd) {
				hit = "the working directory is inside " + c.CwdRoots[i]
			}
		}
		for _, k := range c.EnvKeys {
			if slices.Contains(r.EnvKeys, k) {
				hit = "the call passes " + k
			}
		}
		if hit != "" {
			if d := c.decision(hit); d.Verdict > best.Verdict || (best.Rule == "" && d.Verdict == Allow) {
				best = d
			}
		}
	}
	if e.profile != Open {
		for _, k := range r.EnvKeys {
			if slices.Contains(safety.LoaderVars, k) {
				info, _ := safety.RuleByID(safety.RuleLoaderEnv)
				d := e.override(safety.RuleLoaderEnv, Decision{Verdict: Deny, Rule: info.ID, Reason: info.Reason, Alternative: info.Alternative, Text: info.Message})
				if d.Verdict > best.Verdict {
					best = d
				}
			}
		}
	}
	return best
}

func within(root, p string) bool {
	return root == "/" || p == root || strings.HasPrefix(p, root+"/")
}
