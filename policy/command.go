package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultTrustedDirs are the directories in which a program allowed by
// bare name must live for the allow to apply.
var DefaultTrustedDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// CommandPolicy is seed 004's executable policy: allow and deny lists of
// programs, and what to do with programs in neither.
//
// An entry is a bare name ("rm") or an absolute path ("/usr/bin/rm").
//
//   - A denied name matches the executable as given, the file it resolves
//     to and the file that resolves to after symlinks: "rm" denies "rm",
//     "/bin/rm", "./rm" and a symlink to /usr/bin/rm alike. A denied path
//     matches the executable's resolved path.
//   - An allowed name applies only when the program resolves to a file
//     directly inside one of TrustedDirs, so "ls" does not allow
//     /tmp/evil/ls nor an "ls" found through a PATH the caller changed.
//     An allowed path matches the resolved path exactly.
//   - Deny beats allow. A program in neither list is allowed, or must be
//     approved when RequireApprovalForUnknown is set.
//
// The zero value allows everything. CommandPolicy is a guardrail for an
// agent's mistakes: a copy of a denied program under another name is not
// recognised, which is what the sandbox is for.
type CommandPolicy struct {
	Allow                     []string
	Deny                      []string
	RequireApprovalForUnknown bool
	// TrustedDirs replaces DefaultTrustedDirs when not nil.
	TrustedDirs []string
}

// Validate reports the first entry that is neither a bare name nor an
// absolute path.
func (p *CommandPolicy) Validate() error {
	for _, list := range []struct {
		name    string
		entries []string
	}{{"allow_executables", p.Allow}, {"deny_executables", p.Deny}} {
		for i, e := range list.entries {
			if e == "" || strings.ContainsRune(e, 0) || (strings.Contains(e, "/") && !filepath.IsAbs(e)) {
				return fmt.Errorf("policy: %s[%d] = %q: use a program name such as \"rm\" or an absolute path such as \"/usr/bin/rm\"", list.name, i, e)
			}
		}
	}
	return nil
}

// Check applies the policy to r (r.Executable and r.ResolvedPath).
func (p *CommandPolicy) Check(r Request) Decision {
	if r.Executable == "" {
		return Allowed
	}
	given := r.Executable
	names := []string{filepath.Base(given)}
	if r.ResolvedPath != "" {
		names = append(names, filepath.Base(r.ResolvedPath))
	}
	for _, e := range p.Deny {
		if matchDeny(e, given, r.ResolvedPath, names) {
			return Decision{
				Verdict:     Deny,
				Rule:        "deny_executables",
				Reason:      fmt.Sprintf("%q matches %q in deny_executables", given, e),
				Alternative: "Do not run this program; find another way, or ask the user to change the policy.",
			}
		}
	}
	for _, e := range p.Allow {
		if p.matchAllow(e, given, r.ResolvedPath) {
			return Decision{Verdict: Allow, Rule: "allow_executables", Reason: fmt.Sprintf("%q matches %q in allow_executables", given, e)}
		}
	}
	if p.RequireApprovalForUnknown {
		return Decision{
			Verdict:     Ask,
			Rule:        "require_approval_for_unknown",
			Reason:      fmt.Sprintf("%q is not in allow_executables", given),
			Alternative: "Use an allowed program, or ask the user to add this one to allow_executables.",
		}
	}
	return Allowed
}

func matchDeny(entry, given, resolved string, names []string) bool {
	if filepath.IsAbs(entry) {
		entry = filepath.Clean(entry)
		return entry == filepath.Clean(given) || (resolved != "" && (entry == resolved || evalOrSelf(entry) == resolved))
	}
	return slices.Contains(names, entry)
}

func (p *CommandPolicy) matchAllow(entry, given, resolved string) bool {
	if resolved == "" {
		return false
	}
	if filepath.IsAbs(entry) {
		return filepath.Clean(entry) == resolved || evalOrSelf(entry) == resolved
	}
	if filepath.Base(given) != entry {
		return false
	}
	dirs := p.TrustedDirs
	if dirs == nil {
		dirs = DefaultTrustedDirs
	}
	for _, d := range dirs {
		if filepath.Dir(resolved) == evalOrSelf(d) || filepath.Dir(resolved) == filepath.Clean(d) {
			return true
		}
	}
	return false
}

// evalOrSelf returns path with symlinks evaluated, or path cleaned when it
// cannot be evaluated.
func evalOrSelf(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return filepath.Clean(path)
}
