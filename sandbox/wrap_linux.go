package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agentexec/agentexec/runner"
)

// Wrapper returns the runner hook that starts commands under s, or nil
// when s confines nothing. It fails when s asks for a layer this system
// lacks (unless s.BestEffort).
func (s *Spec) Wrapper(o Options) (func(path string, argv, env []string) (*runner.Wrapped, error), error) {
	if !s.Enabled() {
		return nil, nil
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if !s.BestEffort {
		if missing := s.Missing(); len(missing) > 0 {
			return nil, fmt.Errorf("sandbox: %s: %w; use a weaker profile, or set best_effort = true to run without it", strings.Join(missing, "; "), ErrUnavailable)
		}
	}
	exe := o.Executable
	if exe == "" {
		var err error
		if exe, err = trampolineExecutable(); err != nil {
			return nil, fmt.Errorf("sandbox: cannot find this program to run the trampoline: %w", err)
		}
	}
	spec := *s
	if spec.Isolate && Probe().UserNS && !forceFallback {
		plan, err := planNamespaces(&spec)
		if err != nil {
			return nil, err
		}
		raw, err := useRaw(o.Launcher)
		if err != nil {
			return nil, err
		}
		if raw {
			egressPort := 0
			if spec.Allowlist && spec.Egress != nil {
				egressPort = DefaultEgressPort
			}
			st, err := compileStatic(&spec, plan, egressPort)
			if err == nil && userNamespace() {
				st.userFD, err = sharedUserNS(exe)
			}
			switch {
			case err == nil:
				return func(path string, argv, env []string) (*runner.Wrapped, error) {
					eg, env, err := egressFor(&spec, env)
					if err != nil {
						return nil, err
					}
					var child *os.File
					if eg != nil {
						child = eg.child
					}
					w, err := wrapRaw(st, spec, plan, child, path, argv, env)
					if err != nil {
						eg.close()
						return nil, err
					}
					eg.attach(w)
					return w, nil
				}, nil
			case launcherChoice(o.Launcher) == LauncherRaw:
				return nil, err
			}
			// Otherwise the trampoline does without the shared user
			// namespace.
		}
		return func(path string, argv, env []string) (*runner.Wrapped, error) {
			return wrapNS(exe, spec, plan, path, argv, env)
		}, nil
	}
	var rules []PathRule
	if spec.Filesystem {
		rules = cachedRules(&spec) // walked once per set of paths, not per run
		if spec.Isolate && spec.Cache != "" && os.MkdirAll(spec.Cache, 0o700) == nil {
			rules = append(rules[:len(rules):len(rules)], PathRule{Path: spec.Cache, Write: true})
		}
	}
	return func(path string, argv, env []string) (*runner.Wrapped, error) {
		if spec.Isolate {
			env = withEnv(env, append(cacheEnv(spec.Cache), EnvVar+"="+spec.label()))
		}
		return wrapRules(exe, spec, rules, path, argv, env)
	}, nil
}

// ProxyEnv is what tells a command the proxy at 127.0.0.1:port: the usual
// variables in both cases (curl, git, pip, Go, cargo, Node's undici with
// NODE_USE_ENV_PROXY, Python's requests read them) and the settings of
// the tools that read their own (npm, yarn, pip, cargo). ALL_PROXY is the
// SOCKS5 form, with names resolved by the proxy.
func ProxyEnv(port int) []string {
	hp := "127.0.0.1:" + strconv.Itoa(port)
	http, socks := "http://"+hp, "socks5h://"+hp
	const noProxy = "localhost,127.0.0.1,::1"
	return []string{
		"HTTP_PROXY=" + http, "HTTPS_PROXY=" + http, "ALL_PROXY=" + socks, "NO_PROXY=" + noProxy,
		"http_proxy=" + http, "https_proxy=" + http, "all_proxy=" + socks, "no_proxy=" + noProxy,
		"npm_config_proxy=" + http, "npm_config_https_proxy=" + http, "npm_config_noproxy=" + noProxy,
		"YARN_HTTP_PROXY=" + http, "YARN_HTTPS_PROXY=" + http,
		"PIP_PROXY=" + http, "CARGO_HTTP_PROXY=" + http, "NODE_USE_ENV_PROXY=1",
	}
}

// egressNote says which destinations the proxy refused during a run.
func egressNote(refused []string) string {
	if len(refused) == 0 {
		return ""
	}
	return "agentexec: the sandbox's network allowlist refused: " + strings.Join(refused, "; ")
}

// launcherChoice is the launcher asked for: launcher, or else the
// environment's.
func launcherChoice(launcher string) string {
	if launcher == "" {
		return os.Getenv(LauncherEnv)
	}
	return launcher
}

// useRaw says whether the namespaced launch goes through the in-process
// launcher (built for linux/amd64).
func useRaw(launcher string) (bool, error) {
	launcher = launcherChoice(launcher)
	possible := rawAvailable
	switch launcher {
	case "":
		return possible, nil
	case LauncherTrampoline:
		return false, nil
	case LauncherRaw:
		if !possible {
			return false, fmt.Errorf("sandbox: launcher %q: %w; use %q", launcher, errRawUnavailable, LauncherTrampoline)
		}
		return true, nil
	}
	return false, fmt.Errorf("sandbox: unknown launcher %q; the launchers are %q and %q", launcher, LauncherRaw, LauncherTrampoline)
}

// forceFallback makes Wrapper use the fallback without namespaces (tests
// of the fallback, on hosts where namespaces work).
var forceFallback bool

// withEnv returns env with set's variables replacing any of the same
// name.
func withEnv(env, set []string) []string {
	for _, kv := range set {
		k, v, _ := strings.Cut(kv, "=")
		env = setEnv(env, k, v)
	}
	return env
}

// wrapNS prepares one run of s behind the namespace wall.
func wrapNS(exe string, s Spec, plan *nsPlan, path string, argv, env []string) (*runner.Wrapped, error) {
	l := launch{Path: path, Argv: argv, Env: withEnv(env, plan.env), Spec: s, Rules: plan.rules, NS: true, Mounts: plan.mounts, UserNS: userNamespace(), UID: os.Getuid(), GID: os.Getgid()}
	l.Spec.ReadOnly, l.Spec.ReadWrite, l.Spec.Hidden, l.Spec.Home = nil, nil, nil, nil
	eg, env, err := egressFor(&s, l.Env)
	if err != nil {
		return nil, err
	}
	if eg != nil {
		l.EgressPort = DefaultEgressPort
	}
	l.Env = env
	w, err := start(exe, &l, nil)
	if err != nil {
		eg.close()
		return nil, err
	}
	w.Attr = nsAttr(s.netOff())
	w.Finish = func(res *runner.Result, tail []byte) string { return noteDenied(&s, plan, res, tail) }
	if eg != nil {
		w.Files = append(w.Files, eg.child) // egressFD
		eg.attach(w)
	}
	return w, nil
}

// egressFor returns the egress link of one run of s behind the namespace
// wall, with env telling the command the proxy at 127.0.0.1:
// DefaultEgressPort; or nil and env unchanged when s has no way out
// (not Allowlist, or no proxy). Both launchers use it.
func egressFor(s *Spec, env []string) (*egressLink, []string, error) {
	if !s.Allowlist || s.Egress == nil {
		return nil, env, nil
	}
	eg, err := newEgressLink(s.Egress)
	if err != nil {
		return nil, nil, err
	}
	return eg, withEnv(env, ProxyEnv(DefaultEgressPort)), nil
}

// attach makes w's run serve the egress: once w's own Started saw the
// program start, the listener the sandbox's init sent on the link's
// child end (which the caller put among w.Files) is taken and served;
// Finish adds what the proxy refused to w's note; Done stops serving and
// closes the link. Both launchers use it.
func (e *egressLink) attach(w *runner.Wrapped) {
	if e == nil {
		return
	}
	started, done, finish := w.Started, w.Done, w.Finish
	w.Started = func(pid int) error {
		if started != nil {
			if err := started(pid); err != nil {
				return err
			}
		}
		return e.receive()
	}
	w.Finish = func(res *runner.Result, tail []byte) string {
		var note string
		if finish != nil {
			note = finish(res, tail)
		}
		if n := egressNote(e.stop()); n != "" {
			note = strings.TrimSpace(note + "\n" + n)
		}
		return note
	}
	w.Done = func() {
		e.stop()
		e.close()
		if done != nil {
			done()
		}
	}
}

// egressLink is the host's end of an Allowlist run's way out: a Unix
// socket pair whose child end becomes the trampoline's egressFD, and the
// listener the trampoline sends back on it.
type egressLink struct {
	proxy       EgressProxy
	host, child *os.File
	stopServing func() []string
	refused     []string
	stopped     bool
}

func newEgressLink(p EgressProxy) (*egressLink, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: egress socket pair: %w", err)
	}
	return &egressLink{proxy: p, host: os.NewFile(uintptr(fds[0]), "egress"), child: os.NewFile(uintptr(fds[1]), "egress-child")}, nil
}

