package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccomp constants not all in x/sys/unix.
const (
	seccompRetAllow    = 0x7fff0000
	seccompRetErrno    = 0x00050000
	ipprotoMPTCP       = 262
	sockTypeMask       = 0xf
	msgFastOpen        = 0x20000000
	tcpFastOpenConnect = 30
	x32SyscallBit      = 0x40000000
	nsCloneMask        = unix.CLONE_NEWNS | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME
)

// auditArch is this architecture's AUDIT_ARCH value.
func auditArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	case "riscv64":
		return unix.AUDIT_ARCH_RISCV64
	}
	return 0
}

// bpf assembles a classic BPF program with forward jumps to labels.
type bpf struct {
	prog   []unix.SockFilter
	fixups map[int][2]string // instruction -> labels of its true and false branches ("" = next)
	labels map[string]int
}

const (
	ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	retK = unix.BPF_RET | unix.BPF_K
	andK = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	// offsets in struct seccomp_data
	offNr   = 0
	offArch = 4
)

// offArg is the offset of the low (hi = false) or high word of argument
// i (little-endian).
func offArg(i int, hi bool) uint32 {
	o := uint32(16 + 8*i)
	if hi {
		o += 4
	}
	return o
}

func (b *bpf) stmt(code uint16, k uint32) { b.prog = append(b.prog, unix.SockFilter{Code: code, K: k}) }

// jump adds a conditional jump to label t when true and f when false
// ("" continues with the next instruction).
func (b *bpf) jump(code uint16, k uint32, t, f string) {
	if b.fixups == nil {
		b.fixups, b.labels = map[int][2]string{}, map[string]int{}
	}
	b.fixups[len(b.prog)] = [2]string{t, f}
	b.prog = append(b.prog, unix.SockFilter{Code: code, K: k})
}

func (b *bpf) label(name string) { b.labels[name] = len(b.prog) }

func (b *bpf) load(off uint32) { b.stmt(ldW, off) }

func (b *bpf) assemble() ([]unix.SockFilter, error) {
	for i, lf := range b.fixups {
		for n, l := range lf {
			if l == "" {
				continue
			}
			to, ok := b.labels[l]
			if !ok || to <= i || to-i-1 > 255 {
				return nil, fmt.Errorf("seccomp: bad jump from %d to %q", i, l)
			}
			if n == 0 {
				b.prog[i].Jt = uint8(to - i - 1)
			} else {
				b.prog[i].Jf = uint8(to - i - 1)
			}
		}
	}
	return b.prog, nil
}

