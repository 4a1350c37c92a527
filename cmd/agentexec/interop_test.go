//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTypeScriptClient drives `agentexec mcp` with the official TypeScript
// MCP SDK from the npm registry. .ci/run installs the SDK and names its
// directory in $AGENTEXEC_TS_SDK_DIR; without it the test installs the SDK
// itself, and it is skipped only when node or npm is absent.
func TestTypeScriptClient(t *testing.T) {
	node, err1 := exec.LookPath("node")
	npm, err2 := exec.LookPath("npm")
	if err1 != nil || err2 != nil {
		t.Skip("node and npm are needed to run the TypeScript SDK client; install them to run this interop test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sdk := os.Getenv("AGENTEXEC_TS_SDK_DIR")
	if sdk == "" {
		sdk = t.TempDir()
		install := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--silent", "--prefix", sdk, "@modelcontextprotocol/sdk@1")
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("npm install @modelcontextprotocol/sdk: %v\n%s", err, out)
		}
	}
	bin := filepath.Join(t.TempDir(), "agentexec")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, script := range []string{"testdata/interop.mjs", "testdata/interop_sessions.mjs"} {
		work := t.TempDir()
		out, err := exec.CommandContext(ctx, node, script, sdk, bin, work).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "interop ok") {
			t.Fatalf("the TypeScript client failed (%s): %v\n%s", script, err, out)
		}
	}
}
