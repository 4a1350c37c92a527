//go:build linux

package cli

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentexec/agentexec/sandbox"
)

// TestAllowHost: --allow-host turns on the allowlist for one run; a host
// not named is refused with the reason, bad rules are refused before
// anything runs, and config show says where the mode came from.
func TestAllowHost(t *testing.T) {
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"run", "--allow-host", "*", "true"}, `--allow-host: egress rule "*": "*" would allow every host`},
		{[]string{"run", "--allow-host", "*.org", "true"}, `a wildcard over a whole top-level domain`},
		{[]string{"run", "--sandbox", "off", "--allow-host", "example.com", "true"}, `needs a sandbox profile`},
	} {
		if code, _, stderr := runCLI(t, c.args...); code != ExitFailed || !strings.Contains(stderr, c.stderr) {
			t.Errorf("%v: %d %q", c.args, code, stderr)
		}
	}
	code, stdout, _ := runCLI(t, "config", "show", "--allow-host", "registry.example:443")
	if code != 0 || !strings.Contains(stdout, `mode = "allowlist"`) || !strings.Contains(stdout, "flag --allow-host") || !strings.Contains(stdout, "#   allow registry.example:443") {
		t.Errorf("config show: %d\n%s", code, stdout)
	}
	if _, err := exec.LookPath("curl"); err != nil || !sandbox.Probe().UserNS {
		t.Skip("curl or namespaces missing")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("reached")) })}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	defer func() {
		srv.Close()
		<-done
	}()
	// 127.0.0.1 is allowed by name, but a loopback address is private:
	// refused after the rules, which the reason says.
	code, stdout, stderr := runCLI(t, "run", "--allow-host", ln.Addr().String(), "curl -sS --noproxy '' --max-time 20 http://"+ln.Addr().String()+"/")
	if strings.Contains(stdout, "reached") || !strings.Contains(stdout+stderr, "non-public address") {
		t.Errorf("private address: %d %q %q", code, stdout, stderr)
	}
	// Through call, the decision is in the audit log: host and port, never
	// the path.
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	input := `{"command":"curl -sS --noproxy '' --max-time 20 http://` + ln.Addr().String() + `/secret-path?token=x"}`
	code, stdout, stderr = runCLI(t, "call", "--audit-log", logPath, "--allow-host", ln.Addr().String(), "bash", input)
	if strings.Contains(stdout, "reached") {
		t.Errorf("call reached a private address: %d %q %q", code, stdout, stderr)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"event":"network.egress"`) {
			found = strings.Contains(line, `"host":"127.0.0.1"`) && strings.Contains(line, `"decision":"deny"`) && strings.Contains(line, `"rule":"private address"`)
			if strings.Contains(line, "secret-path") || strings.Contains(line, "token") {
				t.Errorf("the audit event holds the path: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("no egress decision in the audit log:\n%s", data)
	}
}
