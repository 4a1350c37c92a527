//go:build linux && amd64

package sandbox

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/agentexec/agentexec/capture"
	"github.com/agentexec/agentexec/egress"
	"github.com/agentexec/agentexec/internal/proctest"
	"github.com/agentexec/agentexec/runner"
	"golang.org/x/sys/unix"
)

// needRaw skips a test of the in-process launcher where it is not used.
func needRaw(t *testing.T) {
	t.Helper()
	needNS(t)
	if raw, err := useRaw(LauncherRaw); !raw {
		t.Skipf("the in-process launcher is not used here: %v", err)
	}
}

// rawWrap returns a hook that runs s through the raw launcher, its static
// program first changed by edit (when not nil).
func rawWrap(t *testing.T, s Spec, edit func(p *rawProg)) func(string, []string, []string) (*runner.Wrapped, error) {
	t.Helper()
	plan, err := planNamespaces(&s)
	if err != nil {
		t.Fatal(err)
	}
	st := rawStaticOf(t, &s, plan)
	if edit != nil {
		p := *st.prog
		p.ops, p.rels, p.descs = slices.Clone(p.ops), slices.Clone(p.rels), slices.Clone(p.descs)
		edit(&p)
		st = &rawStatic{prog: &p, chdirOp: st.chdirOp, label: st.label, userFD: st.userFD}
	}
	return func(path string, argv, env []string) (*runner.Wrapped, error) {
		return wrapRaw(st, s, plan, nil, path, argv, env)
	}
}

