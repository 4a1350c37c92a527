package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

var probe = sync.OnceValue(func() State {
	var st State
	st.LandlockABI = llABI()
	// A filter can be installed where seccomp is compiled in: the
	// status file says so.
	if b, err := os.ReadFile("/proc/self/status"); err == nil && strings.Contains(string(b), "Seccomp:") {
		st.Seccomp = true
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) != "0" {
		st.UserNS = true
	}
	if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
		st.UserNS = false
	}
	if st.UserNS {
		// Measured: start a program the way the wall will (seccomp
		// profiles of container runtimes and AppArmor refuse it where
		// the sysctls allow it).
		st.UserNS, st.UserNSDetail = tryNamespaces()
	}
	for _, dir := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			continue
		}
		if dir != "/sys/fs/cgroup/pids" {
			if c, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers")); err == nil {
				st.CgroupV2 = true
				if !strings.Contains(string(c), "pids") {
					continue
				}
				// Child cgroups get the controller only when it is enabled
				// in this one's subtree_control.
				if sc, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control")); err != nil || !strings.Contains(string(sc), "pids") {
					continue
				}
			} else {
				continue
			}
		}
		if unix.Access(dir, unix.W_OK) == nil {
			st.PidsCgroup = dir
			break
		}
	}
	if p, err := exec.LookPath("bwrap"); err == nil {
		st.Bwrap = p
	}
	return st
})

// Probe returns what this system can do (measured once).
func Probe() State { return probe() }

// Status lists each layer for the default profile (workspace-write): see
// StatusOf.
func Status() []Layer {
	s, _ := Profile("workspace-write", ProfileOptions{Workspace: "/"})
	return StatusOf(&s)
}

