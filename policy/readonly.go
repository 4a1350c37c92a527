package policy

import (
	"strings"

	"github.com/agentexec/agentexec/safety"
)

// readOnlyPrograms are the commands the strict profile allows, each with
// a check of its arguments (nil: any arguments).
var readOnlyPrograms = map[string]func(args []string) bool{
	"ls": nil, "cat": nil, "head": nil, "tail": nil, "wc": nil, "pwd": nil, "echo": nil, "printf": nil,
	"grep": nil, "egrep": nil, "fgrep": nil, "rg": nil, "cut": nil, "tr": nil, "uniq": nil, "diff": nil,
	"cmp": nil, "file": nil, "stat": nil, "du": nil, "df": nil, "which": nil, "whoami": nil, "id": nil,
	"uname": nil, "date": nil, "printenv": nil, "true": nil, "false": nil, "test": nil, "[": nil,
	"basename": nil, "dirname": nil, "realpath": nil, "readlink": nil, "tree": nil, "jq": nil,
	"md5sum": nil, "sha1sum": nil, "sha256sum": nil, "nl": nil, "column": nil, "comm": nil, "hostname": nil,
	"env":  func(a []string) bool { return len(a) == 0 }, // env with a command runs it (and is unwrapped)
	"sort": func(a []string) bool { return !hasFlag(a, "-o", "--output") },
	"sed":  func(a []string) bool { return !hasFlag(a, "-i", "--in-place") },
	"find": func(a []string) bool {
		return !hasWord(a, "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls")
	},
	"git": gitReadOnly,
}

// gitReadOnly allows git subcommands that only read.
func gitReadOnly(a []string) bool {
	i := 0
	for i < len(a) && strings.HasPrefix(a[i], "-") {
		if a[i] == "-C" || a[i] == "-c" {
			i++
		}
		i++
	}
	if i >= len(a) {
		return true
	}
	sub, rest := a[i], a[i+1:]
	switch sub {
	case "status", "log", "diff", "show", "rev-parse", "ls-files", "ls-tree", "blame", "grep", "describe", "shortlog", "cat-file", "merge-base", "reflog", "whatchanged":
		return true
	case "branch":
		return !hasFlag(rest, "-d", "-D", "-m", "-M", "-c", "-C", "--delete", "--move", "--copy", "--set-upstream-to", "-u", "--unset-upstream", "-f", "--force", "--edit-description") && len(positional(rest)) == 0
	case "tag":
		return len(rest) == 0 || hasFlag(rest, "-l", "--list")
	case "remote":
		return len(rest) == 0 || (len(rest) == 1 && (rest[0] == "-v" || rest[0] == "show"))
	case "config":
		return hasFlag(rest, "--get", "--get-all", "--list", "-l", "--get-regexp")
	case "stash":
		return len(rest) > 0 && (rest[0] == "list" || rest[0] == "show")
	}
	return false
}

func positional(a []string) []string {
	var out []string
	for _, x := range a {
		if !strings.HasPrefix(x, "-") {
			out = append(out, x)
		}
	}
	return out
}

// hasFlag reports whether a holds one of flags, also as part of a short
// cluster ("-ni" holds "-i") or with "=value".
func hasFlag(a []string, flags ...string) bool {
	for _, x := range a {
		for _, f := range flags {
			switch {
			case x == f, strings.HasPrefix(x, f+"="):
				return true
			case len(f) == 2 && strings.HasPrefix(x, "-") && !strings.HasPrefix(x, "--") && strings.Contains(x[1:], f[1:]):
				return true
			}
		}
	}
	return false
}

func hasWord(a []string, words ...string) bool {
	for _, x := range a {
		for _, w := range words {
			if x == w {
				return true
			}
		}
	}
	return false
}

// readOnly reports whether the strict profile allows cmd without asking.
func readOnly(cmd *safety.Command) bool {
	check, ok := readOnlyPrograms[cmd.Name]
	if !ok {
		return false
	}
	for _, w := range cmd.Wrappers {
		if w == "sudo" || w == "doas" {
			return false // another user's rights
		}
	}
	for _, r := range cmd.Redirects {
		switch r.Op {
		case ">", ">>", ">|", "&>", "&>>", "<>":
			if r.Target.Value != "/dev/null" {
				return false
			}
		}
	}
	args := make([]string, 0, len(cmd.Args)-1)
	for _, w := range cmd.Args[1:] {
		if w.Dynamic {
			return false
		}
		args = append(args, w.Value)
	}
	return check == nil || check(args)
}
