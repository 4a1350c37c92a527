package safety

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Analyze parses src as bash and reports the commands it would run and
// what the built-in rules found. It never panics and never runs anything.
func Analyze(src string, opts *Options) *Report {
	a := newAnalyzer(opts)
	// about one command per 24 bytes of source: grow rarely
	n := min(len(src)/24+8, 4096)
	a.rep.Commands = make([]Command, 0, n)
	a.infos = make([]info, 0, n)
	f, err := parse(src)
	if err != nil {
		a.rep.ParseError = &ParseError{Err: err}
		return a.rep
	}
	a.file(f, src, 0, nil)
	a.applyRules()
	return a.rep
}

// AnalyzeArgv reports what running argv directly (no shell) would run:
// wrappers are taken off and nested scripts (bash -c ...) are read, as for
// a command in a script.
func AnalyzeArgv(argv []string, opts *Options) *Report {
	a := newAnalyzer(opts)
	if len(argv) == 0 {
		return a.rep
	}
	words := make([]Word, len(argv))
	for i, s := range argv {
		words[i] = Word{Value: s, Raw: quote(s)}
	}
	a.command(words, Command{Pos: "argv"}, stage{})
	a.applyRules()
	return a.rep
}

func parse(src string) (*syntax.File, error) {
	if i := strings.IndexAny(src, "\x00\x01\x7f"); i >= 0 {
		// bash uses these bytes internally (CTLESC, CTLNUL) and reads
		// source holding them its own way; NUL cannot reach bash at all.
		return nil, fmt.Errorf("byte %d: control character %q that bash treats specially", i, src[i])
	}
	if i := strings.IndexByte(src, '\r'); i >= 0 {
		return nil, fmt.Errorf("byte %d: a carriage return, which bash does not read as white space; use \\n line endings", i)
	}
	var f *syntax.File
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("the parser failed: %v", r)
			}
		}()
		f, err = syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
		if err == nil {
			err = bashRefuses(f, src)
		}
		return err
	}()
	return f, err
}

// reserved are bash's reserved words that bash refuses where a command
// name stands, although the parser takes them as one.
var reserved = map[string]bool{"if": true, "while": true, "until": true, "for": true, "case": true, "select": true, "function": true, "[[": true, "{": true, "in": true, "do": true, "done": true, "then": true, "fi": true, "else": true, "elif": true, "esac": true, "}": true, "]]": true}