// rawStaticOf compiles s and plan as Wrapper does.
func rawStaticOf(t *testing.T, s *Spec, plan *nsPlan) *rawStatic {
	t.Helper()
	st, err := compileStatic(s, plan, 0)
	if err == nil && userNamespace() {
		exe, _ := os.Executable()
		st.userFD, err = sharedUserNS(exe)
	}
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// breakStep makes the first operation of step that fails the run fail
// with ENOSYS; it reports whether there was one.
func breakStep(p *rawProg, step string) bool {
	for i, o := range p.ops {
		// (Descriptors come first: a failure there cannot be reported,
		// as the status descriptor may not be in place yet.)
		if p.descs[i].step == step && o.flags == 0 && o.okErr == 0 && !strings.HasSuffix(p.descs[i].what, "descriptors") {
			p.ops[i].nr = 100000
			return true
		}
	}
	return false
}

// TestRawSetupFailures: a failure at each step of the init's program, and
// of the command's, is a SetupError naming the step with the error, the
// command never runs, and nothing is left behind.
func TestRawSetupFailures(t *testing.T) {
	needRaw(t)
	ws, s := boxed(t, "strict")
	marker := filepath.Join(ws, "ran")
	runWith := func(t *testing.T, wrap func(string, []string, []string) (*runner.Wrapped, error), dir string) error {
		os.Remove(marker)
		token := proctest.Token(t)
		res, err := runner.Run(context.Background(), runner.Spec{
			Argv: []string{"/bin/sh", "-c", "touch " + marker}, Dir: dir, Env: append(runner.SafeEnv(), token), Wrap: wrap, Timeout: 20 * time.Second,
		})
		if err == nil {
			t.Fatalf("the run did not fail: %s", res.Describe())
		}
		if _, serr := os.Stat(marker); serr == nil {
			t.Error("the command ran")
		}
		proctest.NoSurvivors(t, token)
		return err
	}
	setupError := func(t *testing.T, err error) *SetupError {
		t.Helper()
		var se *SetupError
		if !errors.Is(err, runner.ErrSandbox) || !errors.As(err, &se) {
			t.Fatalf("not a sandbox SetupError: %v", err)
		}
		return se
	}
	// Each step of the static program.
	for _, step := range []string{StepMounts, StepNetwork, StepDir, StepCaps, StepNoNewPrv, StepLandlock, StepSeccomp} {
		t.Run(step, func(t *testing.T) {
			found := false
			wrap := rawWrap(t, s, func(p *rawProg) { found = breakStep(p, step) })
			if !found {
				t.Fatalf("no operation of step %q", step)
			}
			se := setupError(t, runWith(t, wrap, ws))
			if se.Step != step || se.Errno != int(syscall.ENOSYS) || !strings.Contains(se.Msg, syscall.ENOSYS.Error()) {
				t.Errorf("got %+v", se)
			}
		})
	}
	// Each step of the run's own operations.
	for _, step := range []string{StepStart, StepCgroup, StepRlimits, StepExec} {
		t.Run("run/"+step, func(t *testing.T) {
			if step == StepCgroup && Probe().PidsCgroup == "" && !MemoryCgroup() {
				t.Skip("no cgroup is joined on this host")
			}
			found := false
			rawTestEdit = func(p *rawProg) { found = breakStep(p, step) }
			defer func() { rawTestEdit = nil }()
			err := runWith(t, rawWrap(t, s, nil), ws)
			if !found {
				t.Fatalf("no operation of step %q", step)
			}
			if se := setupError(t, err); se.Step != step || se.Errno != int(syscall.ENOSYS) {
				t.Errorf("got %+v", se)
			}
		})
	}
	// Real failures, with the trampoline's texts.
	t.Run("missing program", func(t *testing.T) {
		err := runWith(t, func(path string, argv, env []string) (*runner.Wrapped, error) {
			return rawWrap(t, s, nil)("/no/such/program", argv, env)
		}, ws)
		if se := setupError(t, err); se.Step != StepExec || se.Errno != int(syscall.ENOENT) || se.Msg != "/no/such/program: no such file or directory" {
			t.Errorf("got %+v", se)
		}
	})
	t.Run("hidden directory", func(t *testing.T) {
		outside := t.TempDir()
		se := setupError(t, runWith(t, rawWrap(t, s, nil), outside))
		if se.Step != StepDir || !strings.Contains(se.Msg, outside+" is not visible under the strict profile") {
			t.Errorf("got %+v", se)
		}
	})
	t.Run("bad mount", func(t *testing.T) {
		s2 := s
		plan, _ := planNamespaces(&s2)
		plan.mounts = append(plan.mounts, Mount{Kind: mBindRO, Src: "/no/such/dir", Dst: "/nowhere"})
		st := rawStaticOf(t, &s2, plan)
		se := setupError(t, runWith(t, func(path string, argv, env []string) (*runner.Wrapped, error) {
			return wrapRaw(st, s2, plan, nil, path, argv, env)
		}, ws))
		if se.Step != StepMounts || se.Msg != "ro /nowhere: no such file or directory" {
			t.Errorf("got %+v", se)
		}
	})
	t.Run("landlock rule", func(t *testing.T) {
		plan, _ := planNamespaces(&s)
		plan.rules = append(plan.rules, PathRule{Path: "/etc/passwd/x"})
		st := rawStaticOf(t, &s, plan)
		se := setupError(t, runWith(t, func(path string, argv, env []string) (*runner.Wrapped, error) {
			return wrapRaw(st, s, plan, nil, path, argv, env)
		}, ws))
		if se.Step != StepLandlock || se.Msg != "open /etc/passwd/x for a Landlock rule: not a directory" {
			t.Errorf("got %+v", se)
		}
	})
}

// TestRawInitDies: the host survives an init that dies during its setup
// (here it exits at once, or after building the root), reports it, and
// goes on launching.
func TestRawInitDies(t *testing.T) {
	needRaw(t)
	ws, s := boxed(t, "workspace-write")
	die := rawOp{nr: unix.SYS_EXIT_GROUP, in: -1, inArg: -1, in2: -1, save: -1}
	cases := map[string]func(t *testing.T) func(string, []string, []string) (*runner.Wrapped, error){
		"at once": func(t *testing.T) func(string, []string, []string) (*runner.Wrapped, error) {
			rawTestEdit = func(p *rawProg) {
				p.ops = slices.Insert(p.ops, 0, die)
				p.rels = slices.Insert(p.rels, 0, 0)
				p.descs = slices.Insert(p.descs, 0, rawDesc{})
			}
			return rawWrap(t, s, nil)
		},
		"after the root": func(t *testing.T) func(string, []string, []string) (*runner.Wrapped, error) {
			return rawWrap(t, s, func(p *rawProg) {
				p.ops[len(p.ops)-1] = die // in place of the last step, the seccomp filter
			})
		},
	}
	for name, wrap := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() { rawTestEdit = nil }()
			_, err := runner.Run(context.Background(), runner.Spec{Argv: []string{"/bin/true"}, Dir: ws, Wrap: wrap(t), Timeout: 20 * time.Second})
			var se *SetupError
			if !errors.As(err, &se) || se.Step != StepStart || !strings.Contains(se.Msg, "ended during its setup") {
				t.Errorf("got %v", err)
			}
		})
	}
	if r := run(t, s, ws, "echo still working"); out(r) != "still working\n" {
		t.Errorf("after the failures: %s %q", r.Describe(), out(r))
	}
}