// receive takes the listener the trampoline sent (it sent it before it
// reported the program started) and serves it.
func (e *egressLink) receive() error {
	fail := func(msg string, err error) error {
		return &SetupError{Step: StepEgress, Msg: fmt.Sprintf("%s: %v", msg, err)}
	}
	oob := make([]byte, unix.CmsgSpace(4))
	buf := make([]byte, 1)
	rc, err := e.host.SyscallConn()
	if err != nil {
		return fail("egress socket", err)
	}
	var n, oobn int
	var rerr error
	// The trampoline sent the listener before it reported the program
	// started: it is there to take, without waiting.
	if err := rc.Control(func(fd uintptr) {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_DONTWAIT)
	}); err != nil {
		return fail("receive the listener", err)
	}
	if rerr != nil || n != 1 {
		return fail("receive the listener", fmt.Errorf("the trampoline sent none (%v)", rerr))
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return fail("receive the listener", fmt.Errorf("no descriptor (%v)", err))
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return fail("receive the listener", fmt.Errorf("expected one descriptor (%v)", err))
	}
	f := os.NewFile(uintptr(fds[0]), "egress-listener")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return fail("use the listener", err)
	}
	e.stopServing = e.proxy.ServeListener(ln)
	return nil
}

// stop ends the serving (once) and returns what the proxy refused.
func (e *egressLink) stop() []string {
	if e == nil {
		return nil
	}
	if !e.stopped && e.stopServing != nil {
		e.stopped = true
		e.refused = e.stopServing()
	}
	return e.refused
}

