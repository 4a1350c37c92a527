package safety

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// builtinCode reads the code that builtins keep for later: trap strings,
// mapfile callbacks, aliases; and reports what rebinds or loads code
// (hash -p, enable -f).
func (a *analyzer) builtinCode(args []Word, base Command, stg stage) {
	name := path.Base(args[0].Value)
	rest := args[1:]
	switch name {
	case "trap":
		ops, seen, ok := optGrammar{}.skip(rest)
		_, p := seen["-p"]
		_, l := seen["-l"]
		if !ok {
			a.unanalysable("nested-script", "the code of trap "+ops[0].Raw+" is only known at run time", base.Pos)
			return
		}
		if p || l || len(ops) < 2 {
			return
		}
		a.scriptOfWords(args, ops[:1], base, stg, "trap")
	case "mapfile", "readarray":
		_, seen, ok := optGrammar{shortArg: "dnOsuCc"}.skip(rest)
		if cb, has := seen["-C"]; has {
			a.scriptOfWords(args, []Word{a.optionWord(args, cb)}, base, stg, name+" -C")
		} else if !ok {
			a.unanalysable("nested-script", name+" with options only known at run time", base.Pos)
		}
	case "alias":
		for _, w := range rest {
			if w.Dynamic {
				a.unanalysable("nested-script", "alias "+w.Raw+" is only known at run time", base.Pos)
				continue
			}
			if _, body, ok := strings.Cut(w.Value, "="); ok {
				a.scriptOfWords(args, []Word{{Value: body, Raw: w.Raw}}, base, stg, "alias")
			}
		}
	case "hash":
		for _, w := range rest {
			if w.Dynamic || strings.HasPrefix(w.Value, "-") && strings.Contains(w.Value, "p") {
				a.unanalysable("dynamic-command", "hash -p makes a command name run another program", base.Pos)
				return
			}
		}
	case "enable":
		for _, w := range rest {
			if w.Dynamic || strings.HasPrefix(w.Value, "-") && strings.Contains(w.Value, "f") {
				a.enableF = append(a.enableF, len(a.rep.Commands))
				return
			}
		}
	}
}

// symlink follows ln -s TARGET LINK (and the -t DIR and LINK-in-directory
// forms), so that later paths through the link are seen where they lead.
func (a *analyzer) symlink(args []Word) {
	ops, seen, ok := lnGrammar.scan(args)
	if !ok {
		return
	}
	_, symbolic := seen["-s"]
	if _, long := seenLong(seen, "symbolic", 2); long {
		symbolic = true
	}
	if !symbolic || len(ops) == 0 {
		return
	}
	for _, w := range ops {
		if w.Dynamic {
			return
		}
	}
	dir, hasDir := seen["-t"]
	if d, has := seen["--target-directory"]; has {
		dir, hasDir = d, true
	}
	add := func(target, link string) {
		p := a.resolve(link)
		if p.root == "" {
			return
		}
		// copy on write: commands recorded earlier keep the links of
		// their time
		links := make(map[string]string, len(a.links)+1)
		for k, v := range a.links {
			links[k] = v
		}
		a.links = links
		t := target
		if !strings.HasPrefix(t, "/") && !strings.HasPrefix(t, "~") {
			// relative to the link's directory
			d := symPath{root: p.root, rel: cleanRel(p.root, path.Dir(p.rel))}
			t = symPath{root: d.root, rel: cleanRel(d.root, path.Join(d.rel, t))}.String()
		}
		a.links[p.String()] = t
	}
	switch {
	case hasDir:
		for _, w := range ops {
			add(w.Value, path.Join(dir, path.Base(w.Value)))
		}
	case len(ops) == 1:
		add(ops[0].Value, path.Base(ops[0].Value))
	default:
		last := ops[len(ops)-1].Value
		if len(ops) > 2 || strings.HasSuffix(last, "/") {
			for _, w := range ops[:len(ops)-1] {
				add(w.Value, path.Join(last, path.Base(w.Value)))
			}
			return
		}
		add(ops[0].Value, last)
	}
}

var lnGrammar = optGrammar{shortArg: "St", longArg: []string{"suffix", "target-directory"}}

// pipeFeeds looks at what each stage of a pipeline feeds a shell that
// reads its script from standard input: literal text (echo, printf, a
// here-document through cat) is read as a nested script; a download or a
// decoder is for the rules; anything else is unanalysable.
func (a *analyzer) pipeFeeds(s *src, parts []*syntax.Stmt, ranges [][2]int, wrappers []string) {
	for k := 1; k < len(parts); k++ {
		for i := ranges[k][0]; i < ranges[k][1]; i++ {
			c := &a.rep.Commands[i]
			if !a.infos[i].stdinScript || a.infos[i].stage.index != k || c.stdin != nil || c.Dynamic {
				continue
			}
			if !shells[c.Name] && c.Name != "source" && c.Name != "." {
				continue // interpreters: only the download and decode rules
			}
			if text, ok := a.literalOutput(ranges[k-1]); ok {
				a.script(text, c.Depth+1, append(clip(c.Wrappers), c.Name+" <pipe"), c.Pos)
				continue
			}
			fed := false
			for j := ranges[0][0]; j < ranges[k-1][1]; j++ {
				if downloader(&a.rep.Commands[j]) || decoder(&a.rep.Commands[j]) || a.netInput(j) {
					fed = true
				}
			}
			if !fed {
				a.unanalysable("nested-script", c.Name+" reads its script from a pipe; what the pipe carries is only known at run time", c.Pos)
			}
		}
	}
}

// netInput reports whether command j reads a network connection
// (cat </dev/tcp/host/port).
func (a *analyzer) netInput(j int) bool {
	c := &a.rep.Commands[j]
	return c.stdin != nil && c.stdin.net || netTools[c.Name] && !c.Dynamic
}

// netTools read from the network what they print.
var netTools = map[string]bool{"nc": true, "ncat": true, "netcat": true, "socat": true, "telnet": true, "openssl": false}

// literalOutput is what a single command in r prints when it only prints
// literal text: echo (without -e), printf with a plain format, cat of a
// here-document.
func (a *analyzer) literalOutput(r [2]int) (string, bool) {
	if r[1]-r[0] != 1 {
		return "", false
	}
	c := &a.rep.Commands[r[0]]
	if c.Dynamic || len(c.Args) == 0 {
		return "", false
	}
	for _, w := range c.Args {
		if w.Dynamic {
			return "", false
		}
	}
	argv := c.Argv()
	switch c.Name {
	case "echo":
		args := argv[1:]
		nl := "\n"
		for len(args) > 0 && (args[0] == "-n" || args[0] == "-E") {
			if args[0] == "-n" {
				nl = ""
			}
			args = args[1:]
		}
		if len(args) > 0 && strings.HasPrefix(args[0], "-") {
			return "", false // -e and the like decode
		}
		return strings.Join(args, " ") + nl, true
	case "printf":
		if len(argv) < 2 {
			return "", false
		}
		f := argv[1]
		switch {
		case (f == "%s" || f == `%s\n`) && len(argv) > 2:
			return strings.Join(argv[2:], "\n") + "\n", true
		case !strings.ContainsAny(f, `%\`):
			return f, true
		case !strings.Contains(f, "%") && !decodingFormat(f):
			return strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`).Replace(f), true
		}
	case "cat":
		if len(argv) == 1 && c.stdin != nil && c.stdin.static {
			return c.stdin.text, true
		}
	}
	return "", false
}
