//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentexec/agentexec/capture"
	"github.com/agentexec/agentexec/egress"
	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/runner"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	Main()
	proctest.RunHelpers(map[string]proctest.Helper{"net": helperNet, "files": helperFiles, "spawn": helperSpawn, "try": helperTry, "fds": helperFds, "nested": helperNested})
	goleak.VerifyTestMain(m)
}

// helperNet tries one network operation and prints "ok" or the error.
func helperNet(args []string) int {
	var err error
	switch args[0] {
	case "connect":
		var c net.Conn
		c, err = net.DialTimeout("tcp", args[1], 2*time.Second)
		if err == nil {
			c.Close()
		}
	case "bind":
		fd, e := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		if err = e; err == nil {
			err = syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
			syscall.Close(fd)
		}
	case "udp":
		var c net.Conn
		c, err = net.Dial("udp", "127.0.0.1:9")
		if err == nil {
			_, err = c.Write([]byte("x"))
			c.Close()
		}
	case "loopback":
		// A server of the command's own, on its loopback.
		var ln net.Listener
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err == nil {
			var c net.Conn
			if c, err = net.Dial("tcp", ln.Addr().String()); err == nil {
				c.Close()
			}
			ln.Close()
		}
	case "dns":
		_, err = net.DefaultResolver.LookupHost(context.Background(), args[1])
	case "unix":
		fd, e := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err = e; err == nil {
			syscall.Close(fd)
		}
	case "mptcp":
		fd, e := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 262)
		if err = e; err == nil {
			syscall.Close(fd)
		}
	}
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ok")
	return 0
}

// helperFiles opens files until it cannot and prints how many.
func helperFiles([]string) int {
	n := 0
	for ; n < 100000; n++ {
		if _, err := os.Open("/dev/null"); err != nil {
			break
		}
	}
	fmt.Println("opened", n)
	return 0
}

// helperSpawn starts up to args[0] sleeping children, stops at the first
// failure (no retries, unlike a shell), prints how many started, and ends
// them.
func helperSpawn(args []string) int {
	n, _ := strconv.Atoi(args[0])
	var procs []*os.Process
	var err error
	for len(procs) < n {
		var p *os.Process
		p, err = os.StartProcess("/bin/sleep", []string{"sleep", "30"}, &os.ProcAttr{})
		if err != nil {
			break
		}
		procs = append(procs, p)
	}
	fmt.Printf("spawned %d (%v)\n", len(procs), err)
	for _, p := range procs {
		p.Kill()
		p.Wait()
	}
	return 0
}