// bashRefuses finds what the parser accepts but bash refuses: a reserved
// word as a command name, and a redirection target of digits directly
// followed by another redirection (">0>0", which bash reads as a file
// descriptor number with no target).
func bashRefuses(f *syntax.File, src string) error {
	var err error
	syntax.Walk(f, func(n syntax.Node) bool {
		if err != nil {
			return false
		}
		switch x := n.(type) {
		case *syntax.FuncDecl:
			if x.Name == nil || x.Name.Value == "" || x.Body == nil {
				err = fmt.Errorf("%s: syntax error near unexpected token `)'", x.Pos())
			} else if _, simple := x.Body.Cmd.(*syntax.CallExpr); simple || x.Body.Cmd == nil {
				err = fmt.Errorf("%s: syntax error: a function body must be a compound command", x.Pos())
			}
		case *syntax.ExtGlob:
			err = fmt.Errorf("%s: syntax error near unexpected token `(': extended globs are off in bash scripts", x.Pos())
		case *syntax.BinaryCmd:
			for _, st := range []*syntax.Stmt{x.X, x.Y} {
				if tc, ok := st.Cmd.(*syntax.TimeClause); ok && tc.Stmt == nil {
					err = fmt.Errorf("%s: syntax error near unexpected token `%s'", x.OpPos, x.Op)
				}
			}
		case *syntax.Stmt:
			if tc, ok := x.Cmd.(*syntax.TimeClause); ok && tc.Stmt == nil && x.Background {
				err = fmt.Errorf("%s: syntax error near unexpected token `&'", x.Pos())
			}
		case *syntax.CallExpr:
			if len(x.Args) > 0 {
				// NAME[ starts an array assignment for bash, which then
				// needs its closing bracket.
				first := src[x.Args[0].Pos().Offset():x.Args[0].End().Offset()]
				if i := strings.IndexByte(first, '['); i > 0 && validName(first[:i]) && !strings.Contains(first[i:], "]") {
					err = fmt.Errorf("%s: unexpected EOF while looking for matching `]'", x.Args[0].Pos())
				}
			}
			if len(x.Args) > 0 && len(x.Args[0].Parts) == 1 {
				if lit, ok := x.Args[0].Parts[0].(*syntax.Lit); ok && reserved[strings.TrimSuffix(lit.Value, "\\")] {
					err = fmt.Errorf("%s: syntax error near unexpected token `%s'", x.Pos(), lit.Value)
				}
			}
		case *syntax.Redirect:
			if x.Word != nil && int(x.Word.End().Offset()) >= len(src) && strings.TrimSpace(src[x.Word.Pos().Offset():]) == "\\" {
				err = fmt.Errorf("%s: syntax error: unexpected end of file", x.Word.Pos())
			}
			if x.Word != nil && len(x.Word.Parts) == 1 {
				if lit, ok := x.Word.Parts[0].(*syntax.Lit); ok && isDigits(lit.Value) {
					if end := int(x.Word.End().Offset()); end < len(src) && (src[end] == '<' || src[end] == '>') {
						err = fmt.Errorf("%s: syntax error near unexpected token `%s'", x.Word.Pos(), lit.Value)
					}
				}
			}
		}
		return true
	})
	return err
}

// stage places a command in a pipeline: pipeline numbers start at 1 (0:
// not in a pipeline), stages at 0.
type stage struct {
	pipeline, index int
}

// redirectAt is a redirection anywhere in the source, for the rules.
type redirectAt struct {
	r     Redirect
	cmd   int // the command it belongs to, or -1
	cwd   string
	links map[string]string
}

// info is what the rules need to know about a recorded command beyond
// Command.
type info struct {
	stage stage
	// stdinScript: a shell or interpreter that reads its program from
	// stdin.
	stdinScript bool
	// procSubstCmds: commands run by process substitutions in the
	// arguments (bash <(curl ...)).
	procSubstCmds []int
	// stdin: where the command's standard input comes from, when a
	// redirection says.
	stdin *stdinFrom
	// substCmds: commands run by substitutions in the arguments.
	substCmds []int
	// cwd and links: the working directory and symbolic links when the
	// command runs.
	cwd   string
	links map[string]string
}

// stdinFrom is the standard input a redirection gives a command.
type stdinFrom struct {
	// text is a here-string's or here-document's static text.
	text   string
	static bool
	// cmds are the commands whose output becomes the input (<<< "$(...)",
	// < <(...)).
	cmds []int
	// net: the input is a network connection (/dev/tcp, /dev/udp).
	net bool
	// file: a plain file.
	file bool
}

type analyzer struct {
	opts      *Options
	rep       *Report
	infos     []info
	redirects []redirectAt
	pipelines int

	// What the script made known so far (see track.go).
	vars     map[string]tracked
	sticky   map[string]bool
	taintAll bool
	assigned []string
	cwd      string            // symbolic working directory, "" when unknown
	links    map[string]string // symbolic links made by the script
	env      trackEnv
	cfg      *expand.Config
	enableF  []int // commands that load builtins from a shared object
}

func newAnalyzer(opts *Options) *analyzer {
	a := &analyzer{opts: opts, rep: &Report{Commands: []Command{}, Findings: []Finding{}}, cwd: "."}
	a.env.a = a
	return a
}

// config returns the expansion configuration, made when first needed.
func (a *analyzer) config() *expand.Config {
	if a.cfg == nil {
		a.cfg = &expand.Config{Env: &a.env, CmdSubst: a.cmdSubst,
			ProcSubst: func(*syntax.ProcSubst) (string, error) { return "", errUnknown{} }}
	}
	return a.cfg
}

