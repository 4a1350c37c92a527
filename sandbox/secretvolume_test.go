//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEscapeSecretVolume: a secret laid out as Kubernetes mounts a Secret
// (token -> ..data/token, ..data -> ..2026_01_01, the file in that
// directory), hidden by its own path as serve's --token-file is, stays
// unreadable under every path that leads to it, behind the namespace wall
// and in the fallback without namespaces (what a pod with the
// RuntimeDefault seccomp profile gets), also through a link the command
// finds or makes in the workspace.
func TestEscapeSecretVolume(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		name := "wall"
		if fallback {
			name = "fallback"
		}
		t.Run(name, func(t *testing.T) {
			if fallback {
				forceFallback = true
				defer func() { forceFallback = false }()
			}
			mount := filepath.Join(t.TempDir(), "secrets", "agentexec")
			version := filepath.Join(mount, "..2026_01_01")
			if err := os.MkdirAll(version, 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(version, "token"), []byte("TOKEN-VALUE"), 0o644)
			os.WriteFile(filepath.Join(version, "other"), []byte("not secret\n"), 0o644)
			os.Symlink("..2026_01_01", filepath.Join(mount, "..data"))
			os.Symlink("..data/token", filepath.Join(mount, "token"))
			os.Symlink("..data/other", filepath.Join(mount, "other"))
			token := filepath.Join(mount, "token")

			ws := t.TempDir()
			exe, _ := os.Executable()
			s, err := Profile("workspace-write", ProfileOptions{Workspace: ws, ReadOnly: []string{filepath.Dir(exe)}, Secrets: []string{token}, Cache: "-"})
			if err != nil {
				t.Fatal(err)
			}
			s.BestEffort = true
			os.Symlink(mount, filepath.Join(ws, "found-link"))
			r := run(t, s, ws, fmt.Sprintf(`for p in %[1]s/token %[1]s/..data/token %[1]s/..2026_01_01/token found-link/token found-link/..data/token; do
  cat "$p" 2>/dev/null; echo " <- $p"
done
ln -s %[1]s/..2026_01_01 made-link && cat made-link/token 2>/dev/null; echo " <- made-link"
cat %[1]s/other`, mount))
			o := out(r)
			if strings.Contains(o, "TOKEN-VALUE") {
				t.Errorf("the hidden token was read:\n%s", o)
			}
			if strings.Count(o, " <- ") != 6 {
				t.Errorf("not every attempt ran:\n%s", o)
			}
			// The wall hides the whole tree the link leads to only where it
			// must; the fallback keeps the rest of the volume readable.
			if fallback && !strings.Contains(o, "not secret") {
				t.Errorf("a file beside the hidden one became unreadable:\n%s", o)
			}
		})
	}
}
