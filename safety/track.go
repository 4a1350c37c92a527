package safety

import (
	"io"
	"path"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// The checker follows what a script makes known before a command runs:
// variables given a literal value by a simple assignment, the working
// directory after a literal cd, and symbolic links made by ln -s. Every
// other way of setting a variable (read, printf -v, mapfile, getopts,
// arithmetic, ${x:=...}, a for loop, source) makes its value unknown, and
// a name reference or an assignment to a name only known at run time makes
// every variable unknown for the rest of the script. Assignments inside a
// branch, a loop, a function or a nested script make the variable unknown
// after it. An unknown value leaves the word dynamic.
//
// Paths are symbolic: "~" is the home directory, "." the directory the
// script starts in (the workspace), "/" the root.

// homeValue is what $HOME and ~ expand to.
const homeValue = "~"

// tracked is what the checker knows of one variable.
type tracked struct {
	known bool // false: set in a way whose value is unknown
	v     expand.Variable
}

// trackEnv is the expand.Environ the checker expands words with.
type trackEnv struct {
	a *analyzer
	// unknown is set when an expansion used a value the checker does not
	// know.
	unknown bool
	// commandPos: a command substitution that only asks where a program
	// lives ($(go env GOPATH)) may stand for its own text.
	commandPos bool
}

func (e *trackEnv) Get(name string) expand.Variable {
	a := e.a
	if t, ok := a.vars[name]; ok {
		if t.known {
			return t.v
		}
		e.unknown = true
		return expand.Variable{}
	}
	if a.taintAll && name != "IFS" {
		e.unknown = true
		return expand.Variable{}
	}
	switch name {
	case "HOME":
		return strVar(homeValue)
	case "PWD":
		if a.cwd != "" {
			return strVar(a.cwd)
		}
	case "IFS":
		return expand.Variable{}
	}
	if user, ok := strings.CutPrefix(name, "HOME "); ok {
		return strVar("~" + user)
	}
	e.unknown = true
	return expand.Variable{}
}

func (e *trackEnv) Each(func(string, expand.Variable) bool) {}

func strVar(s string) expand.Variable {
	return expand.Variable{Set: true, Kind: expand.String, Str: s}
}

// errUnknown stops an expansion that needs a value nobody knows.
type errUnknown struct{}

func (errUnknown) Error() string { return "value only known at run time" }

// cmdSubst gives the output of the few command substitutions whose
// output the checker knows: where git keeps its hooks and directory, the
// working directory. In a program's position, a substitution that only
// asks a tool where something lives stands for its own text.
func (a *analyzer) cmdSubst(w io.Writer, cs *syntax.CmdSubst) error {
	if len(cs.Stmts) != 1 {
		return errUnknown{}
	}
	call, ok := cs.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || len(cs.Stmts[0].Redirs) > 0 {
		return errUnknown{}
	}
	var argv []string
	for _, w := range call.Args {
		v, ok := plainValue(w)
		if !ok {
			return errUnknown{}
		}
		argv = append(argv, v)
	}
	if out, ok := a.knownOutput(argv); ok {
		_, err := io.WriteString(w, out)
		return err
	}
	if a.env.commandPos && (argv[0] == "which" || argv[0] == "command") && len(argv) >= 2 && !strings.HasPrefix(argv[len(argv)-1], "-") {
		_, err := io.WriteString(w, argv[len(argv)-1]) // the program it names
		return err
	}
	if a.env.commandPos && pathQuery(argv) {
		_, err := io.WriteString(w, "$("+strings.Join(argv, "-")+")")
		return err
	}
	return errUnknown{}
}

// knownOutput is the output of a command the checker can tell without
// running it.
func (a *analyzer) knownOutput(argv []string) (string, bool) {
	if len(argv) == 0 {
		return "", false
	}
	switch strings.Join(argv, " ") {
	case "pwd", "pwd -L", "pwd -P":
		return a.cwd, a.cwd != ""
	case "git rev-parse --show-toplevel":
		return ".", true
	case "git rev-parse --git-dir", "git rev-parse --absolute-git-dir", "git rev-parse --git-common-dir":
		return ".git", true
	}
	if len(argv) == 4 && argv[0] == "git" && argv[1] == "rev-parse" && argv[2] == "--git-path" {
		return path.Join(".git", argv[3]), true
	}
	if argv[0] == "mktemp" {
		return mktempPath(argv[1:]), true
	}
	return "", false
}

// mktempPath is a stand-in for the fresh name mktemp prints: a new file
// or directory in the directory it would use.
func mktempPath(args []string) string {
	dir := "/tmp"
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-p" || a == "--tmpdir":
			if i+1 < len(args) {
				dir = args[i+1]
				i++
			}
		case strings.HasPrefix(a, "--tmpdir="):
			dir = strings.TrimPrefix(a, "--tmpdir=")
		case strings.HasPrefix(a, "-p") && len(a) > 2:
			dir = a[2:]
		case !strings.HasPrefix(a, "-") && strings.Contains(a, "/"):
			dir = path.Dir(a)
		}
	}
	if dir == "" {
		dir = "/tmp"
	}
	return strings.TrimSuffix(dir, "/") + "/tmp.mktemp"
}