func (e *egressLink) close() {
	if e != nil {
		e.host.Close()
		e.child.Close()
	}
}

// Missing lists the layers s asks for that this system cannot provide.
func (s *Spec) Missing() []string {
	st := Probe()
	var out []string
	if (s.Filesystem || s.netOff()) && st.LandlockABI < 6 {
		out = append(out, fmt.Sprintf("Landlock ABI 6 is needed, this kernel has %d", st.LandlockABI))
	}
	if s.Isolate && !st.UserNS {
		out = append(out, "namespaces cannot be created ("+st.UserNSDetail+"); without them the wall is Landlock and seccomp only, which leaves pathname Unix sockets reachable, /proc of the host's processes visible, and (with network) TCP listeners reachable")
	}
	if (s.netOff() || s.Isolate) && !st.Seccomp {
		out = append(out, "seccomp is not available")
	}
	if s.Processes > 0 && st.PidsCgroup == "" && os.Getuid() == 0 {
		out = append(out, "no writable pids cgroup to cap processes, and RLIMIT_NPROC does not apply to root")
	}
	return out
}

// wrap prepares one run of s (its rules worked out now).
func wrap(exe string, s Spec, path string, argv, env []string) (*runner.Wrapped, error) {
	return wrapRules(exe, s, planRules(&s), path, argv, env)
}

