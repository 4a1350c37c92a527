//go:build linux

package cli

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentexec/agentexec/internal/proctest"
)

// TestServeAuthByDefault: a real `agentexec serve` with no token given
// generates one into a 0600 file of a private directory, prints the
// client line, and refuses requests without it, also from another local
// user, who cannot read the file either.
func TestServeAuthByDefault(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	argv, helper := proctest.HelperArgv(t, "cli", "serve", "--listen", "127.0.0.1:0", "--state-dir", state, "--audit-log", "off", "--cwd", dir)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helper, "GORACE=atexit_sleep_ms=0", "AGENTEXEC_TOKEN=")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	var url, tokenFile, clientLine string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		if m := regexp.MustCompile(`serving MCP on (http://\S+)`).FindStringSubmatch(line); m != nil {
			url = m[1]
		}
		if m := regexp.MustCompile(`bearer token in (\S+) `).FindStringSubmatch(line); m != nil {
			tokenFile = m[1]
		}
		if strings.Contains(line, "claude mcp add") {
			clientLine = line
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	if url == "" || tokenFile == "" || !strings.Contains(clientLine, url) || !strings.Contains(clientLine, "Authorization: Bearer $(cat "+tokenFile+")") {
		t.Fatalf("url %q, file %q, line %q", url, tokenFile, clientLine)
	}
	if !strings.HasPrefix(tokenFile, state) {
		t.Errorf("token file %s is not in the private directory %s", tokenFile, state)
	}
	fi, err := os.Stat(tokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	if di, _ := os.Stat(filepath.Dir(tokenFile)); di.Mode().Perm() != 0o700 {
		t.Errorf("its directory has mode %v", di.Mode().Perm())
	}
	b, _ := os.ReadFile(tokenFile)
	token := strings.TrimSpace(string(b))
	if len(token) != 64 {
		t.Fatalf("token %q", token)
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	post := func(auth string) int {
		req, _ := http.NewRequest("POST", url, strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
	if code := post("Bearer " + token); code != http.StatusOK {
		t.Errorf("the token: %d", code)
	}
	http.DefaultClient.CloseIdleConnections()

	// Another local user.
	if os.Getuid() != 0 {
		t.Skip("the second-user half needs root (to run as uid 65534)")
	}
	asNobody := func(script string) (string, error) {
		c := exec.Command("bash", "-c", script)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		c.Dir = "/"
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if out, err := asNobody("cat " + tokenFile); err == nil {
		t.Errorf("uid 65534 read the token: %q", out)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	hostname, port, _ := strings.Cut(host, ":")
	out, _ := asNobody(fmt.Sprintf(`exec 3<>/dev/tcp/%s/%s; printf 'POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%%s' '%s' >&3; head -1 <&3`, hostname, port, host, len(init), init))
	if !strings.Contains(out, " 401 ") {
		t.Errorf("uid 65534 without the token got %q", out)
	}
	// The token file goes with the server.
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if _, err := os.Stat(tokenFile); err == nil {
		t.Error("the token file outlived the server")
	}
}

// TestServeAuthRefusals: --no-auth beyond loopback, a weak token, and no
// token beyond loopback are refused with the reason; --no-auth on
// loopback is announced.
func TestServeAuthRefusals(t *testing.T) {
	dir := t.TempDir()
	weak := filepath.Join(dir, "weak")
	os.WriteFile(weak, []byte("# the team's token\nhunter2\n"), 0o600)
	t.Setenv("AGENTEXEC_TOKEN", "")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:0", "--no-auth"}, "--no-auth is refused on 0.0.0.0:0"},
		{[]string{"--listen", "127.0.0.1:0", "--token-file", weak}, "too weak"},
		{[]string{"--listen", "0.0.0.0:0"}, "not a loopback address; give a bearer token"},
	}
	for _, c := range cases {
		code, _, stderr := runCLIStdin(t, "", append([]string{"serve", "--state-dir", filepath.Join(dir, "s"), "--audit-log", "off"}, c.args...)...)
		if code != ExitFailed || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: %d %q", c.args, code, stderr)
		}
	}
	// --no-auth on loopback starts, and says what it means.
	argv, helper := proctest.HelperArgv(t, "cli", "serve", "--listen", "127.0.0.1:0", "--no-auth", "--state-dir", filepath.Join(dir, "s"), "--audit-log", "off", "--cwd", dir)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helper, "GORACE=atexit_sleep_ms=0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	warned := false
	deadline := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	for sc.Scan() {
		if strings.Contains(sc.Text(), "--no-auth: every local user can run commands") {
			warned = true
		}
		if strings.Contains(sc.Text(), "serving MCP") {
			break
		}
	}
	deadline.Stop()
	cmd.Process.Signal(syscall.SIGTERM)
	go io.Copy(io.Discard, stderr)
	cmd.Wait()
	if !warned {
		t.Error("--no-auth was not announced")
	}
}