// src is the source a node came from, for raw word text.
type src struct {
	text  string
	depth int
}

func (a *analyzer) file(f *syntax.File, text string, depth int, wrappers []string) {
	s := &src{text: text, depth: depth}
	for _, st := range f.Stmts {
		a.stmt(s, st, stage{}, wrappers)
	}
}

func (a *analyzer) stmts(s *src, list []*syntax.Stmt, wrappers []string) {
	for _, st := range list {
		a.stmt(s, st, stage{}, wrappers)
	}
}

// stmt walks one statement. Commands found directly in it get stg.
func (a *analyzer) stmt(s *src, st *syntax.Stmt, stg stage, wrappers []string) {
	if st == nil {
		return
	}
	first := len(a.rep.Commands)
	var redirs []Redirect
	var in *stdinFrom
	for _, r := range st.Redirs {
		before := len(a.rep.Commands)
		a.nested(s, r.Word, wrappers)
		a.nested(s, r.Hdoc, wrappers)
		var target Word
		if r.Word != nil {
			target = a.word(s, r.Word)
			redirs = append(redirs, Redirect{Op: r.Op.String(), Target: target})
		}
		if r.N != nil && r.N.Value != "0" {
			continue
		}
		switch r.Op {
		case syntax.WordHdoc, syntax.Hdoc, syntax.DashHdoc:
			in = &stdinFrom{}
			body := r.Word
			if r.Op != syntax.WordHdoc {
				body = r.Hdoc
			}
			if body != nil {
				if r.Op != syntax.WordHdoc && quotedDelim(r.Word) {
					in.text, in.static = rawText(s, body), true
				} else if !dynamic(body) {
					in.text, in.static = a.word(s, body).Value, true
				} else if v, ok := a.expandLiteral(body); ok {
					in.text, in.static = v, true
				}
			} else {
				in.static = true
			}
			if r.Op == syntax.WordHdoc && in.static {
				in.text += "\n"
			}
		case syntax.DplIn:
			if r.Word != nil && r.Word.Lit() != "-" {
				in = &stdinFrom{} // another descriptor: what it holds is unknown here
			} else {
				continue
			}
		case syntax.RdrIn, syntax.RdrInOut:
			in = &stdinFrom{file: true}
			if target.Dynamic {
				in.file = false
			} else if strings.HasPrefix(path.Clean(target.Value), "/dev/tcp/") || strings.HasPrefix(path.Clean(target.Value), "/dev/udp/") {
				in.file, in.net = false, true
			}
		default:
			continue
		}
		for i := before; i < len(a.rep.Commands); i++ {
			in.cmds = append(in.cmds, i)
		}
	}
	switch x := st.Cmd.(type) {
	case *syntax.CallExpr:
		a.call(s, x, stg, wrappers, redirs, in)
		redirs = nil
	case *syntax.BinaryCmd:
		if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
			a.pipelines++
			p := a.pipelines
			parts := flattenPipe(x)
			ranges := make([][2]int, len(parts))
			a.branch(false, func() {
				for i, part := range parts {
					ranges[i][0] = len(a.rep.Commands)
					a.stmt(s, part, stage{pipeline: p, index: i}, wrappers)
					ranges[i][1] = len(a.rep.Commands)
				}
			})
			a.pipeFeeds(s, parts, ranges, wrappers)
		} else {
			a.stmt(s, x.X, stg, wrappers)
			a.branch(false, func() { a.stmt(s, x.Y, stg, wrappers) })
		}
	case *syntax.Subshell:
		a.branch(false, func() { a.stmts(s, x.Stmts, wrappers) })
	case *syntax.Block:
		for _, inner := range x.Stmts {
			a.stmt(s, inner, stg, wrappers)
		}
	case *syntax.IfClause:
		a.stmts(s, x.Cond, wrappers)
		a.branch(false, func() {
			a.stmts(s, x.Then, wrappers)
			for c := x.Else; c != nil; c = c.Else {
				a.stmts(s, c.Cond, wrappers)
				a.stmts(s, c.Then, wrappers)
			}
		})
	case *syntax.WhileClause:
		a.prescan(x)
		a.branch(false, func() {
			a.stmts(s, x.Cond, wrappers)
			a.stmts(s, x.Do, wrappers)
		})
	case *syntax.ForClause:
		a.nested(s, x.Loop, wrappers)
		a.prescan(x)
		if wi, ok := x.Loop.(*syntax.WordIter); ok && wi.Name != nil {
			a.forget(wi.Name.Value)
		}
		a.branch(false, func() { a.stmts(s, x.Do, wrappers) })
	case *syntax.CaseClause:
		a.nested(s, x.Word, wrappers)
		a.branch(false, func() {
			for _, item := range x.Items {
				for _, p := range item.Patterns {
					a.nested(s, p, wrappers)
				}
				a.stmts(s, item.Stmts, wrappers)
			}
		})
	case *syntax.FuncDecl:
		a.branch(true, func() { a.stmt(s, x.Body, stage{}, wrappers) })
	case *syntax.DeclClause:
		a.decl(s, x, wrappers)
	case *syntax.TimeClause:
		a.stmt(s, x.Stmt, stg, append(clip(wrappers), "time"))
	case *syntax.CoprocClause:
		a.branch(false, func() { a.stmt(s, x.Stmt, stage{}, append(clip(wrappers), "coproc")) })
	case nil:
	default: // arithmetic, [[ ]], let: only substitutions inside can run commands
		a.nested(s, x, wrappers)
	}
	if redirs != nil {
		owner := -1
		if len(a.rep.Commands) == first+1 {
			owner = first
		}
		for _, r := range redirs {
			a.redirects = append(a.redirects, redirectAt{r: r, cmd: owner, cwd: a.cwd, links: a.links})
		}
	}
}

