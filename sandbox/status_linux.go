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

// Status lists each layer as available or not, with the reason and the
// fix.
func Status() []Layer {
	st := Probe()
	root := os.Getuid() == 0
	layers := []Layer{
		{Name: "rlimits", Available: true, Detail: "CPU, memory (RLIMIT_DATA), file size, open files; core dumps off"},
	}
	ll := Layer{Name: "landlock", Available: st.LandlockABI >= 6, Detail: fmt.Sprintf("ABI %d", st.LandlockABI)}
	switch {
	case st.LandlockABI == 0:
		ll.Detail = "not enabled in this kernel"
		ll.Fix = "use Linux 6.7 or later with CONFIG_SECURITY_LANDLOCK=y and \"landlock\" in the lsm= boot parameter"
	case st.LandlockABI < 6:
		ll.Detail += ": filesystem only; network needs ABI 4 and scoping ABI 6"
		ll.Fix = "upgrade the kernel to Linux 6.12 or later"
	default:
		ll.Detail += ": filesystem, TCP bind/connect, signal and abstract-socket scoping"
	}
	layers = append(layers, ll)
	sc := Layer{Name: "seccomp", Available: st.Seccomp, Detail: "filter for UDP, raw and MPTCP sockets, ptrace and io_uring"}
	if !st.Seccomp {
		sc.Fix = "use a kernel with CONFIG_SECCOMP_FILTER=y"
	}
	layers = append(layers, sc)
	ns := Layer{Name: "user and network namespaces", Available: st.UserNS, Detail: "not used by agentexec's own backend (Landlock and seccomp cover the network); bubblewrap uses them"}
	if !st.UserNS {
		ns.Fix = "sysctl user.max_user_namespaces=15000 (and kernel.unprivileged_userns_clone=1 where it exists)"
	}
	layers = append(layers, ns)
	cg := Layer{Name: "cgroup", Available: st.PidsCgroup != "", Detail: "pids.max in " + st.PidsCgroup}
	if st.PidsCgroup == "" {
		cg.Detail = "no writable pids controller"
		if root {
			cg.Fix = "mount a cgroup v2 hierarchy with the pids controller enabled, or run agentexec in a delegated cgroup (systemd-run --user --scope -p Delegate=yes)"
		} else {
			cg.Detail += "; RLIMIT_NPROC caps processes for this (non-root) user instead"
			cg.Available = true
		}
	}
	if st.CgroupV2 {
		cg.Detail += " (cgroup v2 present)"
	} else {
		cg.Detail += " (cgroup v1)"
	}
	layers = append(layers, cg)
	bw := Layer{Name: "bubblewrap", Available: st.Bwrap != "", Detail: st.Bwrap}
	if st.Bwrap == "" {
		bw.Detail = "not installed (optional)"
		bw.Fix = "apt-get install bubblewrap"
	}
	return append(layers, bw)
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
