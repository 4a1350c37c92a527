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
	RuleGitDiscardWork = "git-discard-work"
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
	// Ask is set for rules whose findings ask a person rather than refuse
	// (in the guarded profile).
	Ask bool `json:"ask,omitempty"`
}

// Rules are the built-in rules, in the order they are applied.
var Rules = []RuleInfo{
	{ID: RuleGitAddBlind, Reason: "blind git add commands (git add -A, git add ., git add --all, git add *) are not allowed",
		Alternative: "specify files explicitly", Message: seedGitAddMessage},
	{ID: RuleGitPushForce, Reason: "git push --force is not allowed",
		Alternative: "Use --force-with-lease for safer force pushes, or push without force", Message: seedGitPushMessage},
	{ID: RuleRmCritical, Reason: "this rm command could delete critical data (.git, home directory, or root)",
		Alternative: "Specify the full path explicitly (no wildcards, ~, or $HOME)", Message: seedRmMessage},
	{ID: RuleGitHooksWrite, Reason: "writing into .git/hooks installs code that git runs on later commands",
		Alternative: "Show the user the hook you want and let them install it"},
	{ID: RuleAuthorizedKeys, Reason: "writing to ~/.ssh/authorized_keys grants someone login access to this machine",
		Alternative: "Ask the user to add the key themselves"},
	{ID: RuleGitHooksPath, Reason: "setting core.hooksPath, or another git setting that runs a program (core.fsmonitor, core.sshCommand, alias.X=!..., include.path, a template's hooks), makes git run code on later commands",
		Alternative: "Leave git's hooks and program settings to the user"},
	{ID: RulePipeToShell, Reason: "piping a download into a shell runs code nobody has read",
		Alternative: "Download the script to a file, read it, then run the file"},
	{ID: RuleDecodeToShell, Reason: "decoding data and piping it into a shell runs code nobody has read",
		Alternative: "Decode to a file, read it, then run the file if it is safe"},
	{ID: RuleLoaderEnv, Reason: "setting loader or hook variables (LD_PRELOAD, BASH_ENV, GIT_SSH_COMMAND, ...) injects code into other programs",
		Alternative: "Run the command without that variable"},
	{ID: RuleGitDiscardWork, Reason: "this command throws away work that is not committed (or a branch, a stash, a remote branch) and cannot be undone",
		Alternative: "Commit or stash first (git stash push), or name the files", Ask: true},
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

// LoaderVars are the variables RuleLoaderEnv looks for (see also
// LoaderVar, which reads the value where it decides).
var LoaderVars = []string{
	"LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "DYLD_LIBRARY_PATH",
	"BASH_ENV", "ENV", "PROMPT_COMMAND", "PS4",
	"GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXEC_PATH", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_EXTERNAL_DIFF", "GIT_CONFIG_PARAMETERS",
	"GIT_CONFIG_COUNT", "GIT_CONFIG", "GIT_TEMPLATE_DIR",
	"PERL5OPT", "PYTHONSTARTUP", "NODE_OPTIONS", "RUBYOPT",
	"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "GCONV_PATH",
}

// loaderPrefixes are families of loader variables.
var loaderPrefixes = []string{"BASH_FUNC_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"}

// nodeLoadFlags are node options that load code.
var nodeLoadFlags = []string{"-r", "--require", "--import", "--loader", "--experimental-loader", "--experimental-specifier-resolution"}

// LoaderVar reports whether setting name to value injects code into the
// programs that inherit it. value is nil when unknown (then every loader
// variable counts). A library path inside the workspace (relative, not
// climbing out) and node options that load no code are ordinary.
func LoaderVar(name string, value *string) bool {
	for _, p := range loaderPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	if !contains(LoaderVars, name) && name != "PYTHONPATH" && name != "PERL5LIB" {
		return false
	}
	if value == nil {
		return true
	}
	v := *value
	switch name {
	case "NODE_OPTIONS":
		for _, f := range strings.Fields(v) {
			for _, l := range nodeLoadFlags {
				if f == l || strings.HasPrefix(f, l+"=") || len(l) == 2 && strings.HasPrefix(f, l) {
					return true
				}
			}
		}
		return false
	case "LD_LIBRARY_PATH", "PYTHONPATH", "PERL5LIB", "DYLD_LIBRARY_PATH":
		if v == "" {
			return false
		}
		for _, d := range strings.Split(v, ":") {
			if d == "" || strings.HasPrefix(d, "/") || strings.HasPrefix(d, "~") || strings.Contains(d, "$") {
				return true
			}
			if c := path.Clean(d); c == ".." || strings.HasPrefix(c, "../") {
				return true
			}
		}
		return false
	}
	return true
}

func (a *analyzer) report(rule string, cmd int) { a.reportWith(rule, cmd, "", "") }

// reportWith reports a finding with its own reason or alternative ("" for
// the rule's).
func (a *analyzer) reportWith(rule string, cmd int, reason, alt string) {
	if !a.opts.enabled(rule) {
		return
	}
	for _, f := range a.rep.Findings {
		if f.Rule == rule && f.Command == cmd {
			return
		}
	}
	r, _ := RuleByID(rule)
	f := Finding{Rule: rule, Message: r.Message, Reason: r.Reason, Alternative: r.Alternative, Command: cmd, Ask: r.Ask}
	if reason != "" {
		f.Reason = reason
	}
	if alt != "" {
		f.Alternative = alt
	}
	if reason != "" || alt != "" {
		f.Message = messagePrefix + f.Reason + ". " + f.Alternative
	}
	a.rep.Findings = append(a.rep.Findings, f)
}

// ownValue reads a path variable's value that only adds to what it
// inherits (LD_LIBRARY_PATH=./lib:$LD_LIBRARY_PATH): the inherited part is
// not set by the command, the rest is returned (nil when other parts are
// dynamic too).
func ownValue(name, raw string) *string {
	v := strings.NewReplacer(`"`, "", `'`, "").Replace(raw)
	for _, ref := range []string{"${" + name + ":+:$" + name + "}", "${" + name + ":+:${" + name + "}}", "${" + name + "}", "$" + name} {
		v = strings.ReplaceAll(v, ref, "")
	}
	v = strings.Trim(strings.ReplaceAll(v, "::", ":"), ":")
	if strings.ContainsAny(v, "$`") {
		return nil
	}
	return &v
}

// libraryPathVar: variables that only say where to find libraries.
func libraryPathVar(name string) bool {
	return name == "LD_LIBRARY_PATH" || name == "PYTHONPATH" || name == "PERL5LIB" || name == "DYLD_LIBRARY_PATH"
}

// reportAsk reports a finding that asks, whatever its rule does.
func (a *analyzer) reportAsk(rule string, cmd int, reason, alt string) {
	n := len(a.rep.Findings)
	a.reportWith(rule, cmd, reason, alt)
	if len(a.rep.Findings) > n {
		a.rep.Findings[n].Ask = true
	}
}

// dynamicArg reports a critical command whose target is only known at
// run time: the policy asks.
func (a *analyzer) dynamicArg(cmd int, what string) {
	a.unanalysable("dynamic-argument", what, a.rep.Commands[cmd].Pos)
}

// readOnlyNames are programs that only read the paths they are given.
var readOnlyNames = map[string]bool{
	"cat": true, "less": true, "more": true, "head": true, "tail": true, "ls": true, "stat": true, "file": true, "wc": true,
	"grep": true, "egrep": true, "fgrep": true, "rg": true, "ag": true, "diff": true, "cmp": true, "md5sum": true,
	"sha1sum": true, "sha256sum": true, "sha512sum": true, "readlink": true, "realpath": true, "test": true, "[": true,
	"echo": true, "printf": true, "bat": true, "tree": true, "du": true, "find": true, "basename": true, "dirname": true,
	"od": true, "hexdump": true, "strings": true, "nl": true, "cd": true, "pushd": true, "git": true, "vimdiff": false,
	"shellcheck": true, "bash": true, "sh": true, "source": true, ".": true, "zsh": true, "dash": true, "python3": true, "python": true,
	"export": true, "declare": true, "local": true, "readonly": true, "typeset": true, "unset": true, "type": true, "command": true, "which": true,
}

func (a *analyzer) applyRules() {
	// Rules may read more code (a git alias's definition): the loops run
	// until the commands it adds are checked too.
	for i := 0; i < len(a.rep.Commands); i++ {
		c := &a.rep.Commands[i]
		a.cwd, a.links = a.infos[i].cwd, a.infos[i].links
		for k, v := range c.Assigns {
			var val *string
			if k < len(c.assignVals) && !c.assignVals[k].Dynamic {
				val = &c.assignVals[k].Value
			} else if k < len(c.assignVals) {
				val = ownValue(v, c.assignVals[k].Raw)
			}
			if LoaderVar(v, val) {
				if val != nil && libraryPathVar(v) {
					// a library path outside the workspace: a person decides
					a.reportAsk(RuleLoaderEnv, i, v+" loads libraries or modules from "+*val+", outside the workspace",
						"Build the libraries inside the workspace and point "+v+" there, or ask the user")
				} else {
					a.report(RuleLoaderEnv, i)
				}
			}
		}
		if c.Dynamic || len(c.Args) == 0 {
			continue
		}
		switch c.Name {
		case "git":
			a.git(i, c)
		case "rm":
			a.rm(i, c)
		case "find":
			a.findDelete(i, c)
		case "rsync":
			a.rsyncDelete(i, c)
		case "chmod", "chown", "chgrp", "setfacl":
			a.chmodR(i, c)
		case "ssh-copy-id":
			a.report(RuleAuthorizedKeys, i)
		}
		if !readOnlyNames[c.Name] {
			a.writes(i, c)
		}
		if shells[c.Name] || c.Name == "eval" || c.Name == "source" || c.Name == "." {
			// bash -c "$(curl ...)", eval "$(base64 -d ...)": a downloaded
			// or decoded script run directly.
			for _, p := range a.infos[i].substCmds {
				if downloader(&a.rep.Commands[p]) {
					a.report(RulePipeToShell, i)
				} else if decoder(&a.rep.Commands[p]) {
					a.report(RuleDecodeToShell, i)
				}
			}
		}
		if runsScriptArg(c) {
			a.scriptFrom(i, c, a.infos[i].procSubstCmds, false, false)
		}
		if a.infos[i].stdinScript && c.stdin != nil && !c.stdin.file {
			a.scriptFrom(i, c, c.stdin.cmds, c.stdin.net, true)
		}
	}
	for _, i := range a.enableF {
		if i < len(a.rep.Commands) {
			a.reportWith(RuleLoaderEnv, i, "enable -f loads a shared object into the shell", "Run the command without loading builtins")
		}
	}
	for k := 0; k < len(a.redirects); k++ {
		r := a.redirects[k]
		a.cwd, a.links = r.cwd, r.links
		switch r.r.Op {
		case ">", ">>", ">|", "&>", "&>>", "<>":
			a.writeTarget(r.cmd, r.r.Target, true)
		}
	}
	a.pipelinesRules()
}

// scriptFrom applies the download and decode rules to a shell or
// interpreter whose script comes from cmds (a process substitution, a
// here-string's substitution, a redirection), or from the network; a
// shell whose script comes from anything else unknown is unanalysable.
func (a *analyzer) scriptFrom(i int, c *Command, cmds []int, net, stdin bool) {
	if net {
		a.report(RulePipeToShell, i)
		return
	}
	known := false
	for _, p := range cmds {
		switch {
		case downloader(&a.rep.Commands[p]) || a.netInput(p):
			a.report(RulePipeToShell, i)
			known = true
		case decoder(&a.rep.Commands[p]):
			a.report(RuleDecodeToShell, i)
			known = true
		}
	}
	if known || len(cmds) == 0 {
		if !known && stdin && !c.stdin.static && shells[c.Name] {
			a.unanalysable("nested-script", c.Name+" reads a script only known at run time", c.Pos)
		}
		return
	}
	if shells[c.Name] || c.Name == "source" || c.Name == "." {
		a.unanalysable("nested-script", c.Name+" runs a script another command writes at run time", c.Pos)
	}
}

// gnuScan reads a GNU tool's arguments: options anywhere before "--",
// long options by unambiguous prefix of longs (all its long options).
type gnuTool struct {
	shortArg string
	longs    []string // all long options
	longArg  []string // those that take a value
}

type gnuArgs struct {
	short    map[byte]string
	long     map[string]string
	operands []Word
	dynamic  bool // a dynamic word where an option could stand
}

func (t *gnuTool) parse(args []Word) gnuArgs {
	r := gnuArgs{short: map[byte]string{}, long: map[string]string{}}
	opts := true
	for i := 0; i < len(args); i++ {
		w := args[i]
		v := w.Value
		switch {
		case w.Dynamic:
			if opts && strings.HasPrefix(strings.TrimLeft(w.Raw, `"'`), "-") {
				r.dynamic = true
			}
			r.operands = append(r.operands, w)
		case opts && v == "--":
			opts = false
		case opts && strings.HasPrefix(v, "--"):
			name, val, hasVal := strings.Cut(v[2:], "=")
			name = t.resolve(name)
			if !hasVal && contains(t.longArg, name) && i+1 < len(args) {
				i++
				val = args[i].Value
			}
			r.long[name] = val
		case opts && len(v) > 1 && v[0] == '-':
			for j := 1; j < len(v); j++ {
				l := v[j]
				if strings.IndexByte(t.shortArg, l) >= 0 {
					val := v[j+1:]
					if val == "" && i+1 < len(args) {
						i++
						val = args[i].Value
					}
					r.short[l] = val
					break
				}
				r.short[l] = ""
			}
		default:
			r.operands = append(r.operands, w)
		}
	}
	return r
}

// resolve returns the long option name abbreviates, or name itself when
// it abbreviates none or several.
func (t *gnuTool) resolve(name string) string {
	if contains(t.longs, name) {
		return name
	}
	found := ""
	for _, l := range t.longs {
		if strings.HasPrefix(l, name) {
			if found != "" {
				return name
			}
			found = l
		}
	}
	if found == "" {
		return name
	}
	return found
}

func (g *gnuArgs) has(short byte, longs ...string) bool {
	if short != 0 {
		if _, ok := g.short[short]; ok {
			return true
		}
	}
	for _, l := range longs {
		if _, ok := g.long[l]; ok {
			return true
		}
	}
	return false
}

var rmTool = gnuTool{longs: []string{"force", "interactive", "one-file-system", "no-preserve-root", "preserve-root", "recursive", "dir", "verbose", "help", "version"}}

// rm: recursive removal of a critical path (seed 001, and the classes
// around it).
func (a *analyzer) rm(i int, c *Command) {
	g := rmTool.parse(c.Args[1:])
	recursive := g.has('r', "recursive") || g.has('R') || g.has(0, "no-preserve-root")
	if !recursive && !g.dynamic {
		return
	}
	a.removal(i, g.operands, true, "rm", !recursive)
}

// removal checks what a destructive command aims at: critical targets are
// reported; dynamic ones ask unless their literal tail names something
// ordinary. maybe: the command may not be recursive (a dynamic option).
func (a *analyzer) removal(i int, targets []Word, seedHome bool, what string, maybe bool) {
	for _, t := range targets {
		if t.Dynamic {
			if !ordinaryTail(t.Raw) {
				a.dynamicArg(i, what+" of "+t.Raw+", a path only known at run time")
			}
			continue
		}
		if maybe {
			continue
		}
		if c := path.Clean(t.Value); !strings.Contains(c, "/") && criticalName(c) && seedHome {
			// seed 001: rm -rf * wherever it runs
			a.report(RuleRmCritical, i)
			continue
		}
		if critical(a.resolve(t.Value), seedHome) {
			a.report(RuleRmCritical, i)
		}
	}
}

// ordinaryTail reports whether a dynamic path ends in a literal name that
// is not critical ("$dir/build").
func ordinaryTail(raw string) bool {
	r := strings.NewReplacer(`"`, "", `'`, "").Replace(raw)
	r = strings.TrimRight(r, "/")
	i := strings.LastIndexByte(r, '/')
	if i < 0 {
		return false
	}
	tail := r[i+1:]
	return tail != "" && !strings.ContainsAny(tail, "$`(){}") && !criticalName(tail) && tail != "." && tail != ".." && !hasGlob(tail)
}

// selective find tests narrow what -delete removes.
var findSelective = map[string]bool{"-name": true, "-iname": true, "-path": true, "-ipath": true, "-wholename": true, "-iwholename": true,
	"-regex": true, "-iregex": true, "-newer": true, "-mtime": true, "-mmin": true, "-atime": true, "-amin": true, "-ctime": true, "-cmin": true,
	"-size": true, "-empty": true, "-perm": true, "-user": true, "-group": true, "-inum": true, "-samefile": true, "-links": true, "-lname": true, "-ilname": true, "-newermt": true}

// findDelete: find ROOT -delete without a selective test removes
// everything under ROOT.
func (a *analyzer) findDelete(i int, c *Command) {
	del, selective := false, false
	var roots []Word
	inRoots := true
	for _, w := range c.Args[1:] {
		v := w.Value
		if inRoots && !w.Dynamic && (strings.HasPrefix(v, "-") || v == "(" || v == "!") {
			inRoots = false
		}
		if inRoots {
			if !(v == "-H" || v == "-L" || v == "-P") {
				roots = append(roots, w)
			}
			continue
		}
		if v == "-delete" {
			del = true
		}
		if (v == "rm" || strings.HasSuffix(v, "/rm")) && !w.Dynamic {
			del = true // -exec rm -r {} removes what -delete would
		}
		if findSelective[v] || w.Dynamic {
			selective = true
		}
	}
	if !del {
		return
	}
	if len(roots) == 0 {
		roots = []Word{{Value: ".", Raw: "."}}
	}
	if selective {
		for _, r := range roots {
			if !r.Dynamic && critical(a.resolve(r.Value), false) && a.resolve(r.Value).root != "." && a.resolve(r.Value).root != "" {
				a.reportWith(RuleRmCritical, i, "find -delete under the home directory or / could delete critical data", "Name the directory you mean, not "+r.Value)
			}
		}
		return
	}
	for _, r := range roots {
		if r.Dynamic {
			a.dynamicArg(i, "find "+r.Raw+" -delete, a directory only known at run time")
			continue
		}
		if critical(a.resolve(r.Value), false) {
			a.reportWith(RuleRmCritical, i, "find "+r.Value+" -delete could delete critical data (the workspace, home directory, .git or root)", "Add a test such as -name, or name the directory to delete")
		}
	}
}

// homeWide reports whether p is the root, a top-level directory, the home
// directory or above it, or a protected directory in it.
func homeWide(p symPath) bool {
	switch p.root {
	case "/":
		return p.rel == "." || !strings.Contains(p.rel, "/")
	case "~":
		first, _, _ := strings.Cut(p.rel, "/")
		return climbs(p.rel) || strings.HasPrefix(p.rel, "../") || protectedHome[first] || matchesAll(p.rel)
	}
	return false
}

var rsyncTool = gnuTool{shortArg: "efTBM", longArg: []string{"rsh", "rsync-path", "filter", "exclude", "include", "exclude-from", "include-from", "files-from", "temp-dir", "compare-dest", "copy-dest", "link-dest", "backup-dir", "suffix", "chmod", "chown", "usermap", "groupmap", "timeout", "contimeout", "port", "log-file", "log-file-format", "password-file", "out-format", "bwlimit", "partial-dir", "max-delete", "max-size", "min-size", "block-size", "checksum-choice", "compress-choice", "compress-level", "skip-compress", "info", "debug", "modify-window", "iconv", "remote-option", "sockopts", "protocol", "write-batch", "only-write-batch", "read-batch", "stop-after", "stop-at", "outbuf"},
	longs: []string{"delete", "delete-before", "delete-during", "delete-delay", "delete-after", "delete-excluded", "delete-missing-args", "del", "remove-source-files", "dry-run"}}

// rsyncDelete: rsync --delete into the home directory or / deletes
// everything there the source does not hold.
func (a *analyzer) rsyncDelete(i int, c *Command) {
	g := rsyncTool.parse(c.Args[1:])
	del := false
	for k := range g.long {
		if strings.HasPrefix(k, "del") {
			del = true
		}
	}
	if !del || g.has('n', "dry-run") || len(g.operands) < 2 {
		return
	}
	dest := g.operands[len(g.operands)-1]
	if dest.Dynamic {
		if !ordinaryTail(dest.Raw) {
			a.dynamicArg(i, "rsync --delete into "+dest.Raw+", a directory only known at run time")
		}
		return
	}
	if p := a.resolve(dest.Value); homeWide(p) || p.root == "." && climbs(p.rel) {
		a.reportWith(RuleRmCritical, i, "rsync --delete into "+dest.Value+" deletes everything there that the source does not hold", "Sync into a directory of its own")
	}
}

// chmodR: chmod/chown -R over the home directory or / breaks it.
func (a *analyzer) chmodR(i int, c *Command) {
	g := (&gnuTool{longs: []string{"recursive", "reference", "changes", "silent", "quiet", "verbose", "from", "dereference", "no-dereference", "preserve-root", "no-preserve-root"}}).parse(c.Args[1:])
	if !g.has('R', "recursive") {
		return
	}
	ops := g.operands
	if _, ref := g.long["reference"]; !ref && len(ops) > 0 {
		ops = ops[1:] // the mode or owner
	}
	for _, t := range ops {
		if !t.Dynamic && homeWide(a.resolve(t.Value)) {
			a.reportWith(RuleRmCritical, i, c.Name+" -R over "+t.Value+" changes every file of the home directory or the system", "Name the directory you mean")
		}
	}
}

// writes checks the paths a program that may write is given: into git
// hooks, ~/.ssh/authorized_keys, git's configuration, the loader's
// preload list.
func (a *analyzer) writes(i int, c *Command) {
	extract := c.Name == "tar" || c.Name == "bsdtar" || c.Name == "unzip" || c.Name == "cpio" || c.Name == "rsync" || c.Name == "7z" || c.Name == "unsquashfs"
	keyCopy := false
	if c.Name == "cp" || c.Name == "mv" || c.Name == "install" || c.Name == "ln" || c.Name == "rsync" || c.Name == "scp" {
		for _, w := range c.Args[1:] {
			if strings.HasPrefix(path.Base(w.Value), "authorized_keys") {
				keyCopy = true
			}
		}
	}
	for _, w := range c.Args[1:] {
		if w.Dynamic {
			a.writeTarget(i, w, false)
			continue
		}
		v := w.Value
		if !a.pathSensitive(v) {
			continue
		}
		a.pathWrite(i, a.resolve(v), extract || keyCopy, true)
		if _, after, ok := strings.Cut(v, "="); ok {
			a.pathWrite(i, a.resolve(after), extract || keyCopy, true) // of=FILE, --output=FILE
		}
		if len(v) > 2 && v[0] == '-' && v[1] != '-' {
			a.pathWrite(i, a.resolve(v[2:]), extract || keyCopy, true) // -oFILE
		}
	}
}

// pathSensitive reports whether v could name a path pathWrite cares
// about (a quick test before resolving it).
func (a *analyzer) pathSensitive(v string) bool {
	if len(a.links) > 0 || strings.ContainsAny(v, "*?[") || a.cwd != "." && (strings.ContainsAny(a.cwd, "*?[") || sensitiveText(a.cwd)) {
		return true
	}
	if a.cwd == "" && gitHookNames[v] {
		return true
	}
	return sensitiveText(v)
}

func sensitiveText(v string) bool {
	for _, s := range []string{"git", "hook", "ssh", "auth", "ld.so", "config"} {
		if strings.Contains(v, s) {
			return true
		}
	}
	return false
}

// writeTarget checks a path something writes to.
func (a *analyzer) writeTarget(cmd int, w Word, redirect bool) {
	if w.Dynamic {
		t := strings.NewReplacer(`"`, "", `'`, "").Replace(w.Raw)
		t = strings.TrimRight(t, "/")
		if strings.Contains(t+"/", ".git/hooks/") {
			a.report(RuleGitHooksWrite, cmd)
		}
		if base := path.Base(t); strings.HasPrefix(base, "authorized_keys") && strings.Contains(t, ".ssh") {
			a.report(RuleAuthorizedKeys, cmd)
		}
		return
	}
	a.pathWrite(cmd, a.resolve(w.Value), false, redirect)
}

// pathWrite reports a write to p; dirs: the program may write files into
// p when p is a directory (cp -t, tar -C).
func (a *analyzer) pathWrite(cmd int, p symPath, dirs bool, file bool) {
	s := p.String()
	parts := strings.Split(s, "/")
	for k := 0; k+1 < len(parts); k++ {
		if matchName(parts[k], ".git") && matchName(parts[k+1], "hooks") && (k+2 < len(parts) || file || dirs) {
			a.report(RuleGitHooksWrite, cmd)
		}
	}
	n := len(parts)
	if p.root == "" && !strings.Contains(p.rel, "/") && file {
		// a directory the checker lost track of (cd in a branch, cd "$D"):
		// a hook's or authorized_keys' own name is enough
		if gitHookNames[p.rel] {
			a.report(RuleGitHooksWrite, cmd)
		}
		if strings.HasPrefix(p.rel, "authorized_keys") {
			a.report(RuleAuthorizedKeys, cmd)
		}
	}
	if n >= 2 && matchName(parts[n-2], ".ssh") && (strings.HasPrefix(parts[n-1], "authorized_keys") || matchName(parts[n-1], "authorized_keys")) {
		a.report(RuleAuthorizedKeys, cmd)
	}
	if dirs && n >= 1 && matchName(parts[n-1], ".ssh") {
		a.report(RuleAuthorizedKeys, cmd)
	}
	if n >= 2 && matchName(parts[n-2], ".git") && matchName(parts[n-1], "config") || s == "~/.gitconfig" || s == "~/.config/git/config" {
		a.reportWith(RuleGitHooksPath, cmd, "writing git's configuration file directly can set hooks, aliases and programs git runs later", "Use git config for ordinary settings, or ask the user")
	}
	if s == "/etc/ld.so.preload" {
		a.reportWith(RuleLoaderEnv, cmd, "writing /etc/ld.so.preload injects a library into every program", "Do not preload libraries system-wide")
	}
}

// gitHookNames are the hooks git runs.
var gitHookNames = map[string]bool{"applypatch-msg": true, "pre-applypatch": true, "post-applypatch": true, "pre-commit": true,
	"pre-merge-commit": true, "prepare-commit-msg": true, "commit-msg": true, "post-commit": true, "pre-rebase": true,
	"post-checkout": true, "post-merge": true, "pre-push": true, "pre-receive": true, "update": false, "proc-receive": true,
	"post-receive": true, "post-update": true, "reference-transaction": true, "push-to-checkout": true, "pre-auto-gc": true,
	"post-rewrite": true, "sendemail-validate": true, "fsmonitor-watchman": true, "post-index-change": true}

// matchName reports whether a path element, possibly a glob, can name
// name.
func matchName(elem, name string) bool {
	if elem == name {
		return true
	}
	if !hasGlob(elem) {
		return false
	}
	return globMatch(elem, name)
}

// gitGlobal is git's grammar before the subcommand.
var gitGlobal = optGrammar{shortArg: "Cc", longArg: []string{"git-dir", "work-tree", "namespace", "super-prefix", "config-env", "list-cmds", "exec-path"}}

// gitConfigPairs returns the key=value settings of git's -c options, in
// order (a later one hides an earlier one, so every one is looked at).
func gitConfigPairs(args []Word) (pairs [][2]string, rest []Word, dyn bool) {
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.Dynamic {
			return pairs, args[i:], true
		}
		v := w.Value
		switch {
		case v == "-c" && i+1 < len(args):
			i++
			if args[i].Dynamic {
				dyn = true
				continue
			}
			k, val, _ := strings.Cut(args[i].Value, "=")
			pairs = append(pairs, [2]string{k, val})
		case strings.HasPrefix(v, "-c") && len(v) > 2:
			k, val, _ := strings.Cut(v[2:], "=")
			pairs = append(pairs, [2]string{k, val})
		case strings.HasPrefix(v, "--config-env"):
			kv := strings.TrimPrefix(strings.TrimPrefix(v, "--config-env"), "=")
			if kv == "" && i+1 < len(args) {
				i++
				kv = args[i].Value
			}
			k, _, _ := strings.Cut(kv, "=")
			pairs = append(pairs, [2]string{k, "\x00env"})
		case strings.HasPrefix(v, "--exec-path="):
			pairs = append(pairs, [2]string{"\x00exec-path", v})
		case v == "-C" || v == "--git-dir" || v == "--work-tree" || v == "--namespace" || v == "--super-prefix" || v == "--list-cmds":
			i++
		case strings.HasPrefix(v, "-"):
		default:
			return pairs, args[i:], dyn
		}
	}
	return pairs, nil, dyn
}