func clip(s []string) []string { return s[:len(s):len(s)] }

// flattenPipe returns the stages of a pipeline in order.
func flattenPipe(b *syntax.BinaryCmd) []*syntax.Stmt {
	var out []*syntax.Stmt
	var add func(st *syntax.Stmt)
	add = func(st *syntax.Stmt) {
		if bc, ok := st.Cmd.(*syntax.BinaryCmd); ok && (bc.Op == syntax.Pipe || bc.Op == syntax.PipeAll) && len(st.Redirs) == 0 && !st.Negated && !st.Background {
			add(bc.X)
			add(bc.Y)
			return
		}
		out = append(out, st)
	}
	add(b.X)
	add(b.Y)
	return out
}

// nested records the commands of substitutions inside node ($(...),
// backticks, <(...), >(...)) and returns the indexes of those run by
// process substitutions.
func (a *analyzer) nested(s *src, node syntax.Node, wrappers []string) []int {
	if node == nil {
		return nil
	}
	if w, ok := node.(*syntax.Word); ok && (w == nil || !dynamic(w)) {
		return nil // a static word holds no substitution
	}
	var proc []int
	syntax.Walk(node, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.Lit:
			a.subscript(x.Value, s, x)
		case *syntax.SglQuoted:
			a.subscript(x.Value, s, x)
		case *syntax.ParamExp:
			a.assignNode(n)
			a.evaluatingExpansion(s, x)
		case *syntax.BinaryArithm, *syntax.UnaryArithm:
			a.assignNode(n)
		case *syntax.CmdSubst:
			a.stmts(s, x.Stmts, wrappers)
			return false
		case *syntax.ProcSubst:
			first := len(a.rep.Commands)
			a.stmts(s, x.Stmts, wrappers)
			for i := first; i < len(a.rep.Commands); i++ {
				proc = append(proc, i)
			}
			return false
		}
		return true
	})
	return proc
}