// run runs a shell command under s with the test's token in its env.
func run(t *testing.T, s Spec, dir string, command string, env ...string) *runner.Result {
	t.Helper()
	w, err := s.Wrapper(Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := runner.Run(context.Background(), runner.Spec{
		Command: command, Dir: dir, Env: append(runner.SafeEnv(), env...), Wrap: w, Timeout: 30 * time.Second,
		Grace: 200 * time.Millisecond, Combined: capture.Limit{Max: 1 << 20},
	})
	if err != nil {
		t.Fatalf("%q: %v", command, err)
	}
	return res
}

func out(r *runner.Result) string { return capture.ValidText(r.Combined.Head) }

// workspace returns a workspace and the Spec of the default profile for it.
func workspace(t *testing.T) (string, Spec) {
	t.Helper()
	ws := t.TempDir()
	return ws, Spec{Filesystem: true, ReadOnly: []string{"/"}, ReadWrite: []string{ws}, PrivateTmp: true}
}

func TestFilesystem(t *testing.T) {
	ws, s := workspace(t)
	outside := t.TempDir()
	secretDir := filepath.Join(t.TempDir(), "home", ".ssh")
	os.MkdirAll(secretDir, 0o700)
	os.WriteFile(filepath.Join(secretDir, "id_ed25519"), []byte("PRIVATE"), 0o600)
	os.WriteFile(filepath.Join(filepath.Dir(secretDir), "notes"), []byte("public\n"), 0o644)
	s.Hidden = []string{secretDir}
	r := run(t, s, ws, fmt.Sprintf(`echo ok > in.txt && cat in.txt
echo x > %s/out.txt 2>&1 || echo "outside: denied"
echo x > /etc/agentexec-test 2>&1 || echo "etc: denied"
echo t > "$TMPDIR/t" && cat "$TMPDIR/t" && echo "tmp: $TMPDIR"
cat %s/id_ed25519 2>&1 || echo "secret: denied"
cat %s/notes
ls /usr/bin/env >/dev/null && echo "read: ok"
echo nothing > /dev/null && echo "devnull: ok"`, outside, secretDir, filepath.Dir(secretDir)))
	o := out(r)
	for _, want := range []string{"ok\n", "outside: denied", "etc: denied", "t\ntmp: ", "secret: denied", "public\n", "read: ok", "devnull: ok"} {
		if !strings.Contains(o, want) {
			t.Errorf("missing %q in:\n%s", want, o)
		}
	}
	if !strings.Contains(o, "/agentexec-tmp-") {
		t.Errorf("TMPDIR is not private: %s", o)
	}
	if strings.Contains(o, "PRIVATE") {
		t.Error("a hidden secret was read")
	}
	if _, err := os.Stat(filepath.Join(outside, "out.txt")); err == nil {
		t.Error("a write outside the workspace landed")
	}
	if !strings.Contains(o, "Permission denied") {
		t.Errorf("denials should be EACCES: %s", o)
	}
}

func TestNetwork(t *testing.T) {
	ln4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln4.Close()
	ln6, err6 := net.Listen("tcp6", "[::1]:0")
	go func() {
		for {
			c, err := ln4.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ops := [][]string{{"connect", ln4.Addr().String()}, {"bind"}, {"udp"}, {"mptcp"}}
	if err6 == nil {
		defer ln6.Close()
		go func() {
			for {
				c, err := ln6.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		ops = append(ops, []string{"connect", ln6.Addr().String()})
	}
	for _, off := range []bool{true, false} {
		ws, s := workspace(t)
		s.NoNetwork = off
		for _, op := range ops {
			argv, helper := proctest.HelperArgv(t, "net", op...)
			r := run(t, s, ws, strings.Join(quoteAll(argv), " "), helper)
			got := strings.TrimSpace(out(r))
			if off && (got == "ok" || !strings.Contains(got, "error")) {
				t.Errorf("network off, %v: %q", op, got)
			}
			if !off && got != "ok" {
				t.Errorf("network on, %v: %q", op, got)
			}
		}
	}
}

func quoteAll(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return out
}

func TestLimits(t *testing.T) {
	ws, s := workspace(t)
	s.FileSizeBytes = 1 << 20
	r := run(t, s, ws, "head -c 4000000 /dev/zero > big; echo status=$?; stat -c %s big")
	if o := out(r); !strings.Contains(o, "status=153") || !strings.Contains(o, "1048576") {
		t.Errorf("file size: %q", o) // 128+SIGXFSZ(25)
	}
	s.FileSizeBytes = 0
	s.MemoryBytes = 256 << 20
	// dd allocates its block size: 1 GiB cannot be had under the limit,
	// 16 MiB can. (A Go helper would not do under the race detector, whose
	// runtime maps far more than the limit.)
	r = run(t, s, ws, "dd if=/dev/zero of=/dev/null bs=1G count=1 2>&1; echo status=$?")
	if o := out(r); !strings.Contains(o, "memory exhausted") && !strings.Contains(o, "Cannot allocate") && !strings.Contains(o, "status=137") || strings.Contains(o, "status=0") {
		t.Errorf("memory bomb: %q", o)
	}
	if o := out(run(t, s, ws, "dd if=/dev/zero of=/dev/null bs=16M count=1 2>&1; echo status=$?")); !strings.Contains(o, "status=0") {
		t.Errorf("a small program under the memory limit failed: %q", o)
	}
	s.MemoryBytes = 0
	s.OpenFiles = 64
	argv, helper := proctest.HelperArgv(t, "files")
	if o := out(run(t, s, ws, strings.Join(quoteAll(argv), " "), helper)); !strings.Contains(o, "opened") {
		t.Errorf("files: %q", o)
	} else if n, _ := strconv.Atoi(strings.Fields(o)[1]); n > 64 {
		t.Errorf("opened %d files under a limit of 64", n)
	}
	s.OpenFiles = 0
	s.CPUSeconds = 1
	start := time.Now()
	r = run(t, s, ws, "while :; do :; done")
	if r.Signal != int(syscall.SIGXCPU) && r.Signal != int(syscall.SIGKILL) || time.Since(start) > 10*time.Second {
		t.Errorf("CPU burner: %s after %v", r.Describe(), time.Since(start))
	}
}

func TestProcesses(t *testing.T) {
	token := proctest.Token(t)
	ws, s := workspace(t)
	s.Processes = 20
	argv, helper := proctest.HelperArgv(t, "spawn", "500")
	done := make(chan *runner.Result, 1)
	go func() { done <- run(t, s, ws, strings.Join(quoteAll(argv), " "), helper, token) }()
	// The host stays responsive while the bomb goes off.
	for range 5 {
		start := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil || time.Since(start) > 2*time.Second {
			t.Errorf("the host could not start a process: %v after %v", err, time.Since(start))
		}
	}
	r := <-done
	o := out(r)
	var n int
	switch _, err := fmt.Sscanf(o, "spawned %d", &n); {
	case err != nil && os.Getuid() != 0 && strings.Contains(o, "pthread_create failed: Resource temporarily unavailable"):
		// Contained before it began: for an ordinary user the cap is
		// RLIMIT_NPROC, which counts every thread of the user, this test's
		// too, so the helper (a Go program) could not start its threads.
	case err != nil || n >= 20:
		t.Errorf("fork bomb not contained: %q", o)
	}
	proctest.NoSurvivors(t, token)
}

// The trampoline leaves the run's cgroup for the pids cgroup; the runner
// tracks that one instead, so an escapee there is still ended.
func TestProcessesCgroupEndsEscapees(t *testing.T) {
	if Probe().PidsCgroup == "" {
		t.Skip("no writable pids cgroup")
	}
	token := proctest.Token(t)
	ws, s := workspace(t)
	s.Processes = 20
	r := run(t, s, ws, "setsid env -i PATH="+runner.DefaultPath+" "+token+" sleep 600 & sleep 0.3; echo started")
	if o := out(r); o != "started\n" || r.LeftoversKilled != 1 {
		t.Errorf("output %q, leftovers killed %d", o, r.LeftoversKilled)
	}
	proctest.NoSurvivors(t, token)
}

func TestIsolation(t *testing.T) {
	t.Setenv("AGENTEXEC_HOST_SECRET", "hunter2")
	ws, s := workspace(t)
	host := os.Getpid()
	r := run(t, s, ws, fmt.Sprintf(`kill -0 %d 2>&1 || echo "signal: denied"
cat /proc/%d/environ 2>&1 | head -c 200; echo
grep NoNewPrivs /proc/self/status
echo "pid $$"
env`, host, host))
	o := out(r)
	if !strings.Contains(o, "signal: denied") {
		t.Errorf("the child could signal the host: %s", o)
	}
	if strings.Contains(o, "hunter2") || strings.Contains(o, "AGENTEXEC_HOST_SECRET") {
		t.Errorf("a host secret leaked: %s", o)
	}
	if !strings.Contains(o, "NoNewPrivs:\t1") {
		t.Errorf("no_new_privs is not set: %s", o)
	}
	if !strings.Contains(o, fmt.Sprintf("pid %d\n", r.Pid)) {
		t.Errorf("the child's pid is not the runner's %d: %s", r.Pid, o)
	}
}

// TestSetupFailure: a failing step is a typed error naming it, and the
// target never runs.
func TestSetupFailure(t *testing.T) {
	ws, s := workspace(t)
	marker := filepath.Join(ws, "ran")
	exe, _ := os.Executable()
	res, err := runner.Run(context.Background(), runner.Spec{
		Argv: []string{"/bin/sh", "-c", "touch " + marker}, Dir: ws,
		Wrap: func(path string, argv, env []string) (*runner.Wrapped, error) {
			return wrap(exe, s, "/no/such/program", argv, env)
		},
	})
	var se *SetupError
	if res != nil || !errors.Is(err, runner.ErrSandbox) || !errors.As(err, &se) || se.Step != StepExec || se.Errno != int(syscall.ENOENT) {
		t.Fatalf("got %v %v", res, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the target ran")
	}
	// The spec never travels on argv or env.
	w, _ := s.Wrapper(Options{})
	wr, err := w("/bin/true", []string{"true"}, []string{"SECRET=value"})
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Done()
	defer func() {
		for _, f := range wr.Files {
			f.Close()
		}
	}()
	if strings.Contains(strings.Join(wr.Argv, " "), "SECRET") || strings.Join(wr.Env, " ") != strings.Join(trampolineEnv, " ") {
		t.Errorf("argv %q env %q", wr.Argv, wr.Env)
	}
}

func TestStricter(t *testing.T) {
	a := Spec{CPUSeconds: 60, MemoryBytes: 512 << 20, Filesystem: true, ReadOnly: []string{"/"}, ReadWrite: []string{"/ws", "/tmp"}}
	b := Spec{CPUSeconds: 10, NoNetwork: true, Filesystem: true, ReadOnly: []string{"/"}, ReadWrite: []string{"/ws"}}
	got := Stricter(a, b)
	if got.CPUSeconds != 10 || got.MemoryBytes != 512<<20 || !got.NoNetwork || strings.Join(got.ReadWrite, ",") != "/ws" || !strings.Contains(strings.Join(got.ReadOnly, ","), "/tmp") {
		t.Errorf("%+v", got)
	}
}

func TestStatus(t *testing.T) {
	layers := Status()
	names := []string{}
	for _, l := range layers {
		names = append(names, l.Name)
		if !l.Available && l.Fix == "" {
			t.Errorf("%s is unavailable without a fix", l.Name)
		}
		if l.State != "used" && l.State != "available" && l.State != "missing" || (l.State == "missing") == l.Available {
			t.Errorf("%s: state %q, available %v", l.Name, l.State, l.Available)
		}
		if l.Name != "bubblewrap" && l.Name != "rlimits" && l.Name != "capabilities" && l.Open == "" {
			t.Errorf("%s does not say what its absence leaves open", l.Name)
		}
	}
	if strings.Join(names, ",") != "namespaces,capabilities,landlock,seccomp,network allowlist,memory cgroup,pids cgroup,rlimits,bubblewrap,cgroup limits,outer runtime" {
		t.Errorf("layers %v", names)
	}
}

// TestAsUnprivileged runs the escape tests again as uid 65534, as most
// users are not root.
func TestAsUnprivileged(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("already unprivileged")
	}
	if os.Getenv("AGENTEXEC_TEST_NOBODY") != "" {
		t.Skip("already running as nobody")
	}
	dir, err := os.MkdirTemp("", "agentexec-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	exe, _ := os.Executable()
	bin := filepath.Join(dir, "sandbox.test")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o777)
	os.Chmod(tmp, 0o1777)
	cmd := exec.Command(bin, "-test.run", "^(TestFilesystem|TestNetwork|TestLimits|TestProcesses|TestIsolation|TestSetupFailure|TestEscape.*|TestEgress.*|TestRaw(SetupFailures|InitDies|Descriptors|EgressListener|AllowlistParity|AllowlistRun)|TestLaunchers)$", "-test.v", "-test.short", "-test.count=1")
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + tmp, "HOME=" + tmp, "AGENTEXEC_TEST_NOBODY=1", "GORACE=atexit_sleep_ms=0"}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
	t.Logf("as uid 65534:\n%s", out)
}

// BenchmarkTrue runs /bin/true unconfined (the baseline), under
// bubblewrap building the equivalent namespaces and root (when it is
// installed), and under the workspace-write and strict profiles through
// the in-process launcher (raw) and the Go trampoline (the small
// agentexec-sandbox program, or this test program when it cannot be
// built). Each reports cpu-ns/op, the CPU time (user+sys) of the
// processes a run started, and the ratios the targets are about:
// cpu/unconfined (the baseline's CPU) and wall/bwrap (bubblewrap's time).
func BenchmarkTrue(b *testing.B) { benchTrue(b) }

// BenchmarkTrueUnderLoad is BenchmarkTrue while two busy loops compete
// for the CPUs (skipped with -short).
func BenchmarkTrueUnderLoad(b *testing.B) {
	if testing.Short() {
		b.Skip("the loaded variant is not part of the smoke pass")
	}
	var loops []*exec.Cmd
	for range 2 {
		c := exec.Command("/bin/sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		loops = append(loops, c)
	}
	defer func() {
		for _, c := range loops {
			c.Process.Kill()
			c.Wait()
		}
	}()
	benchTrue(b)
}

func benchTrue(b *testing.B) {
	ws := b.TempDir()
	var baseCPU, baseTotal, bwrapWall float64
	runTrue := func(b *testing.B, wrap func(string, []string, []string) (*runner.Wrapped, error), argv []string) (wall, cpu, total float64) {
		var before, after, selfBefore, selfAfter syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &before)
		syscall.Getrusage(syscall.RUSAGE_SELF, &selfBefore)
		start := time.Now()
		for b.Loop() {
			res, err := runner.Run(context.Background(), runner.Spec{Argv: argv, Wrap: wrap, Dir: ws})
			if err != nil || res.ExitCode != 0 {
				b.Fatal(err, res)
			}
		}
		wall = float64(time.Since(start).Nanoseconds()) / float64(b.N)
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &after)
		syscall.Getrusage(syscall.RUSAGE_SELF, &selfAfter)
		used := func(a, b *syscall.Rusage) float64 {
			return float64(b.Utime.Nano() + b.Stime.Nano() - a.Utime.Nano() - a.Stime.Nano())
		}
		cpu = used(&before, &after) / float64(b.N)
		total = cpu + used(&selfBefore, &selfAfter)/float64(b.N)
		b.ReportMetric(cpu, "cpu-ns/op")
		b.ReportMetric(total, "cpu+host-ns/op")
		if baseCPU > 0 {
			b.ReportMetric(cpu/baseCPU, "cpu/unconfined")
			b.ReportMetric(total/baseTotal, "cpu+host/unconfined")
		}
		if bwrapWall > 0 {
			b.ReportMetric(wall/bwrapWall, "wall/bwrap")
		}
		return wall, cpu, total
	}
	b.Run("baseline=unsandboxed", func(b *testing.B) { _, baseCPU, baseTotal = runTrue(b, nil, []string{"/bin/true"}) })
	if bwrap, err := exec.LookPath("bwrap"); err == nil {
		// What workspace-write builds: the system directories read-only,
		// the workspace, tmpfs /tmp and HOME, /dev, /proc, every
		// namespace but the network's (bubblewrap's --unshare-all takes
		// that too; --share-net gives it back).
		argv := []string{bwrap, "--unshare-all", "--share-net", "--die-with-parent", "--new-session"}
		for _, d := range systemDirs {
			if fi, err := os.Lstat(d); err == nil {
				if fi.Mode()&os.ModeSymlink != 0 {
					t, _ := os.Readlink(d)
					argv = append(argv, "--symlink", t, d)
				} else {
					argv = append(argv, "--ro-bind", d, d)
				}
			}
		}
		home, _ := os.UserHomeDir()
		argv = append(argv, "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", home, "--bind", ws, ws, "--dev", "/dev", "--proc", "/proc",
			"--chdir", ws, "/bin/true")
		b.Run("bubblewrap", func(b *testing.B) {
			cpu := baseCPU
			baseCPU = 0 // no ratio against itself
			bwrapWall, _, _ = runTrue(b, nil, argv)
			baseCPU = cpu
		})
	}
	// The trampoline is the small agentexec-sandbox program, built here
	// as an install would, or else this (test) program re-executed.
	trampoline, _ := os.Executable()
	helper := filepath.Join(ws, HelperName)
	build := exec.Command("go", "build", "-o", helper, "github.com/agentexec/agentexec/cmd/agentexec-sandbox")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err == nil {
		trampoline = helper
	} else {
		b.Logf("cannot build %s, measuring self re-exec: %v\n%s", HelperName, err, out)
	}
	// "allowlist" is workspace-write with network = "allowlist": the
	// egress listener's steps, and the host taking and serving it.
	proxy, err := egress.New(egress.Config{Allow: []string{"example.test"}})
	if err != nil {
		b.Fatal(err)
	}
	defer proxy.Close()
	for _, name := range []string{"workspace-write", "strict", "allowlist"} {
		o := ProfileOptions{Workspace: ws}
		profile := name
		if name == "allowlist" {
			profile, o.Network, o.Egress = "workspace-write", "allowlist", proxy
		}
		s, _ := Profile(profile, o)
		for _, launcher := range []string{LauncherRaw, LauncherTrampoline} {
			w, err := s.Wrapper(Options{Executable: trampoline, Launcher: launcher})
			if err != nil {
				b.Logf("%s/%s: %v", name, launcher, err)
				continue
			}
			b.Run(name+"/"+launcher, func(b *testing.B) { runTrue(b, w, []string{"/bin/true"}) })
		}
	}
}

// FuzzLaunch: what the trampoline reads from its descriptor decodes
// without panicking, and a launch survives the round trip exactly.
func FuzzLaunch(f *testing.F) {
	f.Add([]byte(`{"path":"/bin/true","argv":["true"],"env":["A=b"],"spec":{"filesystem":true,"cpu_seconds":5},"rules":[{"p":"/","f":false}]}`))
	f.Add([]byte(`{"spec":{"no_network":true,"processes":-1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l launch
		if json.Unmarshal(b, &l) != nil {
			return
		}
		again, err := json.Marshal(&l)
		if err != nil {
			t.Fatal(err)
		}
		var l2 launch
		if err := json.Unmarshal(again, &l2); err != nil {
			t.Fatal(err)
		}
		third, _ := json.Marshal(&l2)
		if string(third) != string(again) {
			t.Fatalf("round trip changed the launch:\n%s\n%s", again, third)
		}
		l.Spec.Validate()
		l.Spec.Enabled()
	})
}