// codeKeys are git settings whose value is a program git runs (the
// settings that only hold the name of a built-in mode are excluded by
// value in gitSetting).
var codeKeys = []string{"core.hookspath", "core.fsmonitor", "core.sshcommand", "core.pager", "core.editor", "core.askpass",
	"core.gitproxy", "core.alternaterefscommand", "sequence.editor", "diff.external", "include.path", "uploadpack.packobjectshook",
	"gpg.program", "credential.helper", "pager.", "alias.", "filter.", "merge.", "diff.", "includeif.", "gpg.", "remote.", "url.",
	"protocol.ext.allow", "core.worktree", "init.templatedir", "sendemail.", "difftool.", "mergetool.", "instaweb.", "web.browser", "browser.", "man."}

// gitSetting applies the rules to one git setting: code-running settings
// and the push settings that force.
func (a *analyzer) gitSetting(i int, key, value string) {
	k := strings.ToLower(key)
	switch {
	case k == "\x00exec-path":
		a.reportWith(RuleGitHooksPath, i, "git --exec-path makes git run its commands from another directory", "")
	case strings.HasPrefix(k, "alias."):
		if value == "\x00env" {
			a.dynamicArg(i, "a git alias whose definition is only known at run time")
			return
		}
		if body, ok := strings.CutPrefix(value, "!"); ok {
			a.script(body, a.rep.Commands[i].Depth+1, append(clip(a.rep.Commands[i].Wrappers), "git alias"), a.rep.Commands[i].Pos)
		} else {
			a.script("git "+value, a.rep.Commands[i].Depth+1, append(clip(a.rep.Commands[i].Wrappers), "git alias"), a.rep.Commands[i].Pos)
		}
	case strings.HasPrefix(k, "remote.") && strings.HasSuffix(k, ".mirror"):
		if value != "false" && value != "no" && value != "0" && value != "off" {
			a.reportWith(RuleGitPushForce, i, "remote.<name>.mirror makes every later git push a forced mirror", "")
		}
	case strings.HasPrefix(k, "remote.") && strings.HasSuffix(k, ".push"):
		if strings.HasPrefix(value, "+") || value == "\x00env" {
			a.reportWith(RuleGitPushForce, i, "a remote.<name>.push refspec starting with + makes every later git push forced", "")
		}
	case k == "push.default" || strings.HasPrefix(k, "remote.") || strings.HasPrefix(k, "url.") || strings.HasPrefix(k, "man.") && !strings.HasSuffix(k, ".cmd") && !strings.HasSuffix(k, ".path"):
	case k == "core.fsmonitor" && (value == "true" || value == "false" || value == ""):
	case k == "credential.helper" && !strings.HasPrefix(value, "!") && !strings.Contains(value, "/"):
	case strings.HasPrefix(k, "diff.") && !strings.HasSuffix(k, ".textconv") && !strings.HasSuffix(k, ".command") && k != "diff.external":
	case strings.HasPrefix(k, "gpg.") && !strings.HasSuffix(k, ".program"):
	case strings.HasPrefix(k, "merge.") && !strings.HasSuffix(k, ".driver"):
	case strings.HasPrefix(k, "filter.") && !(strings.HasSuffix(k, ".clean") || strings.HasSuffix(k, ".smudge") || strings.HasSuffix(k, ".process")):
	case (strings.HasPrefix(k, "difftool.") || strings.HasPrefix(k, "mergetool.")) && !strings.HasSuffix(k, ".cmd") && !strings.HasSuffix(k, ".path"):
	case strings.HasPrefix(k, "pager.") && (value == "false" || value == "true" || value == ""):
	case k == "core.pager" && (value == "cat" || value == "less" || value == "" || value == "less -R" || value == "more"):
	case k == "core.editor" && (value == "true" || value == "vim" || value == "vi" || value == "nano" || value == "cat" || value == ":"):
	case k == "sequence.editor" && (value == "true" || value == ":" || value == "cat"):
	case strings.HasPrefix(k, "sendemail.") && !strings.HasSuffix(k, "cmd"):
	case k == "protocol.ext.allow" && value != "always" && value != "user":
	case k == "core.worktree" || k == "init.templatedir" && false:
	default:
		for _, ck := range codeKeys {
			if k == ck || strings.HasSuffix(ck, ".") && strings.HasPrefix(k, ck) {
				a.report(RuleGitHooksPath, i)
				return
			}
		}
	}
}

