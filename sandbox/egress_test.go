//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentexec/agentexec/egress"
	"github.com/agentexec/agentexec/internal/proctest"
)

// testNames resolves the test's made-up host names to loopback, in the
// proxy only: the sandbox itself has no DNS.
type testNames map[string]string

func (n testNames) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, errors.New("no such host")
}

// serveHTTP serves h on the host's loopback and returns its port.
func serveHTTP(t *testing.T, h http.Handler) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// egressSpec is the workspace-write profile with network "allowlist".
func egressSpec(t *testing.T, c egress.Config, names testNames) (string, Spec, *egress.Proxy) {
	t.Helper()
	p, err := egress.New(c)
	if err != nil {
		t.Fatal(err)
	}
	p.Resolver = names
	t.Cleanup(func() { p.Close() })
	ws := t.TempDir()
	exe, _ := os.Executable() // the helpers
	s, err := Profile("workspace-write", ProfileOptions{Workspace: ws, Network: "allowlist", Egress: p, Cache: "-", ReadOnly: []string{filepath.Dir(exe)}})
	if err != nil {
		t.Fatal(err)
	}
	return ws, s, p
}

// egressModes runs f behind the namespace wall and in the fallback.
func egressModes(t *testing.T, f func(t *testing.T)) {
	t.Run("namespaces", func(t *testing.T) {
		if !Probe().UserNS {
			t.Skip("no namespaces here")
		}
		f(t)
	})
	t.Run("fallback", func(t *testing.T) {
		if Probe().LandlockABI < 4 {
			t.Skip("Landlock ABI 4 is needed")
		}
		forceFallback = true
		defer func() { forceFallback = false }()
		f(t)
	})
}

func TestEgressAllowlist(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	port := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello through the proxy") }))
	other := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "should not be reached") }))
	p := strconv.Itoa(port)
	names := testNames{"allowed.test": "127.0.0.1", "denied.allowed.test": "127.0.0.1", "private.test": "10.0.0.1"}
	egressModes(t, func(t *testing.T) {
		ws, s, proxy := egressSpec(t, egress.Config{Allow: []string{"allowed.test:" + p, "*.allowed.test"}, Deny: []string{"denied.allowed.test"}, AllowPrivate: true}, names)
		curl := "curl -sS --max-time 20 "
		for _, c := range []struct {
			name, cmd, want string
		}{
			{"allowed, HTTP proxy", curl + "http://allowed.test:" + p + "/", "hello through the proxy"},
			{"allowed, SOCKS5", curl + `-x "$ALL_PROXY" http://allowed.test:` + p + "/", "hello through the proxy"},
			{"port not on the list", curl + "http://allowed.test:" + strconv.Itoa(other) + "/", "is not on the sandbox's network allowlist"},
			{"CONNECT refused", curl + "https://example.com/ 2>&1; echo; " + curl + "-v https://example.com/ 2>&1 | grep -i x-agentexec-refusal", "not on the sandbox's network allowlist"},
			{"deny wins", curl + "http://denied.allowed.test:" + p + "/", `denied by the sandbox's network rule "denied.allowed.test"`},
			{"SOCKS5 refused", curl + `-x "$ALL_PROXY" http://example.com/ 2>&1`, "curl: (97)"},
		} {
			r := run(t, s, ws, c.cmd)
			if got := out(r); !strings.Contains(got, c.want) {
				t.Errorf("%s: %q\nwant %q", c.name, got, c.want)
			}
		}
		// The run's result names what the proxy refused.
		r := run(t, s, ws, curl+"-f http://nope.test/ || true")
		if got := out(r); !strings.Contains(got, "agentexec: the sandbox's network allowlist refused: nope.test:80") && !forceFallback {
			t.Errorf("no refusal note: %q", got)
		}
		// Around the proxy: direct TCP to the host's listener, UDP, DNS.
		ops := [][]string{{"connect", "127.0.0.1:" + p}, {"connect", "127.0.0.1:" + strconv.Itoa(other)}, {"udp"}, {"dns", "example.com"}, {"unix"}, {"mptcp"}}
		if forceFallback {
			// Without a namespace of its own, the command may not serve
			// either (it would be on the host's loopback).
			ops = append(ops, []string{"bind"}, []string{"loopback"})
		} else {
			// Its own loopback is its own: tests that serve on localhost
			// work.
			argv, helper := proctest.HelperArgv(t, "net", "loopback")
			if got := strings.TrimSpace(out(run(t, s, ws, strings.Join(quoteAll(argv), " "), helper))); got != "ok" {
				t.Errorf("a server on the sandbox's own loopback: %q", got)
			}
		}
		for _, op := range ops {
			argv, helper := proctest.HelperArgv(t, "net", op...)
			r := run(t, s, ws, strings.Join(quoteAll(argv), " "), helper)
			if got := strings.TrimSpace(out(r)); !strings.Contains(got, "error") {
				t.Errorf("%v around the proxy: %q", op, got)
			} else {
				t.Logf("%v: %s", op, got)
			}
		}
		// The control: the same helper reaches the proxy.
		proxyAddr := "127.0.0.1:" + strconv.Itoa(DefaultEgressPort)
		if forceFallback {
			hp, err := proxy.HostPort()
			if err != nil {
				t.Fatal(err)
			}
			proxyAddr = "127.0.0.1:" + strconv.Itoa(hp)
		}
		argv, helper := proctest.HelperArgv(t, "net", "connect", proxyAddr)
		if got := strings.TrimSpace(out(run(t, s, ws, strings.Join(quoteAll(argv), " "), helper))); got != "ok" {
			t.Errorf("connect to the proxy: %q", got)
		}
	})
}