func wrapRules(exe string, s Spec, rules []PathRule, path string, argv, env []string) (*runner.Wrapped, error) {
	var cleanups []func()
	l := launch{Path: path, Argv: argv, Env: env, Spec: s, Rules: rules}
	if s.Allowlist && s.Egress != nil {
		port, err := s.Egress.HostPort()
		if err != nil {
			return nil, fmt.Errorf("sandbox: the egress proxy: %w", err)
		}
		l.EgressPort = port
		l.Env = withEnv(l.Env, ProxyEnv(port))
	}
	l.Spec.ReadOnly, l.Spec.ReadWrite, l.Spec.Hidden = nil, nil, nil // the rules say it all
	if s.PrivateTmp {
		dir, err := os.MkdirTemp("", "agentexec-tmp-")
		if err != nil {
			return nil, fmt.Errorf("sandbox: private tmp: %w", err)
		}
		if s.Isolate && os.Geteuid() != 0 {
			os.Chmod(dir, 0o700)
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		l.Rules = append(l.Rules[:len(l.Rules):len(l.Rules)], PathRule{Path: dir, Write: true})
		l.Env = setEnv(l.Env, "TMPDIR", dir)
	}
	return start(exe, &l, cleanups)
}

// start sends l to a trampoline that the runner starts (with the
// cgroups l needs), and reads what it reports.
func start(exe string, l *launch, cleanups []func()) (*runner.Wrapped, error) {
	done := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	s := &l.Spec
	var moved string
	if s.Processes > 0 || s.MemoryBytes > 0 {
		procs, remove, capped, memLimited := newCgroups(s)
		l.MemCgroup = memLimited
		l.CgroupProcs = procs
		cleanups = append(cleanups, remove)
		if len(procs) > 0 {
			moved = filepath.Dir(procs[0])
		}
		l.Nproc = !capped
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		done()
		return nil, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		done()
		return nil, err
	}
	payload, err := json.Marshal(l)
	if err != nil {
		done()
		return nil, err
	}
	if len(payload) <= 32<<10 {
		// Fits in the pipe's buffer: written before the trampoline starts,
		// so that it reads at once.
		specW.Write(payload)
		specW.Close()
	} else {
		go func() {
			specW.Write(payload)
			specW.Close()
		}()
	}
	dec := json.NewDecoder(io.LimitReader(statusR, 1<<20))
	return &runner.Wrapped{
		Cgroup: moved, // the trampoline leaves the run's cgroup for it
		Path:   exe,
		Argv:   []string{exe, trampolineArg},
		Env:    trampolineEnv,
		Files:  []*os.File{specR, statusW},
		Started: func(pid int) error {
			var msg struct {
				SetupError
				exitMsg
			}
			switch err := dec.Decode(&msg); {
			case err == io.EOF:
				return nil // the status descriptor closed on exec: the target runs
			case err != nil:
				return &SetupError{Step: StepReadSpec, Msg: "the trampoline failed: " + err.Error()}
			case msg.OK:
				return nil // the namespace's init started the target
			case msg.Step == "":
				return &SetupError{Step: StepReadSpec, Msg: "the trampoline failed without saying why"}
			}
			return &msg.SetupError
		},
		Exited: func(code, signal int) (int, int) {
			var msg exitMsg
			if dec.Decode(&msg) == nil && msg.Exited {
				return msg.Code, msg.Signal // the program's own status, not its init's
			}
			return code, signal
		},
		Done: func() {
			statusR.Close()
			done()
		},
	}, nil
}

func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// HelperName is the small trampoline program agentexec prefers when it is
// installed next to its own binary.
const HelperName = "agentexec-sandbox"

// trampolineExecutable returns agentexec-sandbox next to this program when
// it is there (a small program starts faster), else this program itself.
func trampolineExecutable() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	helper := filepath.Join(filepath.Dir(self), HelperName)
	if fi, err := os.Stat(helper); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return helper, nil
	}
	return self, nil
}

// ruleCache holds the planned rules of each set of paths: tools ask for a
// wrapper on every call, and planning walks the file system.
var ruleCache sync.Map // string -> []PathRule

func cachedRules(s *Spec) []PathRule {
	key := strings.Join(s.ReadOnly, "\x00") + "\x01" + strings.Join(s.ReadWrite, "\x00") + "\x01" + strings.Join(s.Hidden, "\x00")
	if r, ok := ruleCache.Load(key); ok {
		return r.([]PathRule)
	}
	r := planRules(s)
	ruleCache.Store(key, r)
	return r
}