// mayKnow reports whether expanding parts could give a known value: no
// plain reference to a variable the script did not set (HOME and PWD
// aside), no process substitution.
func (a *analyzer) mayKnow(parts []syntax.WordPart) bool {
	for _, p := range parts {
		switch x := p.(type) {
		case *syntax.DblQuoted:
			if !a.mayKnow(x.Parts) {
				return false
			}
		case *syntax.ParamExp:
			if x.Param == nil || x.Exp != nil || x.Excl || x.Length || x.Width || x.Index != nil || x.Slice != nil || x.Repl != nil || x.Names != 0 {
				continue
			}
			n := x.Param.Value
			if t, ok := a.vars[n]; ok {
				if !t.known {
					return false
				}
				continue
			}
			if n != "HOME" && n != "PWD" || a.taintAll {
				return false
			}
		case *syntax.ProcSubst:
			return false
		}
	}
	return true
}

// dynamic reports whether a word's value is only known at run time.
func dynamic(w *syntax.Word) bool { return dynamicParts(w.Parts) }

func dynamicParts(parts []syntax.WordPart) bool {
	for _, p := range parts {
		switch x := p.(type) {
		case *syntax.Lit, *syntax.SglQuoted, *syntax.ExtGlob:
		case *syntax.DblQuoted:
			if dynamicParts(x.Parts) {
				return true
			}
		default: // parameter, command, process substitution, arithmetic
			return true
		}
	}
	return false
}