func TestEgressPrivateAddress(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	port := strconv.Itoa(serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "private data") })))
	ws, s, _ := egressSpec(t, egress.Config{Allow: []string{"internal.test", "meta.test"}}, testNames{"internal.test": "127.0.0.1", "meta.test": "169.254.169.254"})
	for _, host := range []string{"internal.test:" + port, "meta.test"} {
		r := run(t, s, ws, "curl -sS --max-time 20 http://"+host+"/")
		if got := out(r); !strings.Contains(got, "non-public address") || strings.Contains(got, "private data") {
			t.Errorf("%s: %q", host, got)
		}
	}
}

// TestEgressTools runs git and npm against local servers through the
// proxy.
func TestEgressTools(t *testing.T) {
	names := testNames{"git.test": "127.0.0.1", "registry.test": "127.0.0.1"}
	t.Run("git", func(t *testing.T) {
		git, err := exec.LookPath("git")
		backend := "/usr/lib/git-core/git-http-backend"
		if out, e := exec.Command("git", "--exec-path").Output(); e == nil {
			backend = filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
		}
		if _, berr := os.Stat(backend); err != nil || berr != nil {
			t.Skip("git or git-http-backend is not installed")
		}
		root := t.TempDir()
		os.Chmod(root, 0o755)
		repo := filepath.Join(root, "repo.git")
		for _, args := range [][]string{{"init", "-q", "--bare", repo}, {"-C", repo, "symbolic-ref", "HEAD", "refs/heads/main"}} {
			if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
		}
		work := t.TempDir()
		for _, args := range [][]string{{"init", "-q", "-b", "main", work}, {"-C", work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"}, {"-C", work, "push", "-q", repo, "main"}} {
			if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
		}
		head, _ := exec.Command(git, "-C", work, "rev-parse", "HEAD").Output()
		port := strconv.Itoa(serveHTTP(t, &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}))
		ws, s, _ := egressSpec(t, egress.Config{Allow: []string{"git.test:" + port}, AllowPrivate: true}, names)
		r := run(t, s, ws, "git ls-remote http://git.test:"+port+"/repo.git 2>&1")
		if got := out(r); !strings.Contains(got, strings.TrimSpace(string(head))+"\trefs/heads/main") {
			t.Errorf("git ls-remote through the proxy: %q", got)
		}
		r = run(t, s, ws, "git ls-remote http://git.test:1/repo.git 2>&1")
		if got := out(r); !strings.Contains(got, "403") {
			t.Errorf("git ls-remote of a refused host: %q", got)
		}
	})
	t.Run("npm", func(t *testing.T) {
		if _, err := exec.LookPath("npm"); err != nil {
			t.Skip("npm is not installed")
		}
		var port string
		port = strconv.Itoa(serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/left-pad" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"name":"left-pad","dist-tags":{"latest":"9.8.7"},"versions":{"9.8.7":{"name":"left-pad","version":"9.8.7","dist":{"tarball":"http://registry.test:%s/left-pad/-/left-pad-9.8.7.tgz","shasum":"0"}}}}`, port)
		})))
		ws, s, _ := egressSpec(t, egress.Config{Allow: []string{"registry.test:" + port}, AllowPrivate: true}, names)
		r := run(t, s, ws, "npm view left-pad version --registry http://registry.test:"+port+"/ 2>&1")
		if got := strings.TrimSpace(out(r)); !strings.Contains(got, "9.8.7") {
			t.Errorf("npm view through the proxy: %q", got)
		}
		r = run(t, s, ws, "npm view left-pad version --fetch-retries=0 --registry http://registry.test:1/ 2>&1")
		if got := out(r); !strings.Contains(got, "403") {
			t.Errorf("npm view of a refused registry: %q", got)
		}
	})
}

func TestEgressProfile(t *testing.T) {
	for _, c := range []struct {
		profile, network string
		allowlist, off   bool
		err              string
	}{
		{"workspace-write", "", false, false, ""},
		{"workspace-write", "allowlist", true, false, ""},
		{"strict", "allowlist", true, false, ""},
		{"no-network", "on", false, false, ""},
		{"workspace-write", "off", false, true, ""},
		{"off", "allowlist", false, false, "needs a sandbox profile"},
		{"workspace-write", "some", false, false, "write off, on, allowlist"},
	} {
		s, err := Profile(c.profile, ProfileOptions{Workspace: "/", Network: c.network})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s/%s: %v", c.profile, c.network, err)
			}
			continue
		}
		if err != nil || s.Allowlist != c.allowlist || s.NoNetwork != c.off {
			t.Errorf("%s/%s: allowlist %v, no network %v, %v", c.profile, c.network, s.Allowlist, s.NoNetwork, err)
		}
	}
	// The stricter of allowlist and no network is no network; of allowlist
	// and network on, allowlist.
	a := Spec{Allowlist: true}
	if got := Stricter(a, Spec{NoNetwork: true}); got.Allowlist || !got.NoNetwork {
		t.Errorf("allowlist+off: %+v", got)
	}
	if got := Stricter(Spec{CPUSeconds: 1}, a); !got.Allowlist {
		t.Errorf("on+allowlist: %+v", got)
	}
}
