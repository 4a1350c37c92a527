package sandbox

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccomp constants not all in x/sys/unix.
const (
	seccompRetAllow = 0x7fff0000
	seccompRetErrno = 0x00050000
	ipprotoMPTCP    = 262
	sockTypeMask    = 0xf
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

// networkFilter is the seccomp program of NoNetwork: it refuses, with
// EACCES, sockets of the inet families that are not classic stream
// sockets (UDP, raw, and MPTCP, which Landlock does not cover), ptrace, and
// io_uring (whose operations seccomp cannot see); calls of another
// architecture (32-bit compatibility) are refused entirely.
func networkFilter() []unix.SockFilter {
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		and  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		deny = seccompRetErrno | uint32(unix.EACCES)
		// offsets in struct seccomp_data
		offNr   = 0
		offArch = 4
		offArg0 = 16
		offArg1 = 24
		offArg2 = 32
	)
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(k uint32, jt, jf uint8) unix.SockFilter { return unix.SockFilter{Code: jeq, Jt: jt, Jf: jf, K: k} }
	return []unix.SockFilter{
		/* 0 */ stmt(ldW, offArch),
		/* 1 */ jump(auditArch(), 1, 0),
		/* 2 */ stmt(ret, deny),
		/* 3 */ stmt(ldW, offNr),
		/* 4 */ jump(unix.SYS_PTRACE, 0, 1),
		/* 5 */ stmt(ret, deny),
		/* 6 */ jump(unix.SYS_IO_URING_SETUP, 0, 1),
		/* 7 */ stmt(ret, deny),
		/* 8 */ jump(unix.SYS_SOCKET, 1, 0),
		/* 9 */ stmt(ret, seccompRetAllow),
		/* 10 */ stmt(ldW, offArg0),
		/* 11 */ jump(unix.AF_INET, 2, 0),
		/* 12 */ jump(unix.AF_INET6, 1, 0),
		/* 13 */ stmt(ret, seccompRetAllow),
		/* 14 */ stmt(ldW, offArg2),
		/* 15 */ jump(ipprotoMPTCP, 0, 1),
		/* 16 */ stmt(ret, deny),
		/* 17 */ stmt(ldW, offArg1),
		/* 18 */ stmt(and, sockTypeMask),
		/* 19 */ jump(unix.SOCK_STREAM, 0, 1),
		/* 20 */ stmt(ret, seccompRetAllow),
		/* 21 */ stmt(ret, deny),
	}
}

// installSeccomp installs networkFilter on the calling thread (the one
// that executes the program; see landlockApply).
func installSeccomp() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	filter := networkFilter()
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	// This thread only: it is the one that executes the program, which
	// inherits the filter (see landlockApply).
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return errno
	}
	return nil
}