// gitPushTool is git push's option grammar.
var gitPushTool = gnuTool{shortArg: "o", longArg: []string{"push-option", "receive-pack", "exec", "repo", "signed"},
	longs: []string{"all", "branches", "mirror", "delete", "tags", "dry-run", "porcelain", "force", "force-with-lease", "force-if-includes",
		"repo", "set-upstream", "thin", "no-thin", "receive-pack", "exec", "push-option", "ipv4", "ipv6", "verify", "no-verify",
		"follow-tags", "no-follow-tags", "signed", "no-signed", "atomic", "no-atomic", "quiet", "verbose", "progress", "prune",
		"recurse-submodules", "no-recurse-submodules", "no-force-with-lease", "no-force-if-includes"}}

func (a *analyzer) git(i int, c *Command) {
	pairs, rest, dyn := gitConfigPairs(c.Args[1:])
	for _, p := range pairs {
		a.gitSetting(i, p[0], p[1])
	}
	if dyn {
		a.dynamicArg(i, "git -c with a setting only known at run time")
	}
	if dyn || len(rest) == 0 || rest[0].Dynamic {
		return
	}
	sub, args := rest[0].Value, rest[1:]
	switch sub {
	case "add":
		if blindAdd(args) {
			a.report(RuleGitAddBlind, i)
		}
	case "push", "send-pack":
		g := gitPushTool.parse(args)
		force := g.has('f')
		for k := range g.long {
			// an abbreviation of --force that git may take (or refuse as
			// ambiguous), and --mirror
			if k == "force" || k == "mirror" || len(k) >= 1 && strings.HasPrefix("force", k) || len(k) >= 2 && strings.HasPrefix("mirror", k) {
				force = true
			}
		}
		for _, w := range g.operands {
			if !w.Dynamic && strings.HasPrefix(w.Value, "+") && len(w.Value) > 1 {
				force = true
			}
		}
		if force {
			a.report(RuleGitPushForce, i)
		}
		del := g.has('d', "delete")
		for k := range g.long {
			if len(k) >= 3 && strings.HasPrefix("delete", k) {
				del = true
			}
		}
		for _, w := range g.operands {
			if !w.Dynamic && strings.HasPrefix(w.Value, ":") && len(w.Value) > 1 {
				del = true
			}
		}
		if del && sub == "push" {
			a.reportWith(RuleGitDiscardWork, i, "deleting a remote branch throws away work others may not have", "Ask the user to delete the remote branch")
		}
	case "config":
		a.gitConfig(i, args)
	case "init", "clone":
		for k, w := range args {
			if !w.Dynamic && (strings.HasPrefix(w.Value, "--template") || w.Value == "--separate-git-dir") && k >= 0 {
				if strings.HasPrefix(w.Value, "--template") {
					a.reportWith(RuleGitHooksPath, i, "git "+sub+" --template copies the template's hooks into the repository", "Create the repository without a template")
				}
			}
			if !w.Dynamic && w.Value == "-c" && k+1 < len(args) {
				kk, vv, _ := strings.Cut(args[k+1].Value, "=")
				a.gitSetting(i, kk, vv)
			}
			if !w.Dynamic && strings.HasPrefix(w.Value, "--config=") {
				kk, vv, _ := strings.Cut(strings.TrimPrefix(w.Value, "--config="), "=")
				a.gitSetting(i, kk, vv)
			}
		}
	default:
		a.gitDiscard(i, sub, args)
	}
}

