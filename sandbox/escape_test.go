//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/agentexec/agentexec/capture"
	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/runner"
	"golang.org/x/sys/unix"
)

// helperTry attempts escapes, each argument one "OP" or "OP=ARG", and
// prints a line for each: "escaped: OP ARG" when it worked, "held: OP
// ARG: ERROR" when the kernel refused it.
func helperTry(args []string) int {
	for _, a := range args {
		op, arg, _ := strings.Cut(a, "=")
		var opArgs []string
		if arg != "" {
			opArgs = []string{arg}
		}
		if err := try(op, opArgs); err == nil {
			fmt.Println("escaped:", op, arg)
		} else {
			fmt.Printf("held: %s %s: %v\n", op, arg, err)
		}
	}
	return 0
}

func try(op string, args []string) error {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	pid, _ := strconv.Atoi(arg(0))
	switch op {
	case "mknod-block":
		return unix.Mknod(arg(0), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0)))
	case "mknod-char":
		return unix.Mknod(arg(0), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 11))) // /dev/kmsg
	case "sethostname":
		name, _ := os.Hostname()
		return unix.Sethostname([]byte(name))
	case "ifflags":
		// Sets lo's flags to what they are: a change if it worked at
		// all, harmless if it did.
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ifr, _ := unix.NewIfreq("lo")
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
			return err
		}
		return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
	case "bpf":
		attr := [5]uint32{unix.BPF_MAP_TYPE_ARRAY, 4, 4, 1, 0}
		fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		if errno != 0 {
			return errno
		}
		unix.Close(int(fd))
		return nil
	case "perf":
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{}))}
		fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, 0) // every process on CPU 0
		if err == nil {
			unix.Close(fd)
		}
		return err
	case "packet":
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err == nil {
			unix.Close(fd)
		}
		return err
	case "netlink-audit":
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT)
		if err == nil {
			unix.Close(fd)
		}
		return err
	case "keyctl":
		id, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_USER_KEYRING, false)
		if err != nil {
			return err
		}
		_, err = unix.KeyctlBuffer(unix.KEYCTL_READ, id, make([]byte, 256), 0)
		return err
	case "prlimit":
		var old unix.Rlimit
		return unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 1, Max: 1}, &old)
	case "renice":
		return unix.Setpriority(unix.PRIO_PROCESS, pid, 19)
	case "taskset":
		var set unix.CPUSet
		set.Set(0)
		return unix.SchedSetaffinity(pid, &set)
	case "kill":
		return unix.Kill(pid, 0)
	case "environ", "maps", "mem":
		b, err := os.ReadFile(filepath.Join("/proc", arg(0), op))
		if err == nil && len(b) == 0 {
			return fmt.Errorf("empty")
		}
		return err
	case "tfo":
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		addr, _ := netip4(arg(0))
		return unix.Sendto(fd, []byte("GET / HTTP/1.0\r\nAuthorization: leak\r\n\r\n"), unix.MSG_FASTOPEN, addr)
	case "tfo-connect":
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, tcpFastOpenConnect, 1)
	case "listen":
		// listen() without bind() autobinds an ephemeral port; the test
		// dials it from outside while this waits.
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Listen(fd, 1); err != nil {
			return err
		}
		sa, _ := unix.Getsockname(fd)
		fmt.Printf("port %d\n", sa.(*unix.SockaddrInet4).Port)
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 3})
		c, _, err := unix.Accept(fd)
		if err != nil {
			return err
		}
		unix.Close(c)
		return nil
	case "unix":
		c, err := net.DialTimeout("unix", arg(0), 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	case "abstract":
		c, err := net.DialTimeout("unix", "@"+arg(0), 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	case "ptrace":
		return unix.PtraceAttach(pid)
	case "unshare":
		return unix.Unshare(unix.CLONE_NEWUSER | unix.CLONE_NEWNS)
	case "mount":
		return unix.Mount("tmpfs", arg(0), "tmpfs", 0, "")
	case "chroot":
		return unix.Chroot("/")
	case "iouring":
		var params [120]byte
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
		if errno != 0 {
			return errno
		}
		unix.Close(int(fd))
		return nil
	case "write":
		return os.WriteFile(arg(0), []byte("x"), 0o644)
	case "openw":
		f, err := os.OpenFile(arg(0), os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		return err
	case "read":
		b, err := os.ReadFile(arg(0))
		if err == nil && len(b) == 0 {
			return fmt.Errorf("empty")
		}
		return err
	}
	return fmt.Errorf("unknown operation %q", op)
}

// helperFds prints the descriptors it has.
func helperFds([]string) int {
	var fds []string
	for fd := 0; fd < 4096; fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
			fds = append(fds, fmt.Sprint(fd))
		}
	}
	fmt.Println(strings.Join(fds, " "))
	return 0
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func netip4(hostport string) (*unix.SockaddrInet4, error) {
	a, err := net.ResolveTCPAddr("tcp4", hostport)
	if err != nil {
		return nil, err
	}
	sa := &unix.SockaddrInet4{Port: a.Port}
	copy(sa.Addr[:], a.IP.To4())
	return sa, nil
}