// pathQuery reports whether argv only prints where something lives.
func pathQuery(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	switch argv[0] {
	case "go":
		return len(argv) >= 2 && argv[1] == "env"
	case "npm", "pnpm", "yarn":
		return len(argv) >= 2 && (argv[1] == "bin" || argv[1] == "root" || argv[1] == "prefix" || argv[1] == "global" || strings.Join(argv[1:], " ") == "config get prefix")
	case "brew", "pyenv", "rbenv", "nodenv", "asdf":
		return len(argv) == 2 && (argv[1] == "--prefix" || argv[1] == "root" || argv[1] == "where")
	case "rustc":
		return strings.Join(argv[1:], " ") == "--print sysroot"
	case "git":
		return len(argv) >= 2 && argv[1] == "rev-parse"
	case "pwd", "dirname", "realpath", "which", "readlink", "basename":
		return true
	case "command":
		return len(argv) == 3 && argv[1] == "-v"
	case "python", "python3":
		return strings.Join(argv[1:], " ") == "-m site --user-base"
	}
	return false
}

// expandWord expands a dynamic word with the values the script made
// known; ok is false when a value is unknown.
func (a *analyzer) expandWord(w *syntax.Word, commandPos bool) ([]string, bool) {
	a.env.unknown, a.env.commandPos = false, commandPos
	fields, err := expandSafely(func() ([]string, error) { return expand.Fields(a.config(), w) })
	if err != nil || a.env.unknown {
		return nil, false
	}
	return fields, true
}

// expandLiteral expands an assignment's value (no field splitting).
func (a *analyzer) expandLiteral(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", true
	}
	if v, ok := plainValue(w); ok {
		return v, true
	}
	a.env.unknown, a.env.commandPos = false, false
	out, err := expandSafely(func() ([]string, error) {
		s, err := expand.Literal(a.config(), w)
		return []string{s}, err
	})
	if err != nil || a.env.unknown {
		return "", false
	}
	return out[0], true
}

func expandSafely(f func() ([]string, error)) (out []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errUnknown{}
		}
	}()
	return f()
}

// set records a variable's value (known or not).
func (a *analyzer) set(name string, t tracked) {
	if a.vars == nil {
		a.vars = map[string]tracked{}
	}
	if a.sticky[name] {
		t = tracked{}
	}
	a.vars[name] = t
	a.assigned = append(a.assigned, name)
}

// forget makes a variable's value unknown.
func (a *analyzer) forget(name string) { a.set(name, tracked{}) }

// branch walks f as code that may run any number of times (or not at
// all): what it assigns, and the directory it changes to, are unknown
// after it. sticky makes the names unknown for the rest of the script
// (function bodies, which run when called).
func (a *analyzer) branch(sticky bool, f func()) {
	mark, cwd := len(a.assigned), a.cwd
	f()
	names := a.assigned[mark:]
	a.assigned = a.assigned[:mark]
	for _, n := range names {
		if sticky {
			if a.sticky == nil {
				a.sticky = map[string]bool{}
			}
			a.sticky[n] = true
		}
		a.forget(n)
	}
	if a.cwd != cwd {
		a.cwd = ""
	}
}

// prescan makes unknown, before a loop runs, what its body assigns: on a
// second round the first round's values are in force.
func (a *analyzer) prescan(node syntax.Node) {
	syntax.Walk(node, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.Assign:
			if x.Name != nil {
				a.forget(x.Name.Value)
			}
		case *syntax.CallExpr:
			if len(x.Args) > 0 {
				if v, ok := plainValue(x.Args[0]); ok && (v == "cd" || v == "pushd" || v == "popd") {
					a.cwd = ""
				}
			}
		}
		return true
	})
}

// taint gives up on knowing any variable for the rest of the script.
func (a *analyzer) taint() {
	a.taintAll = true
	for n := range a.vars {
		a.vars[n] = tracked{}
	}
}

