package tool

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/agentexec/agentexec/policy"
	"github.com/agentexec/agentexec/safety"
)

// AllowRule returns the configuration text that would let req run without
// a person's approval, for a decision d that asked or refused: a
// [[rules]] entry (with a must_match example, so that the file checks it
// when it loads) or the key to change, ready to paste into agentexec.toml.
// A rule that switches a built-in rule applies to every tool.
// It returns "" when no configuration rule can allow the call (a missing
// tool grant, or a decision that allows). The text names no environment
// values, only what req already shows the model.
func AllowRule(req policy.Request, d policy.Decision) string {
	if d.Verdict == policy.Allow {
		return ""
	}
	toolLine := ""
	if req.Tool != "" {
		toolLine = "tools = [" + tomlString(req.Tool) + "]\n"
	}
	example := ""
	if req.Command != "" {
		example = "must_match = [" + tomlString(req.Command) + "]\n"
	}
	switch {
	case d.Rule == "" || d.Rule == "tool_grants" || d.Rule == "unknown_tool":
		return ""
	case d.Rule == "require_approval_for_unknown":
		return "[tools.shell_exec]\nallow_executables = [" + tomlString(path.Base(req.Executable)) + "]\n"
	case d.Rule == "deny_executables":
		return "# remove the entry matching " + tomlString(req.Executable) + " from tools.shell_exec.deny_executables\n"
	case d.Rule == policy.RuleStrict:
		prefix := strictPrefix(req, d)
		if prefix == "" {
			return ""
		}
		return "[[rules]]\nid = " + tomlString("allow-"+slug(prefix)) + "\naction = \"allow\"\nprefix = " + tomlString(prefix) + "\n" + toolLine + example
	case slices.Contains(policy.BuiltinIDs(), d.Rule):
		return "[[rules]]\nid = " + tomlString("allow-"+d.Rule) + "\naction = \"allow\"\nbuiltin = " + tomlString(d.Rule) + "\n" + example
	}
	return fmt.Sprintf("# the configured rule %s decides this: change its action to \"allow\", or narrow it\n", tomlString(d.Rule))
}

// strictPrefix is the program (and its first argument when that is a
// plain word) of the command the strict profile asked about: the command
// whose name starts d's reason, else the first command with a name.
func strictPrefix(req policy.Request, d policy.Decision) string {
	var rep *safety.Report
	switch {
	case req.Command != "":
		rep = safety.Analyze(req.Command, nil)
	case req.Executable != "":
		rep = safety.AnalyzeArgv(append([]string{req.Executable}, req.Args...), nil)
	default:
		return ""
	}
	name, _, _ := strings.Cut(d.Reason, " ")
	var pick *safety.Command
	for i := range rep.Commands {
		c := &rep.Commands[i]
		// A prefix rule reads its words with strings.Fields: a program
		// whose name holds white space cannot be one.
		if c.Dynamic || c.Name == "" || len(c.Args) == 0 || strings.ContainsFunc(c.Name, unicode.IsSpace) {
			continue
		}
		if pick == nil || (c.Name == name && pick.Name != name) {
			pick = c
		}
	}
	if pick == nil {
		return ""
	}
	prefix := pick.Name
	if len(pick.Args) > 1 {
		if a := pick.Args[1]; !a.Dynamic && a.Value != "" && !strings.HasPrefix(a.Value, "-") && !strings.ContainsFunc(a.Value, unicode.IsSpace) {
			prefix += " " + a.Value
		}
	}
	return prefix
}

// slug makes a rule id from free text: letters, digits and dashes.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimRight(b.String(), "-")
}

// tomlString writes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || r == unicode.ReplacementChar:
			b.WriteString(`\u` + fmt.Sprintf("%04X", r))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