// needNS skips a test of the namespace wall where the kernel refuses it.
func needNS(t *testing.T) {
	t.Helper()
	if st := Probe(); !st.UserNS {
		t.Skipf("the kernel refuses new namespaces (%s): the fallback's tests cover this host", st.UserNSDetail)
	}
}

// boxed returns a workspace and the named profile for it, showing this
// test program (which the helpers run) read-only.
func boxed(t *testing.T, profile string) (string, Spec) {
	t.Helper()
	ws := t.TempDir()
	exe, _ := os.Executable()
	s, err := Profile(profile, ProfileOptions{Workspace: ws, ReadOnly: []string{filepath.Dir(exe)}, Cache: filepath.Join(os.TempDir(), "agentexec-test-cache-"+strconv.Itoa(os.Getuid()))})
	if err != nil {
		t.Fatal(err)
	}
	return ws, s
}

// tryIn runs the "try" helper under s with attempts ("OP" or "OP=ARG")
// and returns its output.
func tryIn(t *testing.T, s Spec, ws string, attempts ...string) string {
	t.Helper()
	argv, helper := proctest.HelperArgv(t, "try", attempts...)
	return strings.TrimSpace(out(run(t, s, ws, strings.Join(quoteAll(argv), " ")+" 2>&1", helper)))
}

// allHeld fails t for every attempt that did not print "held".
func allHeld(t *testing.T, what string, attempts []string, output string) {
	t.Helper()
	lines := strings.Split(output, "\n")
	if len(lines) != len(attempts) {
		t.Errorf("%s: %d attempts, output:\n%s", what, len(attempts), output)
		return
	}
	for i, a := range attempts {
		op, arg, _ := strings.Cut(a, "=")
		if !strings.HasPrefix(lines[i], "held: "+op+" "+arg+":") {
			t.Errorf("%s: %s", what, lines[i])
		}
	}
}