// plainValue returns the value of a static word that needs no expansion
// (no escapes, braces or $'...'), without calling expand.
func plainValue(w *syntax.Word) (string, bool) {
	if len(w.Parts) == 1 {
		if lit, ok := w.Parts[0].(*syntax.Lit); ok && !strings.ContainsAny(lit.Value, "\\{") {
			return lit.Value, true
		}
	}
	var b strings.Builder
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(x.Value, "\\{") {
				return "", false
			}
			b.WriteString(x.Value)
		case *syntax.SglQuoted:
			if x.Dollar {
				return "", false
			}
			b.WriteString(x.Value)
		case *syntax.DblQuoted:
			if x.Dollar {
				return "", false
			}
			for _, q := range x.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok || strings.ContainsRune(lit.Value, '\\') {
					return "", false
				}
				b.WriteString(lit.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// word turns one syntax word into a Word (a static word with brace
// expansion may stand for several arguments: see words).
func (a *analyzer) word(s *src, w *syntax.Word) Word {
	ws := a.words(s, w)
	if len(ws) == 1 {
		return ws[0]
	}
	raw := rawText(s, w)
	vals := make([]string, len(ws))
	for i, x := range ws {
		vals[i] = x.Value
	}
	return Word{Value: strings.Join(vals, " "), Raw: raw}
}

// words expands a syntax word into the arguments bash would pass: one
// Word for a dynamic word, as many as brace expansion gives for a static
// one.
func (a *analyzer) words(s *src, w *syntax.Word) []Word { return a.appendWords(nil, s, w) }

// appendWords appends the arguments w stands for to dst.
func (a *analyzer) appendWords(dst []Word, s *src, w *syntax.Word) []Word {
	return a.appendWordsAt(dst, s, w, false)
}

// appendWordsAt is appendWords; commandPos is set for the word in a
// program's position.
func (a *analyzer) appendWordsAt(dst []Word, s *src, w *syntax.Word, commandPos bool) []Word {
	raw := rawText(s, w)
	if dynamic(w) {
		if a.mayKnow(w.Parts) {
			if fields, ok := a.expandWord(w, commandPos); ok {
				for _, f := range fields {
					a.subscript(f, s, w)
					dst = append(dst, Word{Value: f, Raw: raw})
				}
				return dst
			}
		}
		return append(dst, Word{Value: raw, Dynamic: true, Raw: raw})
	}
	if false {
		if fields, ok := a.expandWord(w, commandPos); ok {
			for _, f := range fields {
				a.subscript(f, s, w)
				dst = append(dst, Word{Value: f, Raw: raw})
			}
			return dst
		}
		return append(dst, Word{Value: raw, Dynamic: true, Raw: raw})
	}
	if v, ok := plainValue(w); ok {
		a.subscript(v, s, w)
		return append(dst, Word{Value: v, Raw: raw})
	}
	fields, err := expandFields(w)
	if err != nil {
		return append(dst, Word{Value: raw, Dynamic: true, Raw: raw})
	}
	if len(fields) == 0 { // "" is one empty argument
		return append(dst, Word{Value: "", Raw: raw})
	}
	for _, f := range fields {
		a.subscript(f, s, w)
		dst = append(dst, Word{Value: f, Raw: raw})
	}
	return dst
}

// subscript reports as unanalysable a value holding an array subscript
// with a substitution (a[$(...)]): bash runs it wherever it evaluates the
// value as a variable name or arithmetic (test -v, printf -v, read,
// declare, ${!ref}, (( ))).
func (a *analyzer) subscript(v string, s *src, n syntax.Node) {
	i := strings.IndexByte(v, '[')
	if i < 0 {
		return
	}
	rest := v[i:]
	if strings.Contains(rest, "$(") || strings.Contains(rest, "`") || strings.Contains(rest, "<(") || strings.Contains(rest, ">(") {
		a.unanalysable("nested-script", "an array subscript with a command substitution ("+v+") runs the command wherever bash evaluates it", pos(n.Pos().Line(), n.Pos().Col()))
	}
}

// evaluatingExpansion reports as unanalysable the expansions that run
// code held in a variable: ${x@P} (prompt expansion runs $(...)) and
// ${!x} (the name x holds may carry a subscript with a substitution),
// unless the checker knows the variable's value and it holds none.
func (a *analyzer) evaluatingExpansion(s *src, x *syntax.ParamExp) {
	prompt := x.Exp != nil && x.Exp.Op == syntax.OtherParamOps && x.Exp.Word != nil && x.Exp.Word.Lit() == "P"
	if (!prompt && !x.Excl) || x.Param == nil || x.Names != 0 {
		return
	}
	if t, ok := a.vars[x.Param.Value]; ok && t.known && t.v.Kind == expand.String &&
		!strings.Contains(t.v.Str, "$(") && !strings.Contains(t.v.Str, "`") && (prompt || !strings.Contains(t.v.Str, "[")) {
		return
	}
	what := "${!" + x.Param.Value + "}"
	if prompt {
		what = "${" + x.Param.Value + "@P}"
	}
	a.unanalysable("nested-script", what+" evaluates a value only known at run time, which can run commands", pos(x.Pos().Line(), x.Pos().Col()))
}

// quotedDelim reports whether a here-document's delimiter is quoted (the
// body is then taken literally).
func quotedDelim(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			return true
		case *syntax.Lit:
			if strings.ContainsRune(x.Value, '\\') {
				return true
			}
		}
	}
	return false
}

var expandConfig = &expand.Config{}

// expandFields expands a static word: quotes, escapes, $'...' and braces.
// No variables, substitutions or globs are involved.
func expandFields(w *syntax.Word) (fields []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("expand: %v", r)
		}
	}()
	return expand.Fields(expandConfig, w)
}

func rawText(s *src, n syntax.Node) string {
	start, end := int(n.Pos().Offset()), int(n.End().Offset())
	if start < 0 || end > len(s.text) || start > end {
		return ""
	}
	return s.text[start:end]
}