// gitConfig applies the rules to what git config sets.
func (a *analyzer) gitConfig(i int, args []Word) {
	var ops []Word
	for k := 0; k < len(args); k++ {
		w := args[k]
		if w.Dynamic {
			ops = append(ops, w)
			continue
		}
		v := w.Value
		switch v {
		case "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--unset", "--unset-all", "get", "unset", "list",
			"--remove-section", "--rename-section", "remove-section", "rename-section", "--edit", "-e", "edit", "--get-color", "--get-colorbool":
			return
		case "-f", "--file", "--blob", "--type", "--default", "--comment", "--value":
			k++
			continue
		case "set", "--add", "--replace-all":
			continue
		}
		if strings.HasPrefix(v, "-") {
			continue
		}
		ops = append(ops, w)
	}
	if len(ops) < 2 {
		return
	}
	if ops[0].Dynamic {
		a.dynamicArg(i, "git config of a setting only known at run time")
		return
	}
	val := ops[1].Value
	if ops[1].Dynamic {
		val = "\x00env"
	}
	a.gitSetting(i, ops[0].Value, val)
}

// wholeTree reports whether a pathspec names the whole working tree.
func (a *analyzer) wholeTree(w Word) bool {
	if w.Dynamic {
		return false
	}
	v := w.Value
	if v == ":/" || v == ":" || v == ":(top)" || strings.HasPrefix(v, ":/") && path.Clean(v[2:]) == "." ||
		strings.HasPrefix(v, ":(top)") && (v[6:] == "" || v[6:] == "." || v[6:] == "*") {
		return true
	}
	clean := path.Clean(v)
	if clean == "*" || clean == ".*" || matchesAll(clean) {
		return true
	}
	p := a.resolve(v)
	return p.root == "." && climbs(p.rel) || p.root == "" && p.rel == "."
}

