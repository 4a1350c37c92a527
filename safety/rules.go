package safety

import (
	"path"
	"strings"
)

// Rule ids.
const (
	RuleGitAddBlind    = "git-add-blind"
	RuleGitPushForce   = "git-push-force"
	RuleRmCritical     = "rm-critical"
	RuleGitHooksWrite  = "git-hooks-write"
	RuleAuthorizedKeys = "ssh-authorized-keys-write"
	RuleGitHooksPath   = "git-hookspath"
	RulePipeToShell    = "pipe-to-shell"
	RuleDecodeToShell  = "decode-to-shell"
	RuleLoaderEnv      = "loader-env"
	messagePrefix      = "permission denied: "
	seedGitAddMessage  = "permission denied: blind git add commands (git add -A, git add ., git add --all, git add *) are not allowed, specify files explicitly"
	seedGitPushMessage = "permission denied: git push --force is not allowed. Use --force-with-lease for safer force pushes, or push without force"
	seedRmMessage      = "permission denied: this rm command could delete critical data (.git, home directory, or root). Specify the full path explicitly (no wildcards, ~, or $HOME)"
)

// RuleInfo describes a built-in rule.
type RuleInfo struct {
	ID          string `json:"id"`
	Reason      string `json:"reason"`
	Alternative string `json:"alternative"`
	// Message is the full refusal text.
	Message string `json:"message"`
}

// Rules are the built-in rules, in the order they are applied.
var Rules = []RuleInfo{
	{RuleGitAddBlind, "blind git add commands (git add -A, git add ., git add --all, git add *) are not allowed",
		"specify files explicitly", seedGitAddMessage},
	{RuleGitPushForce, "git push --force is not allowed",
		"Use --force-with-lease for safer force pushes, or push without force", seedGitPushMessage},
	{RuleRmCritical, "this rm command could delete critical data (.git, home directory, or root)",
		"Specify the full path explicitly (no wildcards, ~, or $HOME)", seedRmMessage},
	{RuleGitHooksWrite, "writing into .git/hooks installs code that git runs on later commands",
		"Show the user the hook you want and let them install it", ""},
	{RuleAuthorizedKeys, "writing to ~/.ssh/authorized_keys grants someone login access to this machine",
		"Ask the user to add the key themselves", ""},
	{RuleGitHooksPath, "setting core.hooksPath makes git run code from another directory on later commands",
		"Leave git's hooks configuration to the user", ""},
	{RulePipeToShell, "piping a download into a shell runs code nobody has read",
		"Download the script to a file, read it, then run the file", ""},
	{RuleDecodeToShell, "decoding data and piping it into a shell runs code nobody has read",
		"Decode to a file, read it, then run the file if it is safe", ""},
	{RuleLoaderEnv, "setting loader or hook variables (LD_PRELOAD, BASH_ENV, GIT_SSH_COMMAND, ...) injects code into other programs",
		"Run the command without that variable", ""},
}

func init() {
	for i := range Rules {
		if Rules[i].Message == "" {
			Rules[i].Message = messagePrefix + Rules[i].Reason + ". " + Rules[i].Alternative
		}
	}
}

// RuleByID returns the built-in rule with that id.
func RuleByID(id string) (RuleInfo, bool) {
	for _, r := range Rules {
		if r.ID == id {
			return r, true
		}
	}
	return RuleInfo{}, false
}

// LoaderVars are the variables RuleLoaderEnv looks for.
var LoaderVars = []string{
	"LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "DYLD_LIBRARY_PATH",
	"BASH_ENV", "ENV", "PROMPT_COMMAND", "PS4",
	"GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXEC_PATH", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_EXTERNAL_DIFF", "GIT_CONFIG_PARAMETERS",
	"PERL5OPT", "PYTHONSTARTUP", "NODE_OPTIONS", "RUBYOPT",
}

func (a *analyzer) report(rule string, cmd int) {
	if !a.opts.enabled(rule) {
		return
	}
	for _, f := range a.rep.Findings {
		if f.Rule == rule && f.Command == cmd {
			return
		}
	}
	r, _ := RuleByID(rule)
	a.rep.Findings = append(a.rep.Findings, Finding{Rule: rule, Message: r.Message, Reason: r.Reason, Alternative: r.Alternative, Command: cmd})
}