// StatusOf lists each layer of the sandbox as used (s uses it and this
// system has it), available (s does not use it) or missing, with what it
// does, the escapes a missing layer leaves open, and the fix.
func StatusOf(s *Spec) []Layer {
	st := Probe()
	rt := DetectRuntime()
	root := os.Getuid() == 0
	state := func(l *Layer, used bool) {
		switch {
		case !l.Available:
			l.State = "missing"
		case used:
			l.State = "used"
		default:
			l.State = "available"
		}
	}
	var layers []Layer

	ns := Layer{Name: "namespaces", Available: st.UserNS,
		Detail: "new mount, PID, IPC, UTS (and for network-off profiles network) namespaces, with a user namespace for users other than root: " +
			"a new root showing only the system directories (read-only), the workspace, the tool cache, a private /tmp, an empty HOME and a fresh /proc; " + st.UserNSDetail,
		Open: "pathname Unix sockets outside the sandbox (ssh-agent, tmux, docker) are reachable; /proc shows the host's processes; " +
			"under network-off profiles TCP listeners on the host's loopback stay reachable through what seccomp cannot see, and nothing outlives the command only through the runner's sweep and cgroups",
		Fix: "sysctl user.max_user_namespaces=15000 (and kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0, where they exist); in a container, allow unshare/clone of namespaces in its seccomp profile"}
	state(&ns, s.Isolate)
	layers = append(layers, ns)

	caps := Layer{Name: "capabilities", Available: true, Detail: "every capability dropped (effective, permitted, inheritable, ambient, bounding), root included; no_new_privs"}
	state(&caps, s.Isolate)
	layers = append(layers, caps)

	ll := Layer{Name: "landlock", Available: st.LandlockABI >= 6, Detail: fmt.Sprintf("ABI %d", st.LandlockABI),
		Open: "without namespaces, writes anywhere the user may write and reads of hidden secrets; abstract Unix sockets and signals to outside processes; TCP bind/connect under network-off profiles"}
	switch {
	case st.LandlockABI == 0 && rt.GVisor:
		ll.Detail = "not implemented by gVisor (landlock_create_ruleset: " + rt.LandlockErrno.Error() + "); gVisor confines the pod as a whole instead: see \"outer runtime\""
		ll.Fix = "for per-command filesystem rules inside the pod, run it with runc (Linux 6.12 or later) instead of gVisor; or keep gVisor's pod-level boundary and give the pod nothing it must hide from its commands"
	case st.LandlockABI == 0:
		ll.Detail = "not enabled in this kernel"
		switch rt.LandlockErrno {
		case syscall.ENOSYS:
			ll.Detail = "the Landlock system calls do not exist here (ENOSYS): a kernel before 5.13 or built without Landlock, or a container seccomp profile that refuses them"
		case syscall.EOPNOTSUPP:
			ll.Detail = "built into this kernel but not enabled at boot (EOPNOTSUPP)"
		case 0:
		default:
			ll.Detail = "landlock_create_ruleset failed: " + rt.LandlockErrno.Error() + " (a container seccomp profile may refuse it)"
		}
		ll.Fix = "use Linux 6.12 or later with CONFIG_SECURITY_LANDLOCK=y and \"landlock\" in the lsm= boot parameter; in a container, a seccomp profile that allows the landlock_* system calls (containerd's and Docker's recent defaults do)"
	case st.LandlockABI < 6:
		ll.Detail += ": filesystem only; network needs ABI 4 and scoping ABI 6"
		ll.Fix = "upgrade the kernel to Linux 6.12 or later"
	default:
		ll.Detail += ": filesystem (no device nodes), TCP bind/connect, signal and abstract-socket scoping"
	}
	state(&ll, s.Filesystem || s.netOff())
	layers = append(layers, ll)

	sc := Layer{Name: "seccomp", Available: st.Seccomp,
		Detail: "deny list: device nodes, bpf, perf_event_open, keyring, kexec, modules, mount family, new namespaces, swap, reboot, clocks, ptrace, io_uring, " +
			"AF_PACKET and netlink beyond routing, TCP Fast Open, prlimit/renice/affinity of other processes; network-off: UDP, raw, MPTCP and Unix sockets",
		Open: "without it: bpf, perf_event_open, keyring reads, TCP Fast Open and the other calls it denies (the namespaces and dropped capabilities still stop most of them)",
		Fix:  "use a kernel with CONFIG_SECCOMP_FILTER=y"}
	state(&sc, s.Isolate || s.netOff())
	layers = append(layers, sc)

	eg := Layer{Name: "network allowlist", Available: st.UserNS || st.LandlockABI >= 4,
		Detail: fmt.Sprintf("network = \"allowlist\": a network namespace holding only loopback, where agentexec's egress proxy listens on 127.0.0.1:%d "+
			"(the listener is made inside and handed to the host, so no forwarder runs in the sandbox); the proxy resolves names and lets through only the allowed hosts, "+
			"never to private addresses unless allow_private; TCP reaches nothing but that loopback (the command's own servers and the proxy); seccomp denies UDP, raw and Unix sockets", DefaultEgressPort),
		Open: "the fallback without namespaces is weaker: the proxy listens on the host's loopback, and Landlock allows TCP connect to its port number on any address " +
			"(a server elsewhere listening on that port is reachable directly); UDP, raw and Unix sockets stay denied by seccomp",
		Fix: ns.Fix}
	switch {
	case !st.UserNS && st.LandlockABI < 4:
		eg.Detail = "cannot run: without namespaces, Landlock ABI 4 (TCP connect rules) is needed to hold commands to the proxy, this kernel has " + fmt.Sprint(st.LandlockABI)
		eg.Fix += "; or upgrade the kernel to Linux 6.7 or later with Landlock enabled"
	case !st.UserNS:
		eg.Detail = "fallback (weaker): no network namespace; " + eg.Open
	}
	state(&eg, s.Allowlist)
	layers = append(layers, eg)

	memDir, memV2 := memoryCgroup()
	mem := Layer{Name: "memory cgroup", Available: memDir != "",
		Detail: "memory limit in " + memDir + " (every process of the tree, shared mappings and tmpfs pages counted)",
		Open:   "the memory limit is RLIMIT_DATA per process: shared mappings (MAP_SHARED) are not counted, and several processes each under the limit together exceed it",
		Fix:    "run agentexec as root, or in a delegated cgroup v2 with the memory controller (systemd-run --user --scope -p Delegate=yes)"}
	if memDir != "" && !memV2 {
		mem.Detail += " (cgroup v1: memory.limit_in_bytes)"
	}
	if memDir == "" {
		mem.Detail = "no writable memory controller: RLIMIT_DATA instead, which does not count shared mappings"
	}
	state(&mem, s.MemoryBytes > 0)
	layers = append(layers, mem)

	cg := Layer{Name: "pids cgroup", Available: st.PidsCgroup != "", Detail: "pids.max in " + st.PidsCgroup,
		Open: "the process cap is RLIMIT_NPROC, per user (it counts the user's other processes) and void for root",
		Fix:  "mount a cgroup v2 hierarchy with the pids controller enabled, or run agentexec in a delegated cgroup (systemd-run --user --scope -p Delegate=yes)"}
	if st.PidsCgroup == "" {
		cg.Detail = "no writable pids controller"
		if !root {
			cg.Detail += "; RLIMIT_NPROC caps processes for this (non-root) user instead"
			cg.Available = true
		}
	}
	if st.CgroupV2 {
		cg.Detail += " (cgroup v2 present)"
	} else {
		cg.Detail += " (cgroup v1)"
	}
	state(&cg, s.Processes > 0)
	layers = append(layers, cg)

	rl := Layer{Name: "rlimits", Available: true, Detail: "CPU, file size, open files; core dumps off"}
	state(&rl, s.Enabled())
	layers = append(layers, rl)

	bw := Layer{Name: "bubblewrap", Available: st.Bwrap != "", Detail: st.Bwrap + " (not used; compared in the benchmark)"}
	if st.Bwrap == "" {
		bw.Detail = "not installed (optional)"
		bw.Fix = "apt-get install bubblewrap"
	}
	state(&bw, false)
	layers = append(layers, bw)
	return append(layers, limitsLayer(ReadCgroupLimits()), runtimeLayer(rt))
}

