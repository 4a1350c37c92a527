package egress

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestRemoteHost(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/agentexec/agentexec.git": "github.com:443",
		"http://git.corp.example:8080/x.git":         "git.corp.example:8080",
		"git@github.com:agentexec/agentexec.git":     "github.com:22",
		"ssh://git@gitlab.example.com:2222/a/b.git":  "gitlab.example.com:2222",
		"github.com:a/b":           "github.com:22",
		"/srv/git/repo.git":        "",
		"../relative/repo":         "",
		"file:///srv/git/repo.git": "",
		"./dir:with/colon":         "",
	} {
		if got := remoteHost(in); got != want {
			t.Errorf("remoteHost(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"https://registry.npmjs.org/\n":           "registry.npmjs.org:443",
		"sparse+https://index.crates.io/":         "index.crates.io:443",
		"https://proxy.golang.org":                "proxy.golang.org:443",
		"direct":                                  "",
		"off":                                     "",
		"http://[::1]:4873/":                      "[::1]:4873",
		"https://user:pass@mirror.example/simple": "mirror.example:443",
	} {
		if got := hostOf(in); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGitRemotesPreset(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ws := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"remote", "add", "origin", "https://code.example/a/b.git"}, {"remote", "add", "up", "git@ssh.example:a/b.git"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	res := ResolvePresets(context.Background(), []string{"git-remotes"}, ws)
	if len(res) != 1 || strings.Join(res[0].Hosts, ",") != "code.example:443,ssh.example:22" {
		t.Errorf("git-remotes: %+v", res)
	}
}

func TestPackageManagersPreset(t *testing.T) {
	if testing.Short() {
		t.Skip("runs npm, go and pip")
	}
	res := ResolvePresets(context.Background(), []string{"package-managers"}, "")
	if len(res) != 1 {
		t.Fatalf("%+v", res)
	}
	t.Logf("package-managers: %+v", res[0])
	if _, err := exec.LookPath("go"); err == nil && !strings.Contains(strings.Join(res[0].Sources, ";"), "go") {
		t.Errorf("go is installed but not consulted: %+v", res[0])
	}
	for _, h := range res[0].Hosts {
		if _, err := ParseRule(h); err != nil {
			t.Errorf("preset host %q is no rule: %v", h, err)
		}
	}
}
