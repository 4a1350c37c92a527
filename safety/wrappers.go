package safety

import (
	"path"
	"strings"
)

// optGrammar is how a program parses its options: which short letters and
// long names take an argument. Clusters (-abc), "--" and "--name=value"
// are understood; the first word that is not an option ends them.
type optGrammar struct {
	shortArg string   // letters whose option takes an argument
	longArg  []string // long names that take an argument (without "--")
	// digits: "-10" is an option (nice).
	digits bool
}

// skip returns the words after the options, the option letters and long
// names seen, and false when a dynamic word stands where an option could
// be (its meaning is unknown).
func (g optGrammar) skip(args []Word) (rest []Word, seen map[string]string, ok bool) {
	seen = map[string]string{}
	i := 0
	for i < len(args) {
		w := args[i]
		if w.Dynamic {
			return args[i:], seen, false
		}
		v := w.Value
		switch {
		case v == "--":
			return args[i+1:], seen, true
		case strings.HasPrefix(v, "--"):
			name, val, hasVal := strings.Cut(v[2:], "=")
			name = g.long(name)
			if !hasVal && contains(g.longArg, name) && i+1 < len(args) {
				val = args[i+1].Value
				i++
			}
			seen["--"+name] = val
			i++
		case len(v) > 1 && v[0] == '-':
			if g.digits && isDigits(v[1:]) {
				seen["-"+v[1:]] = ""
				i++
				continue
			}
			letters := v[1:]
			i++
			for j := 0; j < len(letters); j++ {
				l := letters[j : j+1]
				if strings.Contains(g.shortArg, l) {
					val := letters[j+1:]
					if val == "" && i < len(args) {
						val = args[i].Value
						i++
					}
					seen["-"+l] = val
					break
				}
				seen["-"+l] = ""
			}
		default:
			return args[i:], seen, true
		}
	}
	return nil, seen, true
}

// scan is skip for programs that take options anywhere (GNU getopt's
// permutation): it returns the operands, the options seen, and false when
// a dynamic word could be an option.
func (g optGrammar) scan(args []Word) (operands []Word, seen map[string]string, ok bool) {
	seen, ok = map[string]string{}, true
	for len(args) > 0 {
		rest, s, good := g.skip(args)
		for k, v := range s {
			seen[k] = v
		}
		if !good {
			ok = false
			if len(rest) > 0 {
				operands = append(operands, rest[0])
				args = rest[1:]
				continue
			}
		}
		if len(rest) > 0 && len(args) > len(rest) && args[len(args)-len(rest)-1].Value == "--" && !args[len(args)-len(rest)-1].Dynamic {
			return append(operands, rest...), seen, ok
		}
		if len(rest) == 0 {
			break
		}
		operands = append(operands, rest[0])
		args = rest[1:]
	}
	return operands, seen, ok
}

// long returns the long option that name stands for: itself, or the one
// option that takes a value it is an unambiguous prefix of (the tools
// accept abbreviations).
func (g optGrammar) long(name string) string {
	if name == "" || contains(g.longArg, name) {
		return name
	}
	found := ""
	for _, l := range g.longArg {
		if strings.HasPrefix(l, name) {
			if found != "" {
				return name
			}
			found = l
		}
	}
	if found != "" {
		return found
	}
	return name
}