// assignNode makes unknown the variable an arithmetic expression or a
// parameter expansion assigns (x=1, x++, ${x:=v}).
func (a *analyzer) assignNode(n syntax.Node) {
	{
		switch x := n.(type) {
		case *syntax.BinaryArithm:
			switch x.Op {
			case syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn, syntax.RemAssgn,
				syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn, syntax.ShrAssgn:
				a.forgetArithName(x.X)
			}
		case *syntax.UnaryArithm:
			if x.Op == syntax.Inc || x.Op == syntax.Dec {
				a.forgetArithName(x.X)
			}
		case *syntax.ParamExp:
			if x.Exp != nil && (x.Exp.Op == syntax.AssignUnset || x.Exp.Op == syntax.AssignUnsetOrNull) && x.Param != nil {
				a.forget(x.Param.Value)
			}
		}
	}
}

func (a *analyzer) forgetArithName(x syntax.ArithmExpr) {
	w, ok := x.(*syntax.Word)
	if !ok {
		a.taint()
		return
	}
	if len(w.Parts) == 1 {
		switch p := w.Parts[0].(type) {
		case *syntax.Lit:
			a.forget(strings.SplitN(p.Value, "[", 2)[0])
			return
		case *syntax.ParamExp:
			if p.Param != nil {
				a.forget(p.Param.Value)
				return
			}
		}
	}
	a.taint()
}

// builtinAssigns follows what builtins do to variables: read, printf -v,
// mapfile, getopts, unset, cd, source.
func (a *analyzer) builtinAssigns(args []Word) {
	if len(args) == 0 || args[0].Dynamic {
		return
	}
	names := func(ws []Word) {
		for _, w := range ws {
			if w.Dynamic {
				a.taint()
				return
			}
			if strings.HasPrefix(w.Value, "-") {
				continue
			}
			a.forget(strings.SplitN(w.Value, "[", 2)[0])
		}
	}
	rest := args[1:]
	switch args[0].Value {
	case "read":
		g := optGrammar{shortArg: "adinNptu"}
		ops, seen, ok := g.skip(rest)
		if !ok {
			a.taint()
			return
		}
		if arr, has := seen["-a"]; has {
			a.forget(arr)
		}
		if len(ops) == 0 {
			a.forget("REPLY")
		}
		names(ops)
	case "printf":
		for i, w := range rest {
			if w.Value == "--" || !strings.HasPrefix(w.Value, "-") {
				break
			}
			if v, ok := strings.CutPrefix(w.Value, "-v"); ok {
				if v == "" && i+1 < len(rest) {
					names(rest[i+1 : i+2])
				} else if v != "" {
					names([]Word{{Value: v}})
				}
			}
		}
	case "mapfile", "readarray":
		g := optGrammar{shortArg: "dnOsuCc"}
		ops, _, ok := g.skip(rest)
		if !ok {
			a.taint()
			return
		}
		if len(ops) == 0 {
			a.forget("MAPFILE")
		}
		names(ops)
	case "getopts":
		if len(rest) >= 2 {
			names(rest[1:2])
		}
		a.forget("OPTARG")
		a.forget("OPTIND")
	case "unset":
		for _, w := range rest {
			if w.Dynamic {
				a.taint()
				return
			}
			if !strings.HasPrefix(w.Value, "-") {
				a.set(strings.SplitN(w.Value, "[", 2)[0], tracked{known: true})
			}
		}
	case "source", ".":
		a.taint()
		a.taintAll = false // later plain assignments are known again
	case "cd", "pushd":
		a.cd(rest)
	case "popd":
		a.cwd = ""
	case "let":
		a.taint()
		a.taintAll = false
	}
}

// cd follows a change of directory.
func (a *analyzer) cd(args []Word) {
	var target *Word
	for i := range args {
		w := args[i]
		if !w.Dynamic && (w.Value == "-L" || w.Value == "-P" || w.Value == "-e" || w.Value == "-@" || w.Value == "--") {
			continue
		}
		target = &args[i]
		break
	}
	switch {
	case target == nil:
		a.cwd = homeValue
	case target.Dynamic || target.Value == "-" || strings.HasPrefix(target.Value, "+") || strings.HasPrefix(target.Value, "-"):
		a.cwd = ""
	default:
		if p := a.resolve(target.Value); p.root != "" {
			a.cwd = p.String()
		} else {
			a.cwd = ""
		}
	}
}
