package sandbox

import (
	"regexp"
	"strings"
	"sync"

	"github.com/agentexec/agentexec/runner"
)

// deniedLine finds a path in an error line that says permission denied,
// read-only file system or no such file.
var deniedLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(~?/[^\s:'"()\x60,‘’“”]*)[^\n]*?(permission denied|read-only file system|operation not permitted|EACCES|EROFS)|(permission denied|read-only file system|operation not permitted|EACCES|EROFS)[^\n]*?(~?/[^\s:'"()\x60,‘’“”]+)`)
}) // compiled on first use: the trampoline never needs it

// noteDenied returns one line naming the profile and what it allows, for
// the end of a failed run's output, when the output blames permissions on
// a path the profile does not make writable; "" otherwise.
func noteDenied(s *Spec, plan *nsPlan, res *runner.Result, text []byte) string {
	if res.ExitCode == 0 || res.Outcome != runner.Exited {
		return ""
	}
	if len(text) == 0 {
		return ""
	}
	path := ""
	for _, m := range deniedLine().FindAllSubmatch(text, 8) {
		p := string(m[1])
		if p == "" {
			p = string(m[4])
		}
		if strings.HasPrefix(p, "~") && s.HomeDir != "" {
			p = s.HomeDir + p[1:]
		}
		if p == "" || p == "/" || allowed(p, plan.writable) || strings.HasPrefix(p, "/dev/") || strings.HasPrefix(p, "/proc/") {
			continue
		}
		path = p
		break
	}
	if path == "" {
		return ""
	}
	shown := make([]string, 0, len(plan.writable))
	for _, w := range plan.writable {
		if w == s.HomeDir {
			w += " (empty, per run)"
		}
		shown = append(shown, w)
	}
	return "[agentexec] " + path + " is outside what the " + s.label() + " sandbox profile lets commands write (" + strings.Join(shown, ", ") +
		"; the system directories are read-only, other paths and secrets are not visible): work in the workspace, or ask for a profile or path that allows it.\n"
}

func allowed(p string, dirs []string) bool {
	for _, d := range dirs {
		if within(p, d) {
			return true
		}
	}
	return false
}
