//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentexec/agentexec/capture"
	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/runner"
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

// helperNested runs inside a sandbox, as agentexec runs inside a pod whose
// seccomp profile refuses new namespaces: it prints what the probe and
// status find, then runs a command under a best-effort workspace-write
// spec for the workspace args[0].
func helperNested(args []string) int {
	ws := args[0]
	fmt.Printf("userns=%v\n", Probe().UserNS)
	for _, l := range Status() {
		if l.Name == "namespaces" {
			fmt.Printf("namespaces=%s\n", l.State)
		}
	}
	s, err := Profile("workspace-write", ProfileOptions{Workspace: ws, Cache: "-", BestEffort: true})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Printf("label=%s\n", s.Label())
	w, err := s.Wrapper(Options{})
	if err != nil {
		fmt.Printf("wrapper: %v\n", err)
		return 1
	}
	res, err := runner.Run(context.Background(), runner.Spec{
		Command: "echo inside > nested.txt && echo wrote; touch /usr/agentexec-nested 2>/dev/null || echo usr: denied; echo $AGENTEXEC_SANDBOX",
		Dir:     ws, Env: runner.SafeEnv(), Wrap: w, Timeout: 20 * time.Second, Combined: capture.Limit{Max: 1 << 16},
	})
	if err != nil {
		fmt.Printf("run: %v\n", err)
		return 1
	}
	fmt.Print(out(res))
	return 0
}

// TestEscapeNestedFallback: inside the sandbox (whose seccomp filter
// refuses new namespaces, as a pod's RuntimeDefault profile does for a
// non-root user) the probe measures that namespaces are refused, status
// says they are missing, and a best-effort profile runs on Landlock and
// seccomp, its label naming what was skipped.
func TestEscapeNestedFallback(t *testing.T) {
	ws, s := boxed(t, "workspace-write")
	argv, helper := proctest.HelperArgv(t, "nested", ws)
	o := out(run(t, s, ws, strings.Join(quoteAll(argv), " ")+" 2>&1", helper))
	for _, want := range []string{"userns=false\n", "namespaces=missing\n", "label=workspace-write (best effort; skipped: namespaces cannot be created", "wrote\n", "usr: denied\n", "workspace-write\n"} {
		if !strings.Contains(o, want) {
			t.Errorf("missing %q in:\n%s", want, o)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "nested.txt")); err != nil || string(b) != "inside\n" {
		t.Errorf("the nested command's write: %q %v", b, err)
	}
}