// TestRawDescriptors: the command gets descriptors 0, 1 and 2 only, even
// when the host holds descriptors without close-on-exec; the init's
// status descriptor does not reach it.
func TestRawDescriptors(t *testing.T) {
	needRaw(t)
	ws, s := boxed(t, "workspace-write")
	leak, err := syscall.Open("/etc/hostname", syscall.O_RDONLY, 0) // no O_CLOEXEC: a careless library
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(leak)
	argv, helper := proctest.HelperArgv(t, "fds")
	r := run(t, s, ws, strings.Join(quoteAll(argv), " "), helper)
	if o := strings.TrimSpace(out(r)); o != "0 1 2" {
		t.Errorf("descriptors in the command: %q (the host leaked %d)", o, leak)
	}
}

// TestRawManyLaunches: many launches from 8 goroutines while others
// allocate and collect garbage leave the host's Go state intact (run it
// under -race): every command gets exactly its own argv and environment
// and reports its own status.
func TestRawManyLaunches(t *testing.T) {
	needRaw(t)
	// 2000 launches take about 45 s under -race on a loaded 2-core
	// machine: that many with AGENTEXEC_TEST_STRESS=1, 300 otherwise.
	n := 300
	if os.Getenv("AGENTEXEC_TEST_STRESS") != "" {
		n = 2000
	} else if testing.Short() {
		n = 200
	}
	ws, s := boxed(t, "workspace-write")
	w, err := s.Wrapper(Options{Launcher: LauncherRaw})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var churn sync.WaitGroup
	for range 2 {
		churn.Go(func() {
			var keep [][]byte
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				keep = append(keep, make([]byte, 1024+i%4096))
				if len(keep) > 4096 {
					keep = nil
					runtime.GC()
				}
			}
		})
	}
	defer func() {
		close(stop)
		churn.Wait()
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	start := time.Now()
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < n; i += 8 {
				word := fmt.Sprintf("run-%d-%s", i, strings.Repeat("x", i%300))
				res, err := runner.Run(context.Background(), runner.Spec{
					Argv: []string{"/bin/sh", "-c", `echo "$1 $WORD"; exit $(($2 % 7))`, "sh", word, fmt.Sprint(i)},
					Env:  []string{"WORD=" + word, "PATH=/usr/bin:/bin"}, Dir: ws, Wrap: w, Timeout: 60 * time.Second,
					Combined: capture.Limit{Max: 4096},
				})
				if err != nil {
					errs <- fmt.Errorf("run %d: %w", i, err)
					return
				}
				if got := out(res); got != word+" "+word+"\n" || res.ExitCode != i%7 {
					errs <- fmt.Errorf("run %d: %s, output %q", i, res.Describe(), got)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d launches in %v", n, time.Since(start))
}

// TestLaunchers runs the escape tests again with the Go trampoline, the
// fallback launcher (the default run uses the in-process one).
func TestLaunchers(t *testing.T) {
	needRaw(t)
	if os.Getenv(LauncherEnv) != "" {
		t.Skip("already choosing a launcher")
	}
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run", "^(TestIsolation|TestSetupFailure|TestEscape.*|TestEgress.*)$", "-test.count=1", "-test.short", "-test.v")
	cmd.Env = append(os.Environ(), LauncherEnv+"="+LauncherTrampoline)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("with the trampoline: %v\n%s", err, out)
	}
	for _, want := range []string{"--- PASS: TestEscapes ", "--- PASS: TestEscapeFiles ", "--- PASS: TestEscapesFallback ", "--- PASS: TestIsolation ", "--- PASS: TestEgressAllowlist ", "--- PASS: TestEgressPrivateAddress "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("with the trampoline, %q is missing:\n%s", want, out)
		}
	}
}

