package host

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportDirection holds the architecture: each third-party module
// stays inside the package that owns it, and imports point from the entry
// points down to the engine, never back up.
func TestImportDirection(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not available")
	}
	out, err := exec.Command(goBin, "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/agentexec/agentexec/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/agentexec/agentexec/"
	owners := map[string][]string{ // module prefix -> the packages that may import it
		"github.com/spf13/":                {"internal/cli"},
		"mvdan.cc/sh/":                     {"safety"},
		"github.com/BurntSushi/":           {"config"},
		"github.com/modelcontextprotocol/": {"mcpserver"},
		"github.com/creack/pty":            {"terminal"},
		"github.com/prometheus/":           {"observe"},
		"go.opentelemetry.io/":             {"observe"},
	}
	// layer: a package may import only packages of a lower layer.
	layer := map[string]int{
		"capture": 0, "safety": 0, "internal/proctest": 0,
		"runner": 1, "policy": 1, "audit": 1, "egress": 1,
		"sandbox": 2, "terminal": 2,
		"jobs": 3, "tool": 3,
		"tool/exec": 4, "tool/bash": 4, "tool/execv": 4, "tool/shellexec": 4, "tool/jobtools": 4, "tool/unifiedexec": 4, "config": 4,
		"host": 5, "observe": 5, "mcpserver": 6, "internal/cli": 7, "cmd/agentexec": 8, "cmd/agentexec-sandbox": 8,
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		for _, imp := range fields[1:] {
			for prefix, allowed := range owners {
				if strings.HasPrefix(imp, prefix) && !contains(allowed, pkg) {
					t.Errorf("%s imports %s, which belongs to %v only", pkg, imp, allowed)
				}
			}
			if dep, ok := strings.CutPrefix(imp, mod); ok {
				lp, okp := layer[pkg]
				ld, okd := layer[dep]
				if !okp || !okd {
					t.Errorf("%s or %s has no layer in this test: add it", pkg, dep)
					continue
				}
				if ld >= lp {
					t.Errorf("%s (layer %d) imports %s (layer %d): imports must point down", pkg, lp, dep, ld)
				}
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