// limitsLayer describes the limits of agentexec's own cgroup (a pod's
// resources.limits), which bound it and all its commands together.
func limitsLayer(l CgroupLimits) Layer {
	ly := Layer{Name: "cgroup limits", Available: l.Any(),
		Detail: "limits of agentexec's own cgroup (the pod's or unit's), for it and all its commands together: " + l.String(),
		Open:   "commands together may use all of the machine's memory, CPU time and process slots (each command's own limits from its profile still apply)",
		Fix:    "set resources.limits (memory and cpu) in the pod spec and the kubelet's podPidsLimit; outside Kubernetes, run agentexec in a systemd unit or scope with MemoryMax=, CPUQuota= and TasksMax="}
	switch l.Version {
	case 0:
		ly.Detail = "no cgroup limit file is readable (no cgroup file system mounted at " + cgroupRoot + ")"
	case 1:
		ly.Detail += " (cgroup v1, " + l.Path + ")"
	default:
		ly.Detail += " (cgroup v2, " + l.Path + ")"
	}
	if len(l.Problems) > 0 {
		ly.Detail += "; unreadable: " + strings.Join(l.Problems, "; ")
	}
	ly.State = "missing"
	if ly.Available {
		ly.State = "used"
	}
	return ly
}

// runtimeLayer says what a user-space kernel around agentexec's container
// provides, and what it does not.
func runtimeLayer(r OuterRuntime) Layer {
	if !r.GVisor {
		return Layer{Name: "outer runtime", State: "missing",
			Detail: "no user-space kernel (gVisor) detected: commands share the kernel of the machine (or VM) agentexec runs on",
			Open:   "a kernel exploit in a command reaches that kernel: the layers above are the only boundary",
			Fix:    "on Kubernetes, run the pod with runtimeClassName: gvisor (or a VM runtime such as Kata Containers) where the cluster offers one"}
	}
	return Layer{Name: "outer runtime", Available: true, State: "used",
		Open: "without it, a kernel exploit in a command reaches the host's kernel",
		Detail: "gVisor (" + strings.Join(r.Evidence, "; ") + "): a kernel in user space answers every system call of the pod, so commands never reach the host's kernel " +
			"(its exploits, /proc and /sys, device nodes), the pod's network goes through gVisor's own stack, and the pod's cgroup limits bound everything. " +
			"It is the boundary between the pod and the host, not between the commands and agentexec inside the pod: where Landlock and namespaces are missing, " +
			"commands may read and write what agentexec's user may inside the pod (the workspace, the mounted token, the audit log)"}
}

// tryNamespaces starts true(1) in the namespaces of a network-off run.
func tryNamespaces() (bool, string) {
	prog := ""
	for _, p := range []string{"/bin/true", "/usr/bin/true"} {
		if _, err := os.Stat(p); err == nil {
			prog = p
			break
		}
	}
	if prog == "" {
		return true, "not measured (no true(1) to start)"
	}
	a := &syscall.SysProcAttr{}
	nsAttr(true)(a)
	pid, err := syscall.ForkExec(prog, []string{"true"}, &syscall.ProcAttr{Sys: a})
	if err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EINVAL) {
			return false, "the kernel refused new namespaces: " + err.Error()
		}
		return false, err.Error()
	}
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	return true, "new user, mount, PID, IPC, UTS and network namespaces can be created"
}
