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
func (g *optGrammar) skip(args []Word) (rest []Word, seen map[string]string, ok bool) {
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
	sudoGrammar    = optGrammar{shortArg: "ughpCDrtTU", longArg: []string{"user", "group", "host", "prompt", "close-from", "chdir", "role", "type", "command-timeout", "other-user"}}
	doasGrammar    = optGrammar{shortArg: "uC"}
	envGrammar     = optGrammar{shortArg: "uCSP", longArg: []string{"unset", "chdir", "split-string"}}
	commandGrammar = optGrammar{}
	execGrammar    = optGrammar{shortArg: "a"}
	niceGrammar    = optGrammar{shortArg: "n", longArg: []string{"adjustment"}, digits: true}
	timeoutGrammar = optGrammar{shortArg: "sk", longArg: []string{"signal", "kill-after"}}
	timeGrammar    = optGrammar{shortArg: "fo", longArg: []string{"format", "output"}}
	stdbufGrammar  = optGrammar{shortArg: "ioe", longArg: []string{"input", "output", "error"}}
	setsidGrammar  = optGrammar{}
	ioniceGrammar  = optGrammar{shortArg: "cnp", longArg: []string{"class", "classdata", "pid", "pgid", "uid"}}
	xargsGrammar   = optGrammar{shortArg: "adEILnPs", longArg: []string{"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"}}
	shellGrammar   = optGrammar{shortArg: "oO", longArg: []string{"rcfile", "init-file"}}
	nohupGrammar   = optGrammar{}
)

// Shells whose -c option runs a script given as an argument.
var shells = map[string]bool{"bash": true, "sh": true, "zsh": true, "dash": true, "ksh": true, "mksh": true, "ash": true, "busybox": false}

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
			rest = takeAssigns(rest, &base)
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
			rest, _, ok = xargsGrammar.skip(rest)
			if ok && len(rest) == 0 {
				rest = []Word{{Value: "echo", Raw: "echo"}}
			}
		case "find":
			a.find(args, base, stg)
			return
		case "eval":
			a.eval(args, base, stg)
			return
		default:
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
	}
	a.record(base, in)
}

// takeAssigns moves leading NAME=value words into base.Assigns.
func takeAssigns(args []Word, base *Command) []Word {
	for len(args) > 0 && !args[0].Dynamic {
		name, _, ok := strings.Cut(args[0].Value, "=")
		if !ok || !validName(name) {
			break
		}
		base.Assigns = append(base.Assigns, name)
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
		case v == "-" || v == "-s":
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
