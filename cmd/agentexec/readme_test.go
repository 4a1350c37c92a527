//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// buildAgentexec builds agentexec and agentexec-sandbox from this tree
// once for all the tests, and returns their directory.
func buildAgentexec(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "agentexec-bin-"); buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", binDir+"/", "github.com/agentexec/agentexec/cmd/...").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// readmeSkipped are the README's commands that this test does not run,
// each with the reason. Every other command in a ```sh block runs. An
// entry that no longer matches a README command fails the test, so the
// list stays as true as the README.
var readmeSkipped = map[string]string{
	"go test ./...": "runs this test",
	"claude mcp add agentexec -- agentexec mcp":                                                                                                                       "needs Claude Code, and changes its configuration",
	"claude mcp add agentexec-all -- agentexec mcp --tools bash,exec,shell.exec --name shell.exec=shell_exec":                                                         "needs Claude Code, and changes its configuration",
	`claude mcp add --transport http agentexec http://127.0.0.1:8765/mcp --header "Authorization: Bearer $(cat /run/user/1000/agentexec/serve-127.0.0.1_8765.token)"`: "needs Claude Code and a running serve, and changes Claude Code's configuration",
	"agentexec jobs logs ID -f": "ID stands for a job id; the test runs them with the ids of the jobs the README started",
	"agentexec jobs kill ID":    "ID stands for a job id; the test runs them with the ids of the jobs the README started",
	"agentexec jobs rm ID":      "ID stands for a job id; the test runs them with the ids of the jobs the README started",

	// Deploying: Docker, Kubernetes and a checkout.
	"docker build -t agentexec .": "needs Docker and its daemon (deploy/image's test checks the image without them)",
	`docker run --rm -p 8765:8765 -v "$PWD/token:/var/run/secrets/agentexec/token:ro" -v "$PWD:/workspace" agentexec`: "needs Docker, its daemon and the image",
	"cd deploy/image && go run . -o /tmp/agentexec-oci -tar /tmp/agentexec.tar":                                       "runs in a checkout; .ci/run runs deploy/image's test, which builds the same",
	"kubectl exec deploy/agentexec -- agentexec sandbox status":                                                       "needs a Kubernetes cluster running the manifests",
	`kubectl create secret generic agentexec-token --from-literal=token="$(openssl rand -hex 32)"`:                    "needs a Kubernetes cluster",
	"kubectl apply -f deploy/kubernetes/deployment/":                                                                  "needs a Kubernetes cluster (.ci/run validates the manifests without one)",
}

// readmeCommand is one command of a ```sh block, with the exit status its
// comment documents: "(exit N)" or "exit N", else 0.
type readmeCommand struct {
	line    int
	command string
	exit    int
}

var exitDoc = regexp.MustCompile(`\bexit (\d+)\b`)

// readmeCommands reads the commands of the README's ```sh blocks.
func readmeCommands(t *testing.T, path string) []readmeCommand {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []readmeCommand
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```"):
			in = !in && strings.TrimPrefix(l, "```") == "sh"
			continue
		case !in || strings.TrimSpace(l) == "":
			continue
		}
		command, comment := splitComment(l)
		c := readmeCommand{line: n, command: command}
		if m := exitDoc.FindStringSubmatch(comment); m != nil {
			c.exit, _ = strconv.Atoi(m[1])
		}
		out = append(out, c)
	}
	return out
}

// splitComment cuts a shell line at its first # outside quotes that
// starts a word.
func splitComment(l string) (command, comment string) {
	var quote rune
	for i, r := range l {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return strings.TrimSpace(l[:i]), l[i+1:]
		}
	}
	return strings.TrimSpace(l), ""
}

// TestReadmeCommands runs every command in the README's ```sh blocks that
// needs no network, terminal or other program (see readmeSkipped), with
// agentexec built from this tree on PATH, in a scratch directory with no
// configuration, and checks that it exits as the README documents.
func TestReadmeCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building agentexec and running the README's commands")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := buildAgentexec(t)
	home := t.TempDir()
	work := filepath.Join(home, "work")
	os.Mkdir(work, 0o755)
	env := []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "XDG_STATE_HOME=" + filepath.Join(home, "state"),
		"XDG_RUNTIME_DIR=" + filepath.Join(home, "run"), "LANG=C.UTF-8",
	}
	used := map[string]bool{}
	ran := 0
	for _, c := range readmeCommands(t, "../../README.md") {
		if why, ok := readmeSkipped[c.command]; ok {
			used[c.command] = true
			t.Logf("README.md:%d: skipped (%s): %s", c.line, why, c.command)
			continue
		}
		// The README's first commands run agentexec with go run from a
		// checkout; here the binary just built stands in.
		command := strings.Replace(c.command, "go run ./cmd/agentexec", "agentexec", 1)
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		cmd := exec.CommandContext(cctx, "bash", "-c", command)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		ccancel()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Errorf("README.md:%d: %s: %v", c.line, c.command, err)
			continue
		}
		ran++
		if code != c.exit {
			t.Errorf("README.md:%d: %s\nexited %d, the README documents %d; output:\n%s", c.line, c.command, code, c.exit, out)
		}
	}
	for k := range readmeSkipped {
		if !used[k] {
			t.Errorf("readmeSkipped names %q, which is no longer in the README", k)
		}
	}
	if ran < 20 {
		t.Errorf("ran only %d commands of the README", ran)
	}
	// The README's job commands, with the ids of the jobs it started:
	// logs -f waits for each to end (so that nothing outlives the test),
	// then rm removes it.
	agentexec := func(args ...string) string {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "agentexec"), args...)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("agentexec %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, l := range strings.Split(agentexec("jobs"), "\n")[1:] {
		if id, _, _ := strings.Cut(l, " "); id != "" {
			agentexec("jobs", "logs", id, "-f")
			agentexec("jobs", "rm", id)
		}
	}
}