// TestRawEgressListener: an init compiled with an egress port listens on
// 127.0.0.1:port in the run's network namespace and sends the listener to
// the host (what a network = "allowlist" run needs; issue #14 wires it).
func TestRawEgressListener(t *testing.T) {
	needRaw(t)
	ws, s := boxed(t, "no-network")
	s.NoNetwork, s.Allowlist = false, true // the listener is an allowlist's
	plan, err := planNamespaces(&s)
	if err != nil {
		t.Fatal(err)
	}
	st, err := compileStatic(&s, plan, egressTestPort)
	if err == nil && userNamespace() {
		exe, _ := os.Executable()
		st.userFD, err = sharedUserNS(exe)
	}
	if err != nil {
		t.Fatal(err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host := os.NewFile(uintptr(fds[0]), "egress")
	defer host.Close()
	child := os.NewFile(uintptr(fds[1]), "egress-child")
	got := make(chan string, 1)
	go func() {
		buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
		n, oobn, _, _, err := unix.Recvmsg(int(host.Fd()), buf, oob, 0)
		if err != nil {
			got <- err.Error()
			return
		}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		if len(msgs) != 1 {
			got <- "no descriptor"
			return
		}
		lfds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(lfds) != 1 {
			got <- fmt.Sprint("rights: ", err)
			return
		}
		defer unix.Close(lfds[0])
		sa, _ := unix.Getsockname(lfds[0])
		acc, _ := unix.GetsockoptInt(lfds[0], unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
		in4, _ := sa.(*unix.SockaddrInet4)
		if in4 == nil {
			got <- "not inet"
			return
		}
		got <- fmt.Sprintf("%s %v:%d listening=%d", buf[:n], in4.Addr, in4.Port, acc)
	}()
	res, err := runner.Run(context.Background(), runner.Spec{
		Argv: []string{"/bin/sh", "-c", "ls /proc/self/fd | wc -l"}, Dir: ws, Timeout: 20 * time.Second, Combined: capture.Limit{Max: 4096},
		Wrap: func(path string, argv, env []string) (*runner.Wrapped, error) {
			return wrapRaw(st, s, plan, child, path, argv, env)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want, g := fmt.Sprintf("L [127 0 0 1]:%d listening=1", egressTestPort), <-got; g != want {
		t.Errorf("the host got %q, want %q", g, want)
	}
	if res.ExitCode != 0 {
		t.Errorf("%s: %s", res.Describe(), out(res))
	}
}

// TestRawAllowlistParity: the in-process launcher's compiled program
// confines a network = "allowlist" spec as the trampoline does behind the
// namespace wall: a network namespace, loopback up, the listener sent
// only for Allowlist with a port, the network-off seccomp filter, and a
// Landlock ruleset that leaves TCP to the namespace but still scopes
// abstract sockets and signals (also without Filesystem).
func TestRawAllowlistParity(t *testing.T) {
	abi := llABI()
	if abi < llNeededABI {
		t.Skipf("Landlock ABI %d", abi)
	}
	_, ws := boxed(t, "workspace-write")
	for _, c := range []struct {
		name                  string
		spec                  Spec
		port                  int
		netns, listen, netoff bool
		handledNet            bool
	}{
		{"network on", ws, 0, false, false, false, false},
		{"no network", withNet(ws, true, false), 0, true, false, true, true},
		{"allowlist", withNet(ws, false, true), DefaultEgressPort, true, true, true, false},
		{"allowlist without a proxy", withNet(ws, false, true), 0, true, false, true, false},
		{"no network with a port", withNet(ws, true, false), DefaultEgressPort, true, false, true, true},
		{"allowlist, no filesystem", Spec{Isolate: true, Allowlist: true}, DefaultEgressPort, true, true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.spec
			if got := nsCloneFlags(s.netOff())&unix.CLONE_NEWNET != 0; got != c.netns {
				t.Errorf("network namespace %v, want %v", got, c.netns)
			}
			plan, err := planNamespaces(&s)
			if err != nil {
				t.Fatal(err)
			}
			st, err := compileStatic(&s, plan, c.port)
			if err != nil {
				t.Fatal(err)
			}
			p := st.prog
			at := func(off uintptr, n int) []byte { return p.data[off-p.base : off-p.base+uintptr(n)] }
			var loopback, sent bool
			var ruleset []byte
			var filt []byte
			for i, o := range p.ops {
				switch o.nr {
				case unix.SYS_IOCTL:
					loopback = loopback || o.args[1] == unix.SIOCSIFFLAGS
				case unix.SYS_SENDMSG:
					sent = true
					if p.descs[i].step != StepEgress {
						t.Errorf("the listener is sent in step %q", p.descs[i].step)
					}
				case unix.SYS_LANDLOCK_CREATE_RULESET:
					ruleset = at(o.args[0], 24)
				case unix.SYS_SECCOMP:
					fprog := at(o.args[2], 16)
					n := int(binary.LittleEndian.Uint16(fprog))
					filt = at(uintptr(binary.LittleEndian.Uint64(fprog[8:])), n*8)
				}
			}
			if loopback != c.netns || sent != c.listen {
				t.Errorf("loopback up %v, listener sent %v; want %v, %v", loopback, sent, c.netns, c.listen)
			}
			want, err := filter(c.netoff)
			if err != nil {
				t.Fatal(err)
			}
			if wb := unsafe.Slice((*byte)(unsafe.Pointer(&want[0])), len(want)*8); !bytes.Equal(filt, wb) {
				t.Errorf("the seccomp filter is not the trampoline's filter(%v)", c.netoff)
			}
			if ruleset == nil {
				t.Fatal("no Landlock ruleset")
			}
			handledNet := binary.LittleEndian.Uint64(ruleset[8:])
			scoped := binary.LittleEndian.Uint64(ruleset[16:])
			if (handledNet != 0) != c.handledNet || scoped != llScopedAll {
				t.Errorf("Landlock handles TCP %#x, scopes %#x; want TCP %v, scopes %#x", handledNet, scoped, c.handledNet, llScopedAll)
			}
		})
	}
}

func withNet(s Spec, off, allowlist bool) Spec {
	s.NoNetwork, s.Allowlist = off, allowlist
	return s
}

// TestRawAllowlistRun: the Wrapper of an allowlist spec, asked for the
// in-process launcher, uses it (no fallback to the trampoline), and its
// command reaches the proxy and nothing else.
func TestRawAllowlistRun(t *testing.T) {
	needRaw(t)
	_, s, _ := egressSpec(t, egress.Config{Allow: []string{"allowed.test"}}, testNames{})
	ws := t.TempDir()
	os.Chmod(ws, 0o777)
	s.ReadWrite = append(s.ReadWrite, ws)
	w, err := s.Wrapper(Options{Launcher: LauncherRaw})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := w("/bin/true", []string{"true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if probe.Start == nil || len(probe.Files) != 2 {
		t.Errorf("not the in-process launcher with the egress link: start %v, %d files", probe.Start != nil, len(probe.Files))
	}
	for _, f := range probe.Files {
		f.Close()
	}
	probe.Done()
	for _, c := range []struct {
		op   []string
		want string
	}{
		{[]string{"connect", "127.0.0.1:" + strconv.Itoa(DefaultEgressPort)}, "ok"},
		{[]string{"udp"}, "error"},
		{[]string{"unix"}, "error"},
	} {
		argv, helper := proctest.HelperArgv(t, "net", c.op...)
		res, err := runner.Run(context.Background(), runner.Spec{
			Argv: argv, Env: append(runner.SafeEnv(), helper), Dir: ws, Timeout: 20 * time.Second, Combined: capture.Limit{Max: 4096}, Wrap: w,
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := out(res); !strings.HasPrefix(got, c.want) {
			t.Errorf("%v: %q, want %s", c.op, got, c.want)
		}
	}
}

// egressTestPort is the port the egress test listens on (the egress
// branch's DefaultEgressPort).
const egressTestPort = 3128