// seenLong reports whether an option seen abbreviates full (at least min
// letters).
func seenLong(seen map[string]string, full string, min int) (string, bool) {
	for k, v := range seen {
		if n, ok := strings.CutPrefix(k, "--"); ok && len(n) >= min && strings.HasPrefix(full, n) {
			return v, true
		}
	}
	return "", false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Grammars of the wrappers that run another command.
var (
	sudoGrammar    = optGrammar{shortArg: "ughpCDRrtTU", longArg: []string{"user", "group", "host", "prompt", "close-from", "chdir", "chroot", "role", "type", "command-timeout", "other-user"}}
	doasGrammar    = optGrammar{shortArg: "uCa"}
	envGrammar     = optGrammar{shortArg: "uCSP", longArg: []string{"unset", "chdir", "split-string"}}
	commandGrammar = optGrammar{}
	execGrammar    = optGrammar{shortArg: "a"}
	niceGrammar    = optGrammar{shortArg: "n", longArg: []string{"adjustment"}, digits: true}
	timeoutGrammar = optGrammar{shortArg: "sk", longArg: []string{"signal", "kill-after"}}
	timeGrammar    = optGrammar{shortArg: "fo", longArg: []string{"format", "output"}}
	stdbufGrammar  = optGrammar{shortArg: "ioe", longArg: []string{"input", "output", "error"}}
	setsidGrammar  = optGrammar{}
	ioniceGrammar  = optGrammar{shortArg: "cnp", longArg: []string{"class", "classdata", "pid", "pgid", "uid"}}
	xargsGrammar   = optGrammar{shortArg: "adEILnPs", longArg: []string{"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var", "eof"}}
	shellGrammar   = optGrammar{shortArg: "oO", longArg: []string{"rcfile", "init-file"}}
	nohupGrammar   = optGrammar{}
	watchGrammar   = optGrammar{shortArg: "nq", longArg: []string{"interval", "equexit"}}
	flockGrammar   = optGrammar{shortArg: "wE", longArg: []string{"timeout", "wait", "conflict-exit-code"}}
	chrootGrammar  = optGrammar{longArg: []string{"userspec", "groups"}}
	suGrammar      = optGrammar{shortArg: "cgGswuC", longArg: []string{"command", "session-command", "group", "supp-group", "shell", "whitelist-environment", "user", "pty"}}
	scriptGrammar  = optGrammar{shortArg: "cEIOBTmo", longArg: []string{"command", "echo", "log-in", "log-out", "log-io", "log-timing", "logging-format", "output-limit"}}
	parallelArgs   = optGrammar{shortArg: "aAdEIjlLnNPsSx", longArg: []string{"arg-file", "delimiter", "colsep", "jobs", "max-args", "max-replace-args", "timeout", "delay", "joblog", "results", "tmpdir", "workdir", "sshlogin", "retries", "env", "halt", "memfree", "load", "tagstring", "tag-string", "nice", "basefile", "return", "transfer-file", "termseq", "rpl", "shebang-wrap", "max-line-length-allowed", "block", "header", "limit", "sshloginfile", "arg-sep", "arg-file-sep"}}
	screenGrammar  = optGrammar{shortArg: "ScehpTtX", longArg: []string{}}
	busyboxGrammar = optGrammar{}
)

// prefixWrapper is a program that runs the command after its options,
// after skip more operands, unless one of the flags in none is given.
type prefixWrapper struct {
	g    optGrammar
	skip int
	none []string
}

// prefixWrappers are the simple wrappers taken off beside those handled
// one by one in command.
var prefixWrappers = map[string]prefixWrapper{
	"chroot":           {g: chrootGrammar, skip: 1},
	"taskset":          {g: optGrammar{longArg: []string{}}, skip: 1, none: []string{"-p", "--pid"}},
	"chrt":             {g: optGrammar{shortArg: "TPD"}, skip: 1, none: []string{"-p", "--pid"}},
	"nsenter":          {g: optGrammar{shortArg: "tSGwWe", longArg: []string{"target", "setuid", "setgid", "wd", "env"}}},
	"unshare":          {g: optGrammar{shortArg: "SGRwl", longArg: []string{"propagation", "setgroups", "map-user", "map-group", "map-users", "map-groups", "setuid", "setgid", "root", "wd", "load-interp"}}},
	"systemd-run":      {g: optGrammar{shortArg: "upEMHS", longArg: []string{"unit", "property", "setenv", "uid", "gid", "nice", "working-directory", "slice", "description", "machine", "host", "service-type", "timer-property", "path-property", "socket-property", "on-active", "on-boot", "on-startup", "on-unit-active", "on-unit-inactive", "on-calendar", "on-timezone-change", "on-clock-change", "expand-environment"}}},
	"pkexec":           {g: optGrammar{longArg: []string{"user"}}},
	"fakeroot":         {g: optGrammar{shortArg: "lsib", longArg: []string{"lib", "faked"}}},
	"strace":           {g: optGrammar{shortArg: "abeEIoOpPsSuUX", longArg: []string{"output", "trace", "signal", "status", "env", "user", "string-limit", "summary-sort-by"}}, none: []string{"-p", "--attach"}},
	"ltrace":           {g: optGrammar{shortArg: "aelnopsuADFx", longArg: []string{"output", "indent", "library"}}, none: []string{"-p"}},
	"valgrind":         {g: optGrammar{}},
	"unbuffer":         {g: optGrammar{}},
	"xvfb-run":         {g: optGrammar{shortArg: "efnpsw", longArg: []string{"error-file", "auth-file", "server-num", "xauth-protocol", "server-args", "wait"}}},
	"dbus-run-session": {g: optGrammar{}},
	"catchsegv":        {g: optGrammar{}},
	"eatmydata":        {g: optGrammar{}},
	"nocache":          {g: optGrammar{}},
	"torsocks":         {g: optGrammar{shortArg: "uapP", longArg: []string{"user", "pass", "address", "port"}}},
	"proxychains":      {g: optGrammar{shortArg: "f"}},
	"proxychains4":     {g: optGrammar{shortArg: "f"}},
	"gosu":             {g: optGrammar{}, skip: 1},
	"su-exec":          {g: optGrammar{}, skip: 1},
	"setpriv":          {g: optGrammar{longArg: []string{"reuid", "regid", "ruid", "rgid", "euid", "egid", "groups", "inh-caps", "ambient-caps", "bounding-set", "securebits", "pdeathsig", "selinux-label", "apparmor-profile", "landlock-access", "landlock-rule"}}},
	"prlimit":          {g: optGrammar{}, none: []string{"-p", "--pid"}},
	"cgexec":           {g: optGrammar{shortArg: "g"}},
	"firejail":         {g: optGrammar{}},
	"caffeinate":       {g: optGrammar{shortArg: "tw"}},
	"chpst":            {g: optGrammar{shortArg: "ugUeB/nlLmdostcfpr"}},
	"runcon":           {g: optGrammar{shortArg: "turlt"}},
	"numactl":          {g: optGrammar{shortArg: "CNmiMcp", longArg: []string{"cpunodebind", "membind", "interleave", "physcpubind", "preferred", "localalloc"}}},
}

// Shells whose -c option runs a script given as an argument.
var shells = map[string]bool{"bash": true, "sh": true, "zsh": true, "dash": true, "ksh": true, "mksh": true, "ash": true, "busybox": false,
	"rbash": true, "yash": true, "posh": true, "csh": true, "tcsh": true, "ksh93": true, "pdksh": true, "oksh": true, "loksh": true}

// Interpreters that read a program from stdin when given none.
var interpreters = map[string]bool{"python": true, "python2": true, "python3": true, "perl": true, "ruby": true, "node": true, "php": true, "fish": true}

// maxWrappers bounds how many wrappers one command may have.
const maxWrappers = 32

// command records what args would run, taking wrappers off first.
func (a *analyzer) command(args []Word, base Command, stg stage) {
	base.Wrappers = clip(base.Wrappers)
	for n := 0; n < maxWrappers; n++ {
		if len(args) == 0 {
			return
		}
		if args[0].Dynamic {
			base.Args = args
			a.record(base, info{stage: stg})
			a.unanalysable("dynamic-command", "the program "+args[0].Raw+" is only known at run time", base.Pos)
			return
		}
		name := path.Base(args[0].Value)
		rest := args[1:]
		var ok bool
		var seen map[string]string
		switch name {
		case "sudo":
			rest, seen, ok = sudoGrammar.skip(rest)
			if _, edit := seen["-e"]; edit {
				ok = false // sudoedit: edits files, runs no command
			}
			if ok {
				rest = takeAssigns(rest, &base)
			}
		case "doas":
			rest, _, ok = doasGrammar.skip(rest)
		case "env":
			rest, seen, ok = envGrammar.skip(rest)
			if !ok {
				break
			}
			rest = takeEnvAssigns(rest, &base)
			split, hasSplit := seen["-S"]
			if s, has := seen["--split-string"]; has {
				split, hasSplit = s, true
			}
			if hasSplit {
				a.recordAssigns(args, base, stg)
				base.Wrappers = append(base.Wrappers, "env -S")
				a.script(split+" "+joinValues(rest), base.Depth+1, base.Wrappers, base.Pos)
				return
			}
		case "command":
			rest, seen, ok = commandGrammar.skip(rest)
			if _, v := seen["-v"]; v {
				ok = false // command -v only looks the name up
			}
			if _, v := seen["-V"]; v {
				ok = false
			}
		case "builtin", "nohup":
			rest, _, ok = nohupGrammar.skip(rest)
		case "exec":
			rest, _, ok = execGrammar.skip(rest)
		case "nice":
			rest, _, ok = niceGrammar.skip(rest)
		case "timeout":
			rest, _, ok = timeoutGrammar.skip(rest)
			if ok && len(rest) > 0 {
				rest = rest[1:] // the duration
			}
		case "time":
			rest, _, ok = timeGrammar.skip(rest)
		case "stdbuf":
			rest, _, ok = stdbufGrammar.skip(rest)
		case "setsid":
			rest, _, ok = setsidGrammar.skip(rest)
		case "ionice":
			rest, seen, ok = ioniceGrammar.skip(rest)
			if _, p := seen["-p"]; p {
				ok = false
			}
		case "xargs":
			rest, seen, ok = xargsGrammar.skip(rest)
			if ok && len(rest) == 0 {
				rest = []Word{{Value: "echo", Raw: "echo"}}
			}
			repl, hasRepl := seen["-I"]
			if r, has := seen["--replace"]; has {
				repl, hasRepl = r, true
				if repl == "" {
					repl = "{}"
				}
			}
			if _, has := seen["-i"]; has && !hasRepl {
				repl, hasRepl = "{}", true
			}
			if hasRepl && repl != "" {
				// what xargs puts in place of the replace-string is read
				// at run time
				rest = append([]Word(nil), rest...)
				for k, w := range rest {
					if !w.Dynamic && strings.Contains(w.Value, repl) {
						rest[k] = Word{Value: w.Raw, Raw: w.Raw, Dynamic: true}
					}
				}
			}
		case "find":
			a.find(args, base, stg)
			return
		case "eval":
			a.eval(args, base, stg)
			return
		case "watch":
			rest, seen, ok = watchGrammar.skip(rest)
			_, x1 := seen["-x"]
			_, x2 := seen["--exec"]
			if ok && len(rest) > 0 && !x1 && !x2 {
				a.scriptOfWords(args, rest, base, stg, "watch")
				return
			}
		case "flock":
			rest, _, ok = flockGrammar.skip(rest)
			if ok && len(rest) >= 2 {
				if c := rest[1].Value; !rest[1].Dynamic && (c == "-c" || c == "--command") {
					if len(rest) >= 3 {
						a.scriptOfWords(args, rest[2:3], base, stg, "flock -c")
					}
					return
				}
				rest = rest[1:]
			} else {
				ok = false
			}
		case "su", "runuser", "sg":
			_, seen, _ = suGrammar.scan(rest)
			cmd, has := seen["-c"]
			if c2, has2 := seen["--command"]; has2 {
				cmd, has = c2, true
			}
			if c3, has3 := seen["--session-command"]; has3 {
				cmd, has = c3, true
			}
			if name == "sg" && !has && ok && len(rest) >= 2 {
				a.scriptOfWords(args, rest[1:], base, stg, "sg")
				return
			}
			if has {
				a.scriptOfWords(args, []Word{a.optionWord(args, cmd)}, base, stg, name+" -c")
				return
			}
			_, user := seen["-u"]
			if name == "runuser" && user {
				rest, _, ok = suGrammar.skip(rest)
				break // runuser -u USER -- COMMAND...
			}
			ok = false
		case "script":
			_, seen, _ = scriptGrammar.skip(rest)
			cmd, has := seen["-c"]
			if c2, has2 := seen["--command"]; has2 {
				cmd, has = c2, true
			}
			if has {
				a.scriptOfWords(args, []Word{a.optionWord(args, cmd)}, base, stg, "script -c")
				return
			}
			ok = false
		case "tmux":
			if a.tmux(args, base, stg) {
				return
			}
			ok = false
		case "screen":
			rest, seen, ok = screenGrammar.skip(rest)
			if _, x := seen["-X"]; x {
				if v := seen["-X"]; v == "stuff" && len(rest) > 0 {
					a.scriptOfWords(args, rest[:1], base, stg, "screen -X stuff")
					return
				}
				ok = false
			}
		case "parallel":
			a.parallel(args, base, stg)
			return
		case "busybox":
			rest, _, ok = busyboxGrammar.skip(rest)
		default:
			if pw, isWrapper := prefixWrappers[name]; isWrapper {
				rest, seen, ok = pw.g.skip(rest)
				for _, f := range pw.none {
					if _, has := seen[f]; has {
						ok = false
					}
				}
				if ok && len(rest) > pw.skip {
					rest = rest[pw.skip:]
				} else {
					ok = false
				}
				break
			}
			if shells[name] && a.shell(args, base, stg) {
				return
			}
			rest = nil // not a wrapper: args is the command
		}
		if !ok && len(rest) > 0 && rest[0].Dynamic {
			// A dynamic word where an option or the command stands: what
			// runs is only known at run time.
			base.Wrappers = append(base.Wrappers, name)
			args = rest
			continue
		}
		if !ok || len(rest) == 0 {
			break
		}
		base.Wrappers = append(base.Wrappers, name)
		args = rest
	}
	base.Args = args
	in := info{stage: stg}
	if len(args) > 0 && !args[0].Dynamic {
		name := path.Base(args[0].Value)
		if interpreters[name] || shells[name] {
			in.stdinScript = readsStdin(args[1:])
		}
		if (name == "source" || name == ".") && len(args) > 1 && stdinPath(args[1]) {
			in.stdinScript = true
		}
		if runsScriptArg(&Command{Name: name}) {
			for _, w := range args[1:] {
				if !w.Dynamic && (strings.HasPrefix(w.Value, "/dev/fd/") || strings.HasPrefix(w.Value, "/proc/self/fd/")) && !stdinPath(w) {
					a.unanalysable("nested-script", name+" runs a script from "+w.Value+", only known at run time", base.Pos)
				}
			}
		}
		a.builtinCode(args, base, stg)
	}
	idx := a.record(base, in)
	c := &a.rep.Commands[idx]
	if in.stdinScript && c.stdin != nil && c.stdin.static && (shells[c.Name] || c.Name == "source" || c.Name == ".") {
		// bash <<'EOF' ... EOF, bash <<< 'script': the script is here.
		a.script(c.stdin.text, base.Depth+1, append(clip(base.Wrappers), c.Name+" <<"), base.Pos)
	}
	if c.Name == "ln" {
		a.symlink(c.Args[1:])
	}
}

// stdinPath reports whether w names standard input.
func stdinPath(w Word) bool {
	if w.Dynamic {
		return false
	}
	switch path.Clean(w.Value) {
	case "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-":
		return true
	}
	return false
}

// optionWord returns the Word an option's value came from, for the value
// v that optGrammar.skip saw.
func (a *analyzer) optionWord(args []Word, v string) Word {
	for i, w := range args {
		if w.Value == v && !w.Dynamic {
			return w
		}
		if w.Dynamic && i > 0 && args[i-1].Value == "-c" {
			return w
		}
	}
	for _, w := range args {
		if w.Dynamic {
			return w
		}
	}
	return Word{Value: v, Raw: quote(v)}
}

// scriptOfWords reads words a wrapper joins into a shell script (watch,
// su -c, script -c, tmux, flock -c): read when literal, unanalysable
// otherwise.
func (a *analyzer) scriptOfWords(args, words []Word, base Command, stg stage, wrapper string) {
	base.Wrappers = append(clip(base.Wrappers), wrapper)
	vals := make([]string, 0, len(words))
	for _, w := range words {
		if w.Dynamic {
			base.Args = args
			a.record(base, info{stage: stg})
			a.unanalysable("nested-script", "the script "+wrapper+" runs ("+w.Raw+") is only known at run time", base.Pos)
			return
		}
		vals = append(vals, w.Value)
	}
	a.recordAssigns(args, base, stg)
	a.script(strings.Join(vals, " "), base.Depth+1, base.Wrappers, base.Pos)
}

// tmuxArgs are, per tmux command, the option letters that take a value.
var tmuxArgs = map[string]string{
	"new-session": "cefFnstxy", "new": "cefFnstxy", "new-window": "ceFnt", "neww": "ceFnt",
	"split-window": "celpFt", "splitw": "celpFt", "respawn-pane": "cet", "respawnp": "cet",
	"respawn-window": "cet", "respawnw": "cet", "run-shell": "dct", "run": "dct",
	"display-popup": "bcdehsSTtwxy", "popup": "bcdehsSTtwxy", "send-keys": "Nt", "send": "Nt",
	"pipe-pane": "t", "pipep": "t", "if-shell": "t", "if": "t",
}

// tmux reads the shell commands of tmux new-session, new-window,
// split-window, respawn-*, run-shell, display-popup, pipe-pane and
// if-shell, and the keys send-keys types. It returns false when tmux runs
// no command.
func (a *analyzer) tmux(args []Word, base Command, stg stage) bool {
	rest, seen, ok := optGrammar{shortArg: "cfLST"}.skip(args[1:])
	if c, has := seen["-c"]; has {
		a.scriptOfWords(args, []Word{a.optionWord(args, c)}, base, stg, "tmux -c")
		return true
	}
	if !ok {
		return false
	}
	found := false
	for len(rest) > 0 {
		end := len(rest)
		for i, w := range rest {
			if !w.Dynamic && (w.Value == ";" || w.Value == `\;`) {
				end = i
				break
			}
		}
		cmd := rest[:end]
		if end < len(rest) {
			rest = rest[end+1:]
		} else {
			rest = nil
		}
		if len(cmd) == 0 || cmd[0].Dynamic {
			continue
		}
		letters, known := tmuxArgs[cmd[0].Value]
		if !known {
			continue
		}
		ops, _, ok := optGrammar{shortArg: letters}.skip(cmd[1:])
		if !ok || len(ops) == 0 {
			continue
		}
		found = true
		switch cmd[0].Value {
		case "send-keys", "send":
			var keys []string
			for _, k := range ops {
				switch {
				case k.Dynamic:
					a.scriptOfWords(args, []Word{k}, base, stg, "tmux send-keys")
					return true
				case k.Value == "Enter" || k.Value == "C-m" || k.Value == "KPEnter" || k.Value == "C-j":
					keys = append(keys, "\n")
				default:
					keys = append(keys, k.Value)
				}
			}
			a.scriptOfWords(args, []Word{{Value: strings.Join(keys, ""), Raw: "keys"}}, base, stg, "tmux send-keys")
		case "if-shell", "if":
			a.scriptOfWords(args, ops[:1], base, stg, "tmux if-shell")
		default:
			a.scriptOfWords(args, ops, base, stg, "tmux "+cmd[0].Value)
		}
	}
	return found
}

// parallel reads GNU parallel's command with each of its ::: arguments
// (parallel runs it through a shell).
func (a *analyzer) parallel(args []Word, base Command, stg stage) {
	rest, _, ok := parallelArgs.skip(args[1:])
	if !ok {
		a.command(rest, base, stg)
		return
	}
	var cmd []Word
	i := 0
	for i < len(rest) && !strings.HasPrefix(rest[i].Value, ":::") {
		cmd = append(cmd, rest[i])
		i++
	}
	var inputs []Word
	for ; i < len(rest); i++ {
		if !strings.HasPrefix(rest[i].Value, ":::") || rest[i].Dynamic {
			inputs = append(inputs, rest[i])
		}
	}
	if len(cmd) == 0 {
		for _, in := range inputs {
			a.scriptOfWords(args, []Word{in}, base, stg, "parallel")
		}
		return
	}
	if len(inputs) == 0 {
		a.scriptOfWords(args, cmd, base, stg, "parallel")
		return
	}
	for _, in := range inputs {
		words := make([]Word, 0, len(cmd)+1)
		replaced := false
		for _, w := range cmd {
			if !w.Dynamic && strings.Contains(w.Value, "{}") && !in.Dynamic {
				w.Value = strings.ReplaceAll(w.Value, "{}", in.Value)
				replaced = true
			}
			words = append(words, w)
		}
		if !replaced {
			words = append(words, in)
		}
		a.scriptOfWords(args, words, base, stg, "parallel")
	}
}

// takeAssigns moves leading NAME=value words into base.Assigns.
func takeAssigns(args []Word, base *Command) []Word {
	for len(args) > 0 && !args[0].Dynamic {
		name, _, ok := strings.Cut(args[0].Value, "=")
		if !ok || !validName(name) {
			break
		}
		base.Assigns = append(base.Assigns, name)
		base.assignVals = append(base.assignVals, Word{Value: args[0].Value[len(name)+1:], Raw: args[0].Raw})
		args = args[1:]
	}
	return args
}

// takeEnvAssigns is takeAssigns for env, which takes any NAME=value
// before the command, whatever NAME holds (BASH_FUNC_f%%=...).
func takeEnvAssigns(args []Word, base *Command) []Word {
	for len(args) > 0 && !args[0].Dynamic {
		name, val, ok := strings.Cut(args[0].Value, "=")
		if !ok || name == "" {
			break
		}
		base.Assigns = append(base.Assigns, name)
		base.assignVals = append(base.assignVals, Word{Value: val, Raw: args[0].Raw})
		args = args[1:]
	}
	return args
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func joinValues(ws []Word) string {
	vals := make([]string, len(ws))
	for i, w := range ws {
		vals[i] = quote(w.Value)
	}
	return strings.Join(vals, " ")
}

// readsStdin reports whether a shell or interpreter with these arguments
// takes its program from stdin: no operand, or "-", or -s.
func readsStdin(args []Word) bool {
	for _, w := range args {
		if w.Dynamic {
			return false
		}
		v := w.Value
		switch {
		case v == "-" || v == "-s" || stdinPath(w):
			return true
		case v == "--":
			continue
		case strings.HasPrefix(v, "-"):
			if strings.ContainsAny(v[1:], "ce") && !strings.HasPrefix(v, "--") {
				return false // -c / -e: the program is an argument
			}
			continue
		}
		return false // a script file
	}
	return true
}

// shell handles bash|sh|zsh|... -c SCRIPT: the script is read as nested
// source. It returns false when the shell runs no -c script (a script
// file, or stdin), so that the shell itself is recorded.
func (a *analyzer) shell(args []Word, base Command, stg stage) bool {
	rest, seen, ok := shellGrammar.skip(args[1:])
	hasC := false
	for k := range seen {
		if len(k) == 2 && k[1] == 'c' {
			hasC = true
		}
	}
	if !hasC {
		return false
	}
	base.Wrappers = append(base.Wrappers, path.Base(args[0].Value)+" -c")
	if !ok || len(rest) == 0 || rest[0].Dynamic {
		detail := "the script of " + args[0].Value + " -c is only known at run time"
		if len(rest) == 0 && ok {
			detail = args[0].Value + " -c has no script"
		}
		base.Args = args
		a.record(base, info{stage: stg})
		a.unanalysable("nested-script", detail, base.Pos)
		return true
	}
	a.recordAssigns(args, base, stg)
	a.script(rest[0].Value, base.Depth+1, base.Wrappers, base.Pos)
	return true
}

// recordAssigns records a wrapper that runs a nested script when
// variables are set for it (env LD_PRELOAD=x bash -c ...): they apply to
// the shell itself and to everything in the script.
func (a *analyzer) recordAssigns(args []Word, base Command, stg stage) {
	if len(base.Assigns) == 0 {
		return
	}
	c := base
	c.Args = args
	c.Wrappers = clip(base.Wrappers)
	if n := len(c.Wrappers); n > 0 {
		c.Wrappers = c.Wrappers[:n-1] // the shell itself is the command here
	}
	a.record(c, info{stage: stg})
}

// eval reads literal arguments as nested source.
func (a *analyzer) eval(args []Word, base Command, stg stage) {
	var parts []string
	for _, w := range args[1:] {
		if w.Dynamic {
			base.Args = args
			a.record(base, info{stage: stg})
			a.unanalysable("nested-script", "eval of "+w.Raw+", only known at run time", base.Pos)
			return
		}
		parts = append(parts, w.Value)
	}
	a.recordAssigns(args, base, stg)
	base.Wrappers = append(base.Wrappers, "eval")
	a.script(strings.Join(parts, " "), base.Depth+1, base.Wrappers, base.Pos)
}

// find records find itself and each command of its -exec, -execdir, -ok
// and -okdir actions.
func (a *analyzer) find(args []Word, base Command, stg stage) {
	findCmd := base
	findCmd.Args = args
	a.record(findCmd, info{stage: stg})
	for i := 1; i < len(args); i++ {
		flag := args[i].Value
		if flag != "-exec" && flag != "-execdir" && flag != "-ok" && flag != "-okdir" {
			continue
		}
		j := i + 1
		for j < len(args) && args[j].Value != ";" && args[j].Value != "+" {
			j++
		}
		if j > i+1 {
			sub := base
			sub.Wrappers = append(clip(base.Wrappers), "find "+flag)
			sub.Assigns, sub.Redirects = nil, nil
			a.command(args[i+1:j], sub, stage{})
		}
		i = j
	}
}
