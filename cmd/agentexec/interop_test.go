//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTypeScriptClient drives `agentexec mcp` with the official TypeScript
// MCP SDK from the npm registry. .ci/run installs the SDK and names its
// directory in $AGENTEXEC_TS_SDK_DIR. Without it the test installs the SDK
// itself, and is skipped, saying why, when node or npm is missing or the
// registry cannot be reached. When the test is expected to run (the
// directory is named, or CI=true), each of those is a failure instead.
func TestTypeScriptClient(t *testing.T) {
	sdk := os.Getenv("AGENTEXEC_TS_SDK_DIR")
	required := sdk != "" || os.Getenv("CI") == "true"
	skip := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if required {
			t.Fatalf("%s (this interop test must run here: AGENTEXEC_TS_SDK_DIR is set or CI=true)", msg)
		}
		t.Skip(msg)
	}
	node, err1 := exec.LookPath("node")
	npm, err2 := exec.LookPath("npm")
	if err1 != nil || err2 != nil {
		skip("node and npm are needed to run the TypeScript SDK client; install them to run this interop test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if sdk == "" {
		if testing.Short() {
			skip("-short: not installing the TypeScript MCP SDK from the npm registry; set AGENTEXEC_TS_SDK_DIR to an installed copy to run this test")
		}
		sdk = t.TempDir()
		ictx, icancel := context.WithTimeout(ctx, 2*time.Minute)
		defer icancel()
		install := exec.CommandContext(ictx, npm, "install", "--no-audit", "--no-fund", "--fetch-retries=1", "--fetch-timeout=30000",
			"--prefix", sdk, "@modelcontextprotocol/sdk@1")
		if out, err := install.CombinedOutput(); err != nil {
			skip("the TypeScript MCP SDK could not be installed from the npm registry (%v; is it reachable?): %s\n"+
				"Set AGENTEXEC_TS_SDK_DIR to a directory where `npm install --prefix DIR @modelcontextprotocol/sdk@1` was run to use an installed copy",
				err, npmError(string(out)))
		}
	} else if _, err := os.Stat(filepath.Join(sdk, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Fatalf("AGENTEXEC_TS_SDK_DIR=%s holds no @modelcontextprotocol/sdk (%v); install it with npm install --prefix %s @modelcontextprotocol/sdk@1", sdk, err, sdk)
	}
	bin := filepath.Join(buildAgentexec(t), "agentexec")
	for _, script := range []string{"testdata/interop.mjs", "testdata/interop_sessions.mjs"} {
		work := t.TempDir()
		out, err := exec.CommandContext(ctx, node, script, sdk, bin, work).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "interop ok") {
			t.Fatalf("the TypeScript client failed (%s): %v\n%s", script, err, out)
		}
	}
}

// npmError picks the lines of npm's output that say what went wrong (its
// error code and the failed request), or else its last lines.
func npmError(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "npm error code ") || strings.Contains(l, "request to ") || strings.Contains(l, "npm error 404") {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	if len(keep) == 0 {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		keep = lines[max(0, len(lines)-5):]
	}
	return strings.Join(keep, "\n")
}
