package safety

import (
	"path"
	"strings"
)

// symPath is a path as the checker knows it: a root ("/", "~" for the
// home directory, "." for the directory the script starts in) and a
// cleaned path under it, which starts with ".." when it climbs above the
// root. An empty root means the path is relative to a directory the
// checker does not know.
type symPath struct {
	root string
	rel  string
	// home: the word itself was written with ~ or $HOME.
	home bool
}

func (p symPath) String() string {
	switch {
	case p.root == "":
		return p.rel
	case p.rel == ".":
		return p.root
	case p.root == "/":
		return "/" + p.rel
	case p.root == "." && p.rel == "..":
		return ".."
	}
	return p.root + "/" + p.rel
}

// resolve places v: after ~ and the root, relative to the working
// directory the script changed to, through the symbolic links it made.
func (a *analyzer) resolve(v string) (p symPath) {
	p = splitRoot(v)
	home := p.home
	defer func() { p.home = home }()
	if p.root == "" && a.cwd != "" {
		base := splitCwd(a.cwd)
		p.root, p.rel = base.root, path.Join(base.rel, p.rel)
	}
	p.rel = cleanRel(p.root, p.rel)
	for n := 0; n < 8 && len(a.links) > 0 && p.root != ""; n++ {
		s := p.String()
		changed := false
		for link, target := range a.links {
			if rest, ok := strings.CutPrefix(s, link); ok && (rest == "" || rest[0] == '/') {
				q := splitRoot(target)
				if q.root == "" {
					d := splitRoot(link)
					q.root, q.rel = d.root, path.Join(path.Dir(d.rel), q.rel)
				}
				p.root, p.rel = q.root, cleanRel(q.root, path.Join(q.rel, strings.TrimPrefix(rest, "/")))
				changed = true
				break
			}
		}
		if !changed {
			break
		}
	}
	return p
}

// splitCwd places the symbolic working directory: "." and "./x" are the
// workspace.
func splitCwd(cwd string) symPath {
	if cwd == "." || strings.HasPrefix(cwd, "./") {
		return symPath{root: ".", rel: strings.TrimPrefix(strings.TrimPrefix(cwd, "."), "/")}
	}
	return splitRoot(cwd)
}

func splitRoot(v string) symPath {
	switch {
	case strings.HasPrefix(v, "~"):
		rest := ""
		if i := strings.IndexByte(v, '/'); i >= 0 {
			rest = v[i+1:]
		}
		return symPath{root: "~", rel: rest, home: true}
	case strings.HasPrefix(v, "/"):
		return symPath{root: "/", rel: strings.TrimLeft(v, "/")}
	}
	return symPath{rel: v}
}

func cleanRel(root, rel string) string {
	if rel == "" {
		return "."
	}
	c := path.Clean(rel)
	if root == "/" {
		c = strings.TrimPrefix(path.Clean("/"+c), "/")
		if c == "" {
			c = "."
		}
	}
	return c
}

// climbs reports whether rel is its root or above it ("..", "../..").
func climbs(rel string) bool {
	if rel == "." {
		return true
	}
	for _, part := range strings.Split(rel, "/") {
		if part != ".." {
			return false
		}
	}
	return true
}

func hasGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// globProbes are names a pattern that matches "everything" matches.
var globProbes = []string{"a", "Makefile", "src", "x.y", "_", "0", "node_modules"}

// matchesAll reports whether pattern matches any ordinary name.
func matchesAll(pattern string) bool {
	if !hasGlob(pattern) {
		return false
	}
	pattern = bashPattern(pattern)
	for _, p := range globProbes {
		if ok, err := path.Match(pattern, p); !ok || err != nil {
			return false
		}
	}
	return true
}

// criticalName reports whether a last path element is, or as a glob can
// match, a name whose removal loses a repository or everything: .git, or
// any name at all.
func criticalName(base string) bool {
	if base == ".git" {
		return true
	}
	if !hasGlob(base) {
		return false
	}
	return globMatch(base, ".git") || matchesAll(base)
}

// globMatch reports whether pattern can match name as bash matches file
// names: a leading dot must be matched by a dot written first ("." or a
// bracket holding it), as with shopt -s dotglob a script may set.
func globMatch(pattern, name string) bool {
	if strings.HasPrefix(name, ".") && !strings.HasPrefix(pattern, ".") {
		if !strings.HasPrefix(pattern, "[") {
			return false
		}
		end := strings.IndexByte(pattern[1:], ']')
		if end < 0 || !strings.Contains(pattern[1:end+1], ".") {
			return false
		}
	}
	ok, err := path.Match(bashPattern(pattern), name)
	return ok || err != nil // a pattern Go cannot read: assume it matches
}

// bashPattern turns bash's negated bracket "[!...]" into Go's "[^...]".
func bashPattern(p string) string {
	if !strings.Contains(p, "[!") {
		return p
	}
	return strings.ReplaceAll(p, "[!", "[^")
}

// protectedHome are directories under the home directory whose removal
// or replacement is never ordinary work.
var protectedHome = map[string]bool{".ssh": true, ".gnupg": true}

// critical reports whether removing p (recursively) could delete critical
// data: the root, a top-level directory, the home directory or anything
// under it written as ~ or $HOME (seed 001), the workspace or a directory
// above it, a .git directory, or a glob that can match those.
func critical(p symPath, seedHome bool) bool {
	parts := strings.Split(p.rel, "/")
	for _, part := range parts {
		if part == ".git" || (hasGlob(part) && criticalName(part) && part != "*" && !matchesAll(part)) {
			return true // .git, or a glob that can match .git, anywhere on the way
		}
	}
	base := parts[len(parts)-1]
	if criticalName(base) && len(parts) > 0 {
		// a glob of everything: critical where everything is critical
		if base == ".git" {
			return true
		}
		if globMatch(base, ".git") {
			return true
		}
		parent := symPath{root: p.root, rel: cleanRel(p.root, path.Dir(p.rel))}
		if critical(parent, false) || parent.root == "" && parent.rel == "." {
			return true
		}
	}
	switch p.root {
	case "/":
		dir := p.rel
		if hasGlob(parts[0]) {
			return true
		}
		if len(parts) == 2 && (parts[0] == "home" || parts[0] == "Users") {
			return true // someone's home directory
		}
		return dir == "." || !strings.Contains(dir, "/")
	case "~":
		if seedHome && p.home {
			return true
		}
		return climbs(p.rel) || protectedHome[parts[0]] || strings.HasPrefix(p.rel, "../")
	case ".":
		return climbs(p.rel)
	}
	return p.rel == "." || climbs(p.rel)
}