// TestEscapes tries each escape class of the red-team review under the
// namespaced profiles and asserts that it fails.
func TestEscapes(t *testing.T) {
	needNS(t)
	// A pathname socket outside, as ssh-agent, tmux or docker have.
	sockDir, err := os.MkdirTemp("", "agentexec-sock-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	os.Chmod(sockDir, 0o755)
	sock := filepath.Join(sockDir, "agent.sock")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer uln.Close()
	os.Chmod(sock, 0o777)
	abstract := "agentexec-test-" + strconv.Itoa(os.Getpid())
	aln, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer aln.Close()
	tln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tln.Close()
	acceptAndClose(uln, aln, tln)
	host := strconv.Itoa(os.Getpid())
	for _, profile := range []string{"workspace-write", "no-network"} {
		t.Run(profile, func(t *testing.T) {
			ws, s := boxed(t, profile)
			attempts := []string{
				"mknod-block=" + filepath.Join(ws, "blk"), "mknod-char=" + filepath.Join(ws, "chr"),
				"sethostname", "ifflags", "bpf", "perf", "packet", "netlink-audit", "keyctl",
				"environ=" + host, "maps=" + host, "environ=1", "maps=1", "mem=1",
				"prlimit=" + host, "prlimit=1", "renice=" + host, "renice=1", "taskset=" + host, "taskset=1", "kill=" + host,
				"tfo=" + tln.Addr().String(), "tfo-connect", "unix=" + sock, "abstract=" + abstract,
				"ptrace=1", "ptrace=" + host, "unshare", "mount=" + ws, "chroot", "iouring",
				"openw=/proc/sys/kernel/hostname", "openw=/proc/sys/vm/drop_caches", "openw=/proc/sysrq-trigger", "openw=/proc/1/oom_score_adj",
				// The init's status descriptor (3 in-process, 4 for the
				// trampoline): a forged record would change the reported
				// exit status.
				"openw=/proc/1/fd/3", "openw=/proc/1/fd/4",
			}
			if profile == "no-network" {
				attempts = append(attempts, "unix="+filepath.Join(ws, "nothing.sock"))
			}
			allHeld(t, profile, attempts, tryIn(t, s, ws, attempts...))
			for _, dev := range []string{filepath.Join(ws, "blk"), filepath.Join(ws, "chr")} {
				if _, err := os.Stat(dev); err == nil {
					t.Errorf("a device node was made: %s", dev)
				}
			}
		})
	}
}

// TestEscapeListen: listen() without bind() under no-network gets a port
// only in the sandbox's own network namespace, which nothing outside can
// reach.
func TestEscapeListen(t *testing.T) {
	needNS(t)
	ws, s := boxed(t, "no-network")
	w, err := s.Wrapper(Options{})
	if err != nil {
		t.Fatal(err)
	}
	argv, helper := proctest.HelperArgv(t, "try", "listen")
	dialed := make(chan error, 1)
	res, err := runner.Run(context.Background(), runner.Spec{
		Argv: argv, Dir: ws, Env: append(runner.SafeEnv(), helper), Wrap: w, Timeout: 20 * time.Second, MergeOutput: true,
		OnOutput: func(_ runner.Stream, p []byte) {
			sc := bufio.NewScanner(strings.NewReader(string(p)))
			for sc.Scan() {
				if port, ok := strings.CutPrefix(sc.Text(), "port "); ok {
					go func() {
						c, err := net.DialTimeout("tcp4", "127.0.0.1:"+port, time.Second)
						if err == nil {
							c.Close()
						}
						dialed <- err
					}()
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := out(res)
	if strings.Contains(o, "escaped") {
		t.Errorf("a connection from outside reached the sandbox's listener: %s", o)
	}
	if strings.Contains(o, "port ") {
		if err := <-dialed; err == nil {
			t.Errorf("the sandbox's autobound port accepted a connection from outside: %s", o)
		}
	}
}

// TestEscapeFiles: what a namespaced profile shows. The home directory is
// reached through a link and is the workspace itself (cd ~ && agentexec
// mcp), and holds credentials on and off the hidden list; the state
// directory and audit log are inside the workspace.
func TestEscapeFiles(t *testing.T) {
	needNS(t)
	root := t.TempDir()
	os.Chmod(root, 0o755)
	realHome := filepath.Join(root, "var", "home", "u")
	for _, f := range []string{".ssh/id_ed25519", ".ssh/authorized_keys", ".bash_history", ".npmrc", ".config/gh/hosts.yml",
		".claude/.credentials.json", ".vault-token", ".gitconfig", "project/main.go", ".local/state/agentexec/audit.jsonl", "other-secret"} {
		p := filepath.Join(realHome, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("SECRET "+f+"\n"), 0o644)
	}
	os.WriteFile(filepath.Join(realHome, ".gitconfig"), []byte("[user]\n\tname = t\n"), 0o644)
	os.Symlink("var/home", filepath.Join(root, "home"))
	home := filepath.Join(root, "home", "u")
	t.Setenv("HOME", home)
	exe, _ := os.Executable()
	stateFile := filepath.Join(realHome, "other-secret")
	s, err := Profile("workspace-write", ProfileOptions{Workspace: home, ReadOnly: []string{filepath.Dir(exe)}, Secrets: []string{stateFile},
		Cache: filepath.Join(os.TempDir(), "agentexec-test-cache-"+strconv.Itoa(os.Getuid()))})
	if err != nil {
		t.Fatal(err)
	}
	var attempts []string
	for _, base := range []string{home, realHome} {
		for _, f := range []string{".ssh/id_ed25519", ".bash_history", ".npmrc", ".config/gh/hosts.yml", ".claude/.credentials.json",
			".vault-token", ".local/state/agentexec/audit.jsonl", "other-secret"} {
			attempts = append(attempts, "read="+filepath.Join(base, f))
		}
		attempts = append(attempts, "write="+filepath.Join(base, ".ssh/authorized_keys"))
	}
	allHeld(t, "home", attempts, tryIn(t, s, home, attempts...))
	if b, _ := os.ReadFile(filepath.Join(realHome, ".ssh/authorized_keys")); !strings.HasPrefix(string(b), "SECRET") {
		t.Errorf("authorized_keys changed: %q", b)
	}
	// The workspace works, and the rest of the system is read-only.
	r := run(t, s, home, `cat project/main.go && echo new > project/new.go && cat project/new.go && git config user.name
echo x > /etc/agentexec-test 2>&1 || echo "etc: denied"
echo x > /usr/agentexec-test 2>&1 || echo "usr: denied"
ls /run /var/run /home/other /sys 2>&1 | grep -c "No such file"
ls /proc | grep -c '^[0-9]'
cat /proc/1/cmdline | tr '\0' ' '; echo`)
	o := out(r)
	for _, want := range []string{"SECRET project/main.go", "new\n", "etc: denied", "usr: denied", "4\n"} {
		if !strings.Contains(o, want) {
			t.Errorf("missing %q in:\n%s", want, o)
		}
	}
	if lines := strings.Split(strings.TrimSpace(o), "\n"); len(lines) > 1 {
		if n, _ := strconv.Atoi(lines[len(lines)-2]); n > 6 {
			t.Errorf("%d processes visible in /proc:\n%s", n, o)
		}
	}
}

// TestEscapeSurvival: nothing a sandboxed command starts outlives it, not
// a process that left the session and cleared its environment, nor a
// daemon (as a nested agentexec's background job would be).
func TestEscapeSurvival(t *testing.T) {
	needNS(t)
	token := proctest.Token(t)
	ws, s := boxed(t, "workspace-write")
	r := run(t, s, ws, "setsid sh -c 'sleep 600 & sleep 600' & (nohup sleep 600 >/dev/null 2>&1 &) ; env -i "+token+" /bin/sleep 600 & echo started", token)
	if o := out(r); !strings.Contains(o, "started") {
		t.Errorf("output %q", o)
	}
	proctest.NoSurvivors(t, token)
	if strings.Contains(fmt.Sprint(runner.SafeEnv()), "AGENTEXEC_SANDBOX") {
		t.Error("the host's own environment claims a sandbox")
	}
	if o := out(run(t, s, ws, "echo $AGENTEXEC_SANDBOX")); strings.TrimSpace(o) != "workspace-write" {
		t.Errorf("AGENTEXEC_SANDBOX inside: %q", o)
	}
}

// TestEscapeInitSignals: nothing in the sandbox can stop or kill its init
// (which would end the run early or leave the host waiting), and the
// command's own status is what the host reports.
func TestEscapeInitSignals(t *testing.T) {
	needNS(t)
	ws, s := boxed(t, "workspace-write")
	r := run(t, s, ws, "for sig in KILL TERM STOP INT HUP SEGV; do kill -$sig 1; done; sleep 0.2; kill -0 1 && echo alive; exit 3")
	if o := out(r); o != "alive\n" || r.ExitCode != 3 {
		t.Errorf("%s: %q", r.Describe(), o)
	}
}

// TestEscapeSignalsAndStatus: the program's exit status and the signal
// that killed it reach the runner; a timeout ends the whole tree.
func TestEscapeSignalsAndStatus(t *testing.T) {
	needNS(t)
	ws, s := boxed(t, "workspace-write")
	if r := run(t, s, ws, "exit 7"); r.ExitCode != 7 || r.Signal != 0 {
		t.Errorf("exit 7: %s", r.Describe())
	}
	if r := run(t, s, ws, "kill -TERM $$"); r.Outcome != runner.Signaled || r.Signal != int(syscall.SIGTERM) {
		t.Errorf("kill -TERM $$: %s", r.Describe())
	}
	token := proctest.Token(t)
	w, _ := s.Wrapper(Options{})
	res, err := runner.Run(context.Background(), runner.Spec{
		Command: "trap 'echo got TERM; exit 3' TERM; sleep 600 & wait", Dir: ws, Env: append(runner.SafeEnv(), token), Wrap: w,
		Timeout: 300 * time.Millisecond, Grace: 5 * time.Second, Combined: capture.Limit{Max: 1 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut() || !strings.Contains(out(res), "got TERM") {
		t.Errorf("timeout: %s, %q", res.Describe(), out(res))
	}
	proctest.NoSurvivors(t, token)
}

// TestEscapeStrict: strict's memory limit counts shared mappings and every
// process (a cgroup), and its /tmp is capped.
func TestEscapeStrict(t *testing.T) {
	needNS(t)
	ws, s := boxed(t, "strict")
	r := run(t, s, ws, "dd if=/dev/zero of=/tmp/big bs=1M count=400 2>&1; echo status=$?")
	if o := out(r); strings.Contains(o, "status=0") {
		t.Errorf("400 MB written to strict's /tmp: %s", o)
	}
	if testing.Short() {
		t.Skip("the memory tests allocate 600 MB")
	}
	if !MemoryCgroup() {
		t.Skip("no writable memory cgroup: RLIMIT_DATA alone does not count shared mappings (sandbox status says so)")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is needed to map shared memory")
	}
	const shared = `python3 -c '
import mmap
m = mmap.mmap(-1, 600<<20, mmap.MAP_SHARED)
for i in range(0, 600<<20, 4096): m[i] = 1
print("escaped: shared")'`
	escaped := regexp.MustCompile(`(?m)^escaped: `)
	if o := out(run(t, s, ws, shared+" 2>&1; echo status=$?")); escaped.MatchString(o) {
		t.Errorf("a 600 MB shared mapping under strict: %s", o)
	}
	const each = `python3 -c '
b = bytearray(300<<20)
for i in range(0, len(b), 4096): b[i] = 1
import time; time.sleep(1); print("escaped: many")' 2>&1 &`
	if o := out(run(t, s, ws, each+each+"wait; echo done")); len(escaped.FindAllString(o, -1)) > 1 {
		t.Errorf("two 300 MB processes under strict: %s", o)
	}
}

// TestToolsWork: ordinary work under the default profile: a Go build
// (with the persistent tool cache), npm and pip.
func TestToolsWork(t *testing.T) {
	needNS(t)
	ws, s := boxed(t, "workspace-write")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not installed")
	}
	os.WriteFile(filepath.Join(ws, "go.mod"), []byte("module example.com/hello\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main\n\nfunc main() { println(\"hello from the sandbox\") }\n"), 0o644)
	s.ReadOnly = append(s.ReadOnly, filepath.Dir(filepath.Dir(goBin)), realGOROOT())
	w, _ := s.Wrapper(Options{})
	res, err := runner.Run(context.Background(), runner.Spec{
		Argv: []string{goBin, "run", "."}, Dir: ws, Env: append(runner.SafeEnv(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOPROXY=off"),
		Wrap: w, Timeout: 120 * time.Second, Combined: capture.Limit{Max: 1 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out(res), "hello from the sandbox") {
		t.Errorf("go run under workspace-write: %s: %s", res.Describe(), out(res))
	}
	for _, tool := range []string{"npm", "pip3", "pip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Logf("%s is not installed: skipped", tool)
			continue
		}
		if r := run(t, s, ws, tool+" --version 2>&1"); r.ExitCode != 0 {
			t.Errorf("%s --version: %s: %s", tool, r.Describe(), out(r))
		}
	}
	// A write outside what the profile allows ends with a note naming it.
	r := run(t, s, ws, "mkdir -p /opt/agentexec-test-dir")
	if o := out(r); r.ExitCode == 0 || !strings.Contains(o, "workspace-write sandbox profile") {
		t.Errorf("no note after a denied write: %s", o)
	}
}

func realGOROOT() string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "/usr/local/go"
	}
	return real(strings.TrimSpace(string(out)))
}

// TestEscapesFallback: without namespaces (forced here; the kernel refuses
// them in some containers) a namespaced profile falls back to Landlock,
// seccomp and dropped capabilities, which still hold these classes. What
// it does not cover is in the README and in sandbox status.
func TestEscapesFallback(t *testing.T) {
	forceFallback = true
	defer func() { forceFallback = false }()
	tln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tln.Close()
	abstract := "agentexec-test-fb-" + strconv.Itoa(os.Getpid())
	aln, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer aln.Close()
	acceptAndClose(tln, aln)
	host := strconv.Itoa(os.Getpid())
	for _, profile := range []string{"workspace-write", "no-network"} {
		t.Run(profile, func(t *testing.T) {
			ws, s := boxed(t, profile)
			s.BestEffort = true
			attempts := []string{
				"mknod-block=" + filepath.Join(ws, "blk"), "mknod-char=" + filepath.Join(ws, "chr"),
				"sethostname", "ifflags", "bpf", "perf", "packet", "netlink-audit", "keyctl",
				"environ=" + host, "maps=" + host, "prlimit=" + host, "renice=" + host, "taskset=" + host, "kill=" + host,
				"tfo=" + tln.Addr().String(), "tfo-connect", "abstract=" + abstract, "ptrace=" + host,
				"unshare", "mount=" + ws, "chroot", "iouring", "openw=/proc/sys/kernel/hostname", "openw=/proc/sysrq-trigger",
			}
			if profile == "no-network" {
				attempts = append(attempts, "unix="+filepath.Join(ws, "nothing.sock"))
			}
			allHeld(t, profile+" (fallback)", attempts, tryIn(t, s, ws, attempts...))
			if o := out(run(t, s, ws, "echo $AGENTEXEC_SANDBOX $GOCACHE")); !strings.HasPrefix(o, profile+" /") {
				t.Errorf("fallback environment: %q", o)
			}
		})
	}
}

// FuzzNote: the note about a denied path reads untrusted output; it never
// panics, is one line, and names at most a path taken from the output.
func FuzzNote(f *testing.F) {
	f.Add([]byte("touch: cannot touch '/usr/x': Read-only file system\n"))
	f.Add([]byte("mkdir: cannot create directory ‘/opt/x’: Permission denied"))
	f.Add([]byte("open /etc/shadow: permission denied\x00\xff"))
	f.Add([]byte("EACCES: permission denied, mkdir '~/.npm'"))
	s := Spec{Name: "workspace-write", HomeDir: "/home/u"}
	plan := &nsPlan{writable: []string{"/home/u", "/tmp", "/w"}}
	res := &runner.Result{Outcome: runner.Exited, ExitCode: 1}
	f.Fuzz(func(t *testing.T, b []byte) {
		note := noteDenied(&s, plan, res, b)
		if note == "" {
			return
		}
		if strings.Count(note, "\n") != 1 || !strings.HasSuffix(note, "\n") || !strings.HasPrefix(note, "[agentexec] ") {
			t.Fatalf("note %q", note)
		}
	})
}

// acceptAndClose accepts and at once closes every connection to each
// listener, until the listener is closed.
func acceptAndClose(lns ...net.Listener) {
	for _, ln := range lns {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
}