// call records a simple command.
func (a *analyzer) call(s *src, c *syntax.CallExpr, stg stage, wrappers []string, redirs []Redirect, in *stdinFrom) {
	var assigns []string
	var vals []Word
	for _, as := range c.Assigns {
		a.nested(s, as.Value, wrappers)
		if as.Array != nil {
			a.nested(s, as.Array, wrappers)
		}
		if as.Index != nil {
			a.nested(s, as.Index, wrappers)
		}
		if as.Name != nil {
			assigns = append(assigns, as.Name.Value)
			vals = append(vals, a.assignValue(s, as))
		}
	}
	args := make([]Word, 0, len(c.Args))
	var proc []int
	substFirst := len(a.rep.Commands)
	for i, w := range c.Args {
		proc = append(proc, a.nested(s, w, wrappers)...)
		args = a.appendWordsAt(args, s, w, i == 0)
	}
	substEnd := len(a.rep.Commands)
	if len(args) == 0 {
		for i, as := range c.Assigns {
			if as.Name != nil {
				a.track(as, vals[i], s)
			}
		}
		// Assignments alone set shell variables: nothing runs, but a
		// loader variable exported later still matters to the rules.
		if len(assigns) > 0 || len(redirs) > 0 {
			idx := a.record(Command{Args: []Word{}, Assigns: assigns, assignVals: vals, Redirects: redirs, Depth: s.depth, Pos: pos(c.Pos().Line(), c.Pos().Col()), Wrappers: wrappers}, info{stage: stg})
			for _, r := range redirs {
				a.redirects = append(a.redirects, redirectAt{r: r, cmd: idx, cwd: a.cwd, links: a.links})
			}
		}
		return
	}
	base := Command{Wrappers: wrappers, Assigns: assigns, assignVals: vals, Redirects: redirs, Depth: s.depth, Pos: pos(c.Pos().Line(), c.Pos().Col()), stdin: in}
	first := len(a.rep.Commands)
	a.command(args, base, stg)
	a.builtinAssigns(args)
	for _, r := range redirs {
		owner := -1
		if len(a.rep.Commands) > first {
			owner = first
		}
		a.redirects = append(a.redirects, redirectAt{r: r, cmd: owner, cwd: a.cwd, links: a.links})
	}
	if len(proc) > 0 || substEnd > substFirst {
		for i := first; i < len(a.rep.Commands); i++ {
			if a.rep.Commands[i].Depth == s.depth {
				a.infos[i].procSubstCmds = append(a.infos[i].procSubstCmds, proc...)
				for k := substFirst; k < substEnd; k++ {
					a.infos[i].substCmds = append(a.infos[i].substCmds, k)
				}
			}
		}
	}
}

// decl records export/declare/local/readonly/typeset: they run no
// program, but the variables they export matter to the rules.
func (a *analyzer) decl(s *src, d *syntax.DeclClause, wrappers []string) {
	var assigns []string
	var vals []Word
	at := pos(d.Pos().Line(), d.Pos().Col())
	nameref, integer := false, false
	for _, as := range d.Args {
		if as.Naked && as.Name == nil && as.Value != nil {
			if v, ok := plainValue(as.Value); ok && strings.HasPrefix(v, "-") {
				nameref = nameref || strings.ContainsRune(v, 'n')
				integer = integer || strings.ContainsRune(v, 'i')
			}
		}
	}
	if nameref {
		a.taint()
	}
	for _, as := range d.Args {
		a.nested(s, as.Value, wrappers)
		if as.Array != nil {
			a.nested(s, as.Array, wrappers)
		}
		if as.Index != nil {
			a.nested(s, as.Index, wrappers)
		}
		switch {
		case as.Name != nil && !as.Naked:
			assigns = append(assigns, as.Name.Value)
			v := a.assignValue(s, as)
			if integer {
				v = Word{Value: v.Raw, Raw: v.Raw, Dynamic: true}
			}
			vals = append(vals, v)
			a.track(as, v, s)
		case as.Name != nil && as.Naked:
			if d.Variant.Value == "export" {
				assigns = append(assigns, as.Name.Value)
				vals = append(vals, Word{Value: "$" + as.Name.Value, Raw: "$" + as.Name.Value, Dynamic: true})
			}
			if d.Variant.Value == "local" || d.Variant.Value == "declare" || d.Variant.Value == "typeset" {
				a.forget(as.Name.Value)
			}
		case as.Naked && as.Value != nil:
			// export "NAME=value": an assignment written as one word.
			w := a.word(s, as.Value)
			if w.Dynamic {
				if strings.HasPrefix(w.Raw, "-") {
					continue
				}
				a.taint()
				a.unanalysable("dynamic-argument", d.Variant.Value+" of "+w.Raw+": the variable's name is only known at run time", at)
				continue
			}
			name, val, ok := strings.Cut(w.Value, "=")
			if strings.HasPrefix(w.Value, "-") {
				continue
			}
			name = strings.TrimSuffix(name, "+")
			if !ok || !validName(name) {
				if validName(strings.SplitN(w.Value, "[", 2)[0]) {
					a.forget(strings.SplitN(w.Value, "[", 2)[0])
				}
				continue
			}
			assigns = append(assigns, name)
			vals = append(vals, Word{Value: val, Raw: w.Raw})
			a.set(name, tracked{known: !integer, v: strVar(val)})
		}
	}
	args := []Word{{Value: d.Variant.Value, Raw: d.Variant.Value}}
	a.record(Command{Args: args, Name: d.Variant.Value, Assigns: assigns, assignVals: vals, Wrappers: wrappers, Depth: s.depth, Pos: at}, info{})
}