func (a *analyzer) applyRules() {
	for i := range a.rep.Commands {
		c := &a.rep.Commands[i]
		for _, v := range c.Assigns {
			if contains(LoaderVars, v) {
				a.report(RuleLoaderEnv, i)
			}
		}
		if c.Dynamic || len(c.Args) == 0 {
			continue
		}
		switch c.Name {
		case "git":
			a.git(i, c)
		case "rm":
			if rmCritical(c.Args[1:]) {
				a.report(RuleRmCritical, i)
			}
		case "tee":
			for _, w := range c.Args[1:] {
				if !strings.HasPrefix(w.Value, "-") {
					a.writeTarget(i, w)
				}
			}
		case "cp", "mv", "install", "ln":
			if last := c.Args[len(c.Args)-1]; len(c.Args) > 2 {
				a.writeTarget(i, last)
			}
		case "dd":
			for _, w := range c.Args[1:] {
				if t, ok := strings.CutPrefix(w.Value, "of="); ok {
					a.writeTarget(i, Word{Value: t, Raw: t, Dynamic: w.Dynamic})
				}
			}
		}
		if shells[c.Name] {
			// bash -c "$(curl ...)": a downloaded script run directly.
			for _, w := range c.Args[1:] {
				if w.Dynamic && mentionsDownloader(w.Raw) {
					a.report(RulePipeToShell, i)
				}
			}
		}
		if runsScriptArg(c) {
			for _, p := range a.infos[i].procSubstCmds {
				switch {
				case downloader(&a.rep.Commands[p]):
					a.report(RulePipeToShell, i)
				case decoder(&a.rep.Commands[p]):
					a.report(RuleDecodeToShell, i)
				}
			}
		}
	}
	for _, r := range a.redirects {
		switch r.r.Op {
		case ">", ">>", ">|", "&>", "&>>", "<>":
			a.writeTarget(r.cmd, r.r.Target)
		}
	}
	a.pipelinesRules()
}

// writeTarget checks a path something writes to.
func (a *analyzer) writeTarget(cmd int, w Word) {
	t := w.Value
	if w.Dynamic {
		t = strings.NewReplacer(`"`, "", `'`, "").Replace(w.Raw)
	}
	t = strings.TrimRight(t, "/")
	if strings.Contains(t+"/", ".git/hooks/") {
		a.report(RuleGitHooksWrite, cmd)
	}
	if base := path.Base(t); (base == "authorized_keys" || base == "authorized_keys2") && strings.Contains(t, ".ssh") {
		a.report(RuleAuthorizedKeys, cmd)
	}
}

// gitGlobal is git's grammar before the subcommand.
var gitGlobal = optGrammar{shortArg: "Cc", longArg: []string{"git-dir", "work-tree", "namespace", "super-prefix", "config-env", "list-cmds"}}

func (a *analyzer) git(i int, c *Command) {
	rest, seen, ok := gitGlobal.skip(c.Args[1:])
	for k, v := range seen {
		if (k == "-c" || k == "--config-env") && strings.HasPrefix(strings.ToLower(v), "core.hookspath=") {
			a.report(RuleGitHooksPath, i)
		}
	}
	if !ok || len(rest) == 0 || rest[0].Dynamic {
		return
	}
	sub, args := rest[0].Value, rest[1:]
	switch sub {
	case "add":
		if blindAdd(args) {
			a.report(RuleGitAddBlind, i)
		}
	case "push":
		if forcePush(args) {
			a.report(RuleGitPushForce, i)
		}
	case "config":
		if setsHooksPath(args) {
			a.report(RuleGitHooksPath, i)
		}
	}
}

func blindAdd(args []Word) bool {
	opts := true
	for _, w := range args {
		if w.Dynamic {
			continue
		}
		v := w.Value
		if opts && v == "--" {
			opts = false
			continue
		}
		if opts && strings.HasPrefix(v, "--") {
			if v == "--all" || v == "--no-ignore-removal" {
				return true
			}
			continue
		}
		if opts && strings.HasPrefix(v, "-") && len(v) > 1 {
			if strings.Contains(v[1:], "A") {
				return true
			}
			continue
		}
		clean := path.Clean(v)
		if clean == "." || clean == "*" || clean == ".*" || v == ":/" || v == ":" || strings.HasPrefix(v, ":/") && path.Clean(v[2:]) == "." ||
			strings.HasPrefix(v, ":(top)") && (v[6:] == "" || v[6:] == "." || v[6:] == "*") {
			return true
		}
	}
	return false
}

// pushArg are git push options that take a separate argument.
var pushArg = optGrammar{shortArg: "o", longArg: []string{"push-option", "receive-pack", "exec", "repo", "signed"}}

func forcePush(args []Word) bool {
	opts := true
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.Dynamic {
			continue
		}
		v := w.Value
		switch {
		case opts && v == "--":
			opts = false
		case opts && strings.HasPrefix(v, "--"):
			name, _, hasVal := strings.Cut(v[2:], "=")
			if name == "force" || name == "mirror" {
				return true
			}
			if !hasVal && contains(pushArg.longArg, name) {
				i++
			}
		case opts && strings.HasPrefix(v, "-") && len(v) > 1:
			for j := 1; j < len(v); j++ {
				if v[j] == 'f' {
					return true
				}
				if v[j] == 'o' {
					if j == len(v)-1 {
						i++
					}
					break
				}
			}
		case strings.HasPrefix(v, "+") && len(v) > 1:
			return true
		}
	}
	return false
}

func setsHooksPath(args []Word) bool {
	var operands []string
	for _, w := range args {
		v := w.Value
		switch v {
		case "--get", "--get-all", "--get-regexp", "--list", "-l", "--unset", "--unset-all", "get", "unset", "list":
			return false
		}
		if strings.HasPrefix(v, "-") {
			continue
		}
		operands = append(operands, v)
	}
	if len(operands) > 0 && operands[0] == "set" {
		operands = operands[1:]
	}
	return len(operands) >= 2 && strings.EqualFold(operands[0], "core.hooksPath")
}

