//go:build linux

package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTypeScriptClient2026 drives `agentexec serve` over HTTP with the
// official TypeScript MCP client (@modelcontextprotocol/client 2.x) pinned
// to protocol 2026-07-28 (stateless, conversation handles). .ci/run
// installs the client and names its directory in $AGENTEXEC_TS_CLIENT_DIR;
// without it the test installs it, and it is skipped only when node or
// npm is absent.
func TestTypeScriptClient2026(t *testing.T) {
	node, err1 := exec.LookPath("node")
	npm, err2 := exec.LookPath("npm")
	if err1 != nil || err2 != nil {
		t.Skip("node and npm are needed to run the TypeScript client; install them to run this interop test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := os.Getenv("AGENTEXEC_TS_CLIENT_DIR")
	if dir == "" {
		dir = t.TempDir()
		install := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--silent", "--prefix", dir, "@modelcontextprotocol/client@2")
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("npm install @modelcontextprotocol/client: %v\n%s", err, out)
		}
	}
	bin := filepath.Join(t.TempDir(), "agentexec")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	work := t.TempDir()
	token := strings.Repeat("0f1e2d3c4b5a6978", 4)
	tokenFile := filepath.Join(work, "token")
	os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
	serve := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile, "--tools", "bash",
		"--audit-log", "off", "--cwd", work, "--state-dir", filepath.Join(work, "state"))
	serve.Env = append(os.Environ(), "XDG_CONFIG_HOME="+work)
	stderr, _ := serve.StderrPipe()
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		serve.Process.Signal(syscall.SIGTERM)
		serve.Wait()
	}()
	var url string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := regexp.MustCompile(`serving MCP on (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if url == "" {
		t.Fatal("agentexec serve did not say where it serves")
	}
	out, err := exec.CommandContext(ctx, node, "testdata/interop2026.mjs", dir, url, token).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "interop 2026 ok") {
		t.Fatalf("the TypeScript client failed: %v\n%s", err, out)
	}
}