// gitDiscard: the git commands that throw away uncommitted work or
// unmerged history.
func (a *analyzer) gitDiscard(i int, sub string, args []Word) {
	switch sub {
	case "reset", "clean", "checkout", "restore", "rm", "stash", "branch", "switch", "worktree", "reflog", "gc", "prune":
	default:
		return
	}
	flags := map[string]bool{}
	var ops []Word
	afterDash := false
	for _, w := range args {
		v := w.Value
		switch {
		case w.Dynamic:
			ops = append(ops, w)
		case afterDash:
			ops = append(ops, w)
		case v == "--":
			afterDash = true
		case strings.HasPrefix(v, "--"):
			name, _, _ := strings.Cut(v[2:], "=")
			flags["--"+name] = true
			flags["="+v[2:]] = true
		case strings.HasPrefix(v, "-") && len(v) > 1:
			for _, l := range v[1:] {
				flags["-"+string(l)] = true
			}
		default:
			ops = append(ops, w)
		}
	}
	long := func(full string, min int) bool {
		for f := range flags {
			if n, ok := strings.CutPrefix(f, "--"); ok && len(n) >= min && strings.HasPrefix(full, n) {
				return true
			}
		}
		return false
	}
	whole := false
	for _, w := range ops {
		if a.wholeTree(w) {
			whole = true
		}
	}
	discard := func(reason, alt string) { a.reportWith(RuleGitDiscardWork, i, reason, alt) }
	switch sub {
	case "reset":
		if long("hard", 2) || long("merge", 3) && false {
			discard("git reset --hard throws away every uncommitted change", "Commit or stash first (git stash push), or name the files to restore with git restore FILE")
		}
	case "clean":
		if (flags["-f"] || long("force", 2)) && !flags["-n"] && !long("dry-run", 2) {
			discard("git clean -f deletes untracked files, which git cannot bring back", "Run git clean -n to see what it would delete, then delete those files by name")
		}
	case "checkout":
		if flags["-f"] || long("force", 2) {
			discard("git checkout --force throws away uncommitted changes", "Commit or stash first (git stash push)")
		} else if whole && !flags["-p"] && !long("patch", 2) {
			discard("git checkout of the whole tree throws away every uncommitted change", "Commit or stash first (git stash push), or name the files")
		}
	case "restore":
		staged := flags["-S"] || long("staged", 2)
		worktree := flags["-W"] || long("worktree", 2)
		if whole && (!staged || worktree) && !flags["-p"] && !long("patch", 2) {
			discard("git restore of the whole tree throws away every uncommitted change", "Commit or stash first (git stash push), or name the files")
		}
	case "rm":
		if whole && !long("cached", 2) && (flags["-r"] || flags["-f"] || long("force", 2)) && !flags["-n"] && !long("dry-run", 2) {
			discard("git rm of the whole tree deletes every tracked file", "Name the files to remove")
		}
	case "stash":
		if len(ops) > 0 && !ops[0].Dynamic && (ops[0].Value == "drop" || ops[0].Value == "clear") {
			discard("git stash "+ops[0].Value+" deletes stashed work for good", "Leave the stash, or apply it first (git stash apply)")
		}
	case "branch":
		if flags["-D"] || (flags["-d"] || long("delete", 3)) && (flags["-f"] || long("force", 2)) {
			discard("git branch -D deletes a branch even when its commits are merged nowhere", "Use git branch -d, which refuses unmerged branches, or merge first")
		}
	case "switch":
		if flags["-f"] || long("force", 2) || long("discard-changes", 2) {
			discard("git switch --discard-changes throws away uncommitted changes", "Commit or stash first (git stash push)")
		}
	case "worktree":
		if len(ops) > 0 && ops[0].Value == "remove" && (flags["-f"] || long("force", 2)) {
			discard("git worktree remove --force deletes a worktree with uncommitted changes", "Commit in that worktree first")
		}
	case "reflog":
		if len(ops) > 0 && (ops[0].Value == "expire" || ops[0].Value == "delete") {
			for f := range flags {
				if f == "=expire=now" || f == "=expire=all" || f == "=expire-unreachable=now" || f == "=expire-unreachable=all" {
					discard("expiring the reflog now removes the only way back to lost commits", "Leave the reflog to expire on its own")
				}
			}
		}
	case "gc", "prune":
		for f := range flags {
			if f == "=prune=now" || f == "=prune=all" || f == "=expire=now" {
				discard("pruning unreachable objects now removes the only copy of lost commits", "Run git gc without --prune=now")
			}
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
			name, _, _ := strings.Cut(v[2:], "=")
			if len(name) >= 2 && strings.HasPrefix("all", name) || len(name) >= 4 && strings.HasPrefix("no-ignore-removal", name) {
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
		if strings.HasPrefix(v, ":!") || strings.HasPrefix(v, ":^") || strings.HasPrefix(v, ":(exclude)") || strings.HasPrefix(v, ":(top,exclude)") {
			return true // everything but what it names
		}
		clean := path.Clean(v)
		if clean == "." || clean == "*" || clean == ".*" || matchesAll(clean) || v == ":/" || v == ":" || strings.HasPrefix(v, ":/") && path.Clean(v[2:]) == "." ||
			strings.HasPrefix(v, ":(top)") && (v[6:] == "" || v[6:] == "." || v[6:] == "*") {
			return true
		}
	}
	return false
}

// runsScriptArg reports whether c runs a program given as an argument
// file: a shell or interpreter, or source and ".".
func runsScriptArg(c *Command) bool {
	return shells[c.Name] || interpreters[c.Name] || c.Name == "source" || c.Name == "."
}

var downloaders = map[string]bool{"curl": true, "wget": true, "fetch": true, "aria2c": true, "http": true, "https": true, "lwp-request": true, "xh": true, "curlie": true}

// downloader reports whether c prints what it reads from the network.
func downloader(c *Command) bool {
	return !c.Dynamic && (downloaders[c.Name] || netTools[c.Name] || c.stdin != nil && c.stdin.net)
}

// decoders transform their input into other text whatever their options.
var decoders = map[string]bool{"uudecode": true, "rev": true, "tr": true, "zcat": true, "gzcat": true, "gunzip": true,
	"bzcat": true, "bunzip2": true, "xzcat": true, "unxz": true, "zstdcat": true, "unzstd": true, "lz4cat": true, "unlzma": true,
	"lzcat": true, "iconv": true, "recode": true, "perl": true, "ruby": true, "node": true, "php": true, "python": true,
	"python2": true, "python3": true, "awk": true, "gawk": true, "mawk": true, "sed": true, "jq": false}

// decoder reports whether c decodes or rewrites data: base64 -d, xxd -r,
// openssl -d, gzip -d, rev, tr, echo -e, printf with escapes, a script
// of perl or python printing text, ...
func decoder(c *Command) bool {
	if c.Dynamic || len(c.Args) == 0 {
		return false
	}
	has := func(short byte, longs ...string) bool {
		for _, w := range c.Args[1:] {
			v := w.Value
			if name, ok := strings.CutPrefix(v, "--"); ok {
				name, _, _ = strings.Cut(name, "=")
				for _, l := range longs {
					if len(name) >= 1 && strings.HasPrefix(l, name) {
						return true
					}
				}
				continue
			}
			if short != 0 && len(v) > 1 && v[0] == '-' && strings.IndexByte(v[1:], short) >= 0 {
				return true
			}
		}
		return false
	}
	switch c.Name {
	case "base64", "basenc", "base32":
		return has('d', "decode") || has('D')
	case "xxd":
		return has('r', "revert")
	case "openssl":
		for _, w := range c.Args[1:] {
			if w.Value == "-d" || w.Value == "-base64" || w.Value == "base64" || w.Value == "-a" || w.Value == "enc" {
				return true
			}
		}
	case "gzip", "bzip2", "xz", "zstd", "lz4", "brotli", "lzma", "compress", "uncompress":
		return has('d', "decompress", "uncompress") || c.Name == "uncompress"
	case "echo":
		return has('e') && strings.Contains(c.String(), `\`)
	case "printf":
		return len(c.Args) > 1 && decodingFormat(c.Args[1].Value)
	}
	return decoders[c.Name]
}

// decodingFormat reports whether a printf format decodes escapes into
// other characters (\x41, \101, \u0041, %b) rather than only ending lines.
func decodingFormat(f string) bool {
	if strings.Contains(f, "%b") {
		return true
	}
	for i := 0; i+1 < len(f); i++ {
		if f[i] == '\\' {
			switch n := f[i+1]; {
			case n == 'x' || n == 'u' || n == 'U' || n == 'e' || n == 'E' || n == 'c' || n >= '0' && n <= '7':
				return true
			}
			i++
		}
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