// assignValue is the value an assignment gives, as a Word.
func (a *analyzer) assignValue(s *src, as *syntax.Assign) Word {
	if as.Array != nil || as.Index != nil {
		raw := rawText(s, as)
		return Word{Value: raw, Raw: raw, Dynamic: true}
	}
	if as.Value == nil {
		return Word{}
	}
	raw := rawText(s, as.Value)
	if v, ok := a.expandLiteral(as.Value); ok {
		a.subscript(v, s, as.Value)
		return Word{Value: v, Raw: raw}
	}
	return Word{Value: raw, Raw: raw, Dynamic: true}
}

// track follows a shell assignment (x=v, x=(a b), x+=v, a[i]=v).
func (a *analyzer) track(as *syntax.Assign, v Word, s *src) {
	name := as.Name.Value
	switch {
	case as.Index != nil || as.Append:
		a.forget(name)
	case as.Array != nil:
		var list []string
		for _, el := range as.Array.Elems {
			if el.Index != nil || el.Value == nil {
				a.forget(name)
				return
			}
			ws := a.appendWords(nil, s, el.Value)
			for _, w := range ws {
				if w.Dynamic {
					a.forget(name)
					return
				}
				list = append(list, w.Value)
			}
		}
		a.set(name, tracked{known: true, v: expand.Variable{Set: true, Kind: expand.Indexed, List: list}})
	case v.Dynamic:
		a.forget(name)
	default:
		a.set(name, tracked{known: true, v: strVar(v.Value)})
	}
}

// record adds a command to the report and returns its index.
func (a *analyzer) record(c Command, in info) int {
	if c.Name == "" && len(c.Args) > 0 {
		if c.Args[0].Dynamic {
			c.Dynamic = true
		} else {
			c.Name = path.Base(c.Args[0].Value)
		}
	}
	a.rep.Commands = append(a.rep.Commands, c)
	in.cwd, in.links = a.cwd, a.links
	a.infos = append(a.infos, in)
	return len(a.rep.Commands) - 1
}

func (a *analyzer) unanalysable(kind, detail, at string) {
	a.rep.Unanalysable = append(a.rep.Unanalysable, Unanalysable{Kind: kind, Detail: detail, Pos: at})
}

// script parses a nested script (bash -c, eval) and records its commands.
func (a *analyzer) script(text string, depth int, wrappers []string, at string) {
	if depth > MaxDepth {
		a.unanalysable("nested-script", fmt.Sprintf("scripts nested more than %d deep", MaxDepth), at)
		return
	}
	f, err := parse(text)
	if err != nil {
		a.unanalysable("nested-script", "a nested script bash would not parse: "+err.Error(), at)
		return
	}
	a.file(f, text, depth, wrappers)
}