// filter is the seccomp program of a namespaced or network-off spec. It
// refuses with EPERM (EACCES for the network):
//   - calls of another architecture (32-bit compatibility, x32);
//   - what only an administrator needs, as container runtimes do: bpf,
//     perf_event_open, the keyring, kexec, modules, the mount family,
//     pivot_root, chroot, swap, reboot, setting clocks, acct, quotactl,
//     syslog, file handles (open_by_handle_at), iopl/ioperm,
//     userfaultfd, new namespaces (unshare, setns, clone with namespace
//     flags; clone3 says ENOSYS so that libraries fall back to clone);
//   - ptrace, process_vm_readv/writev and io_uring (whose operations
//     seccomp cannot see);
//   - mknod of character and block devices;
//   - prlimit64, setpriority, sched_setaffinity, sched_setscheduler and
//     sched_setparam aimed at another process;
//   - AF_PACKET sockets, netlink sockets other than NETLINK_ROUTE queries,
//     TCP Fast Open (MSG_FASTOPEN on sendto/sendmsg, TCP_FASTOPEN_CONNECT);
//   - with noNet, inet sockets other than classic TCP (UDP, raw, MPTCP)
//     and Unix sockets (socketpair stays allowed).
func filter(noNet bool) ([]unix.SockFilter, error) {
	eperm := uint32(seccompRetErrno | uint32(unix.EPERM))
	eacces := uint32(seccompRetErrno | uint32(unix.EACCES))
	enosys := uint32(seccompRetErrno | uint32(unix.ENOSYS))
	var b bpf
	b.load(offArch)
	b.jump(jeq, auditArch(), "", "eperm")
	b.load(offNr)
	if runtime.GOARCH == "amd64" {
		b.jump(jset, x32SyscallBit, "eperm", "")
	}
	denied := []uintptr{
		unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
		unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
		unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT, unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE,
		unix.SYS_FSOPEN, unix.SYS_FSMOUNT, unix.SYS_FSCONFIG, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
		unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME,
		unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX, unix.SYS_ACCT, unix.SYS_QUOTACTL, unix.SYS_SYSLOG,
		unix.SYS_NAME_TO_HANDLE_AT, unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_USERFAULTFD, unix.SYS_UNSHARE, unix.SYS_SETNS,
		unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
		unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
		unix.SYS_SETHOSTNAME, unix.SYS_SETDOMAINNAME, unix.SYS_LOOKUP_DCOOKIE, unix.SYS_VHANGUP,
	}
	denied = append(denied, archDenied...)
	for _, nr := range denied {
		b.jump(jeq, uint32(nr), "eperm", "")
	}
	b.jump(jeq, unix.SYS_CLONE3, "enosys", "")
	b.jump(jeq, unix.SYS_CLONE, "clone", "")
	b.jump(jeq, unix.SYS_MKNODAT, "mknodat", "")
	for _, nr := range archMknod {
		b.jump(jeq, uint32(nr), "mknod", "")
	}
	for _, nr := range []uintptr{unix.SYS_PRLIMIT64, unix.SYS_SCHED_SETAFFINITY, unix.SYS_SCHED_SETSCHEDULER, unix.SYS_SCHED_SETPARAM} {
		b.jump(jeq, uint32(nr), "pid0", "")
	}
	b.jump(jeq, unix.SYS_SETPRIORITY, "who1", "")
	b.jump(jeq, unix.SYS_SOCKET, "socket", "")
	b.jump(jeq, unix.SYS_SENDTO, "flags3", "")
	b.jump(jeq, unix.SYS_SENDMSG, "flags2", "")
	b.jump(jeq, unix.SYS_SENDMMSG, "flags3", "")
	b.jump(jeq, unix.SYS_SETSOCKOPT, "sockopt", "")
	b.stmt(retK, seccompRetAllow)

	// clone: namespace flags in the first argument (x86_64, arm64 and
	// riscv64 all put flags first).
	b.label("clone")
	b.load(offArg(0, false))
	b.jump(jset, nsCloneMask, "eperm", "allow")
	// mknodat(dirfd, path, mode, dev) and mknod(path, mode, dev): device
	// nodes refused.
	b.label("mknodat")
	b.load(offArg(2, false))
	b.jump(jeq, 0, "allow", "mode")
	b.label("mknod")
	b.load(offArg(1, false))
	b.label("mode")
	b.stmt(andK, unix.S_IFMT)
	b.jump(jeq, unix.S_IFCHR, "eperm", "")
	b.jump(jeq, unix.S_IFBLK, "eperm", "allow")
	// Another process's limits, priority or scheduling: pid 0 (self) only.
	b.label("pid0")
	b.load(offArg(0, true))
	b.jump(jeq, 0, "", "eperm")
	b.load(offArg(0, false))
	b.jump(jeq, 0, "allow", "eperm")
	b.label("who1")
	b.load(offArg(1, true))
	b.jump(jeq, 0, "", "eperm")
	b.load(offArg(1, false))
	b.jump(jeq, 0, "allow", "eperm")
	// socket(family, type, protocol)
	b.label("socket")
	b.load(offArg(0, false))
	b.jump(jeq, unix.AF_PACKET, "eacces", "")
	b.jump(jeq, unix.AF_NETLINK, "netlink", "")
	if noNet {
		b.jump(jeq, unix.AF_UNIX, "eacces", "")
		b.jump(jeq, unix.AF_INET, "inet", "")
		b.jump(jeq, unix.AF_INET6, "inet", "allow")
		b.label("inet")
		b.load(offArg(2, false))
		b.jump(jeq, ipprotoMPTCP, "eacces", "")
		b.load(offArg(1, false))
		b.stmt(andK, sockTypeMask)
		b.jump(jeq, unix.SOCK_STREAM, "allow", "eacces")
	} else {
		b.jump(jeq, 0, "allow", "allow")
	}
	b.label("netlink")
	b.load(offArg(2, false))
	b.jump(jeq, unix.NETLINK_ROUTE, "allow", "eacces")
	b.label("flags3")
	b.load(offArg(3, false))
	b.jump(jset, msgFastOpen, "eacces", "allow")
	b.label("flags2")
	b.load(offArg(2, false))
	b.jump(jset, msgFastOpen, "eacces", "allow")
	// setsockopt(fd, level, name, ...): TCP_FASTOPEN_CONNECT.
	b.label("sockopt")
	b.load(offArg(1, false))
	b.jump(jeq, unix.IPPROTO_TCP, "", "allow")
	b.load(offArg(2, false))
	b.jump(jeq, tcpFastOpenConnect, "eacces", "allow")

	b.label("allow")
	b.stmt(retK, seccompRetAllow)
	b.label("eperm")
	b.stmt(retK, eperm)
	b.label("eacces")
	b.stmt(retK, eacces)
	b.label("enosys")
	b.stmt(retK, enosys)
	return b.assemble()
}

// installSeccomp installs the filter of s on the calling thread (the one
// that executes the program; see landlockApply).
func installSeccomp(s *Spec) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	prog, err := filter(s.netOff())
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// This thread only: it is the one that executes the program, which
	// inherits the filter (see landlockApply).
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return errno
	}
	return nil
}