// rmCritical reports whether rm with these arguments is recursive and aims
// at /, a top-level directory, the home directory, .git, or a wildcard of
// everything.
func rmCritical(args []Word) bool {
	recursive, noPreserve := false, false
	var targets []Word
	opts := true
	for _, w := range args {
		v := w.Value
		switch {
		case w.Dynamic:
			targets = append(targets, w)
		case opts && v == "--":
			opts = false
		case opts && strings.HasPrefix(v, "--"):
			switch v {
			case "--recursive":
				recursive = true
			case "--no-preserve-root":
				noPreserve = true
			}
		case opts && strings.HasPrefix(v, "-") && len(v) > 1:
			if strings.ContainsAny(v[1:], "rR") {
				recursive = true
			}
		default:
			targets = append(targets, w)
		}
	}
	if !recursive && !noPreserve {
		return false
	}
	for _, t := range targets {
		if criticalTarget(t) {
			return true
		}
	}
	return false
}

func criticalTarget(w Word) bool {
	v := w.Value
	if w.Dynamic {
		raw := strings.NewReplacer(`"`, "", `'`, "").Replace(w.Raw)
		for _, home := range []string{"${HOME}", "$HOME"} {
			if rest, ok := strings.CutPrefix(raw, home); ok {
				return everything(rest)
			}
		}
		return false
	}
	if v == "" {
		return false
	}
	if v[0] == '~' {
		rest := v[1:]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			rest = rest[i:]
		} else {
			rest = ""
		}
		return everything(rest)
	}
	clean := path.Clean(v)
	if path.Base(clean) == ".git" {
		return true
	}
	switch clean {
	case "/", "/*", "/.*", "*", ".*", ".", "..", "../*", "*/", "./*":
		return true
	}
	if strings.HasPrefix(clean, "/") {
		dir := clean
		if b := path.Base(dir); b == "*" || b == ".*" {
			dir = path.Dir(dir)
		}
		return strings.Count(dir, "/") == 1 // /usr, /etc, /home, /usr/*
	}
	return false
}

// everything reports whether rest, what follows a home directory, still
// means the whole of it (or its .git).
func everything(rest string) bool {
	if rest == "" {
		return true
	}
	clean := path.Clean(rest)
	switch clean {
	case "/", "/*", "/.*", "/.", ".":
		return true
	}
	return path.Base(clean) == ".git"
}

// runsScriptArg reports whether c runs a program given as an argument
// file: a shell or interpreter, or source and ".".
func runsScriptArg(c *Command) bool {
	return shells[c.Name] || interpreters[c.Name] || c.Name == "source" || c.Name == "."
}

var downloaders = map[string]bool{"curl": true, "wget": true, "fetch": true, "aria2c": true, "http": true, "https": true, "lwp-request": true}

func downloader(c *Command) bool { return !c.Dynamic && downloaders[c.Name] }

func mentionsDownloader(raw string) bool {
	for d := range downloaders {
		if strings.Contains(raw, d+" ") {
			return true
		}
	}
	return false
}

// decoder reports whether c decodes data: base64 -d, basenc -d, xxd -r,
// openssl ... -d, uudecode.
func decoder(c *Command) bool {
	if c.Dynamic {
		return false
	}
	has := func(flags ...string) bool {
		for _, w := range c.Args[1:] {
			for _, f := range flags {
				if w.Value == f || (len(f) == 2 && strings.HasPrefix(w.Value, "-") && !strings.HasPrefix(w.Value, "--") && strings.Contains(w.Value[1:], f[1:])) {
					return true
				}
			}
		}
		return false
	}
	switch c.Name {
	case "base64", "basenc", "base32":
		return has("-d", "--decode", "-D")
	case "xxd":
		return has("-r", "--revert")
	case "openssl":
		return has("-d", "-base64", "base64")
	case "uudecode":
		return true
	}
	return false
}

func (a *analyzer) pipelinesRules() {
	type stageCmds map[int][]int // stage index -> command indexes
	pipes := map[int]stageCmds{}
	for i, in := range a.infos {
		if in.stage.pipeline == 0 {
			continue
		}
		if pipes[in.stage.pipeline] == nil {
			pipes[in.stage.pipeline] = stageCmds{}
		}
		pipes[in.stage.pipeline][in.stage.index] = append(pipes[in.stage.pipeline][in.stage.index], i)
	}
	for _, stages := range pipes {
		download, decode := -1, -1
		last := 0
		for s := range stages {
			last = max(last, s)
		}
		for s := 0; s <= last; s++ {
			cmds := stages[s]
			for _, i := range cmds {
				if a.infos[i].stdinScript {
					if download >= 0 {
						a.report(RulePipeToShell, i)
					}
					if decode >= 0 {
						a.report(RuleDecodeToShell, i)
					}
				}
			}
			for _, i := range cmds {
				c := &a.rep.Commands[i]
				if downloader(c) {
					download = s
				}
				if decoder(c) {
					decode = s
				}
			}
		}
	}
}
