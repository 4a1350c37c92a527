package sandbox

import (
	"sync"
	"syscall"
	"unsafe"
)

// The child side of the in-process launcher (see raw_linux.go). Everything
// here runs in a process that shares the host's memory (CLONE_VM) and has
// no Go runtime of its own: it must not allocate, take locks, write
// pointers (write barriers), grow its stack or touch anything but the
// arena, which lives outside the Go heap. Hence //go:nosplit (the linker
// then proves the whole call chain fits the stack), //go:norace and
// //go:nocheckptr (the race detector's instrumentation would call into
// the runtime).

// rawAvailable says whether this architecture has the in-process launcher.
const rawAvailable = true

// rawClone is in raw_linux_amd64.s.
func rawClone(trap, a1, a2 uintptr, arena unsafe.Pointer, role, fn uintptr) (r1, errno uintptr)

// The children's entry points as func values, whose first word is the
// code address rawClone calls.
var (
	rawInitFn = rawInitEntry
	rawCmdFn  = rawCmdEntry
)

// funcPC returns the code address of the function f holds.
func funcPC(f *func(*rawArena, uintptr)) uintptr { return **(**uintptr)(unsafe.Pointer(f)) }

//go:linkname runtimeBeforeFork syscall.runtime_BeforeFork
func runtimeBeforeFork()

//go:linkname runtimeAfterFork syscall.runtime_AfterFork
func runtimeAfterFork()

// Roles of a child started by rawClone.
const (
	roleInit  = 1 // the PID namespace's init: runs the init program
	roleCmd   = 2 // the command: runs the command program, ends in execve
	roleRelay = 3 // a user's first child: enters the user namespace, creates the others, clones the init
)

// rawCloneInitFailed is the operation a relay reports when it could not
// clone the init.
const rawCloneInitFailed = ^uint32(1)

// rawFork clones the init with trap (clone or clone3) and a1, a2, the way
// package syscall forks: fork lock held, signals blocked on this thread
// (the child starts with them blocked and never runs the runtime's
// handlers), no stack growth in between.
func rawFork(trap, a1, a2 uintptr, a *rawArena, role uintptr) (int, syscall.Errno) {
	syscall.ForkLock.Lock()
	pid, errno := rawForkLocked(trap, a1, a2, a, role)
	syscall.ForkLock.Unlock()
	return int(pid), syscall.Errno(errno)
}

//go:nosplit
//go:norace
//go:nocheckptr
func rawForkLocked(trap, a1, a2 uintptr, a *rawArena, role uintptr) (uintptr, uintptr) {
	runtimeBeforeFork()
	pid, errno := rawClone(trap, a1, a2, unsafe.Pointer(a), role, a.initPC)
	runtimeAfterFork()
	return pid, errno
}

// rawCmdEntry is where the command starts, on its own stack in the arena,
// while the init waits (CLONE_VFORK).
//
//go:nosplit
//go:norace
//go:nocheckptr
func rawCmdEntry(a *rawArena, role uintptr) {
	i, e := rawExec(a, a.cmdOff, a.ncmd)
	// Only reached when a step failed: execve does not return.
	a.failOp = int64(a.nrelay + a.nops + uintptr(i))
	a.failErr = e
	rawExit(127)
}

// rawInitEntry is where the init starts, on its own stack in the arena.
//
//go:nosplit
//go:norace
//go:nocheckptr
func rawInitEntry(a *rawArena, role uintptr) {
	if role == roleRelay {
		rawRelay(a)
	}
	rawInit(a)
}

// rawRelay is a user's first child: it runs the relay program (its
// descriptors and session, then setns into the shared user namespace and
// unshare of the others), clones the init, which is the new PID
// namespace's first process, and exits with its status. It keeps every
// signal blocked: only SIGKILL ends it (and then the init, by its parent
// death signal).
//
//go:nosplit
//go:norace
//go:nocheckptr
func rawRelay(a *rawArena) {
	if i, e := rawExec(a, a.relayOff, a.nrelay); e != 0 {
		rawReport(a, rawRecFailed, uint32(i), uint32(e))
		rawExit(126)
	}
	pid, e := rawClone(syscall.SYS_CLONE, syscall.CLONE_VM|uintptr(syscall.SIGCHLD), a.initStack, unsafe.Pointer(a), roleInit, a.initPC)
	if e != 0 {
		rawReport(a, rawRecFailed, rawCloneInitFailed, uint32(e))
		rawExit(126)
	}
	for {
		a.relayWS = 0
		_, _, e := syscall.RawSyscall6(syscall.SYS_WAIT4, pid, uintptr(unsafe.Pointer(&a.relayWS)), 0, 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			rawExit(125)
		}
		ws := uint32(a.relayWS)
		if sig := ws & 0x7f; sig != 0 && sig != 0x7f {
			rawExit(128 + uintptr(sig))
		}
		rawExit(uintptr((ws >> 8) & 0xff))
	}
}

// rawInit runs the init program (descriptors, session, namespaces' root,
// confinement), starts the command with a vfork-style clone on its own
// stack, reports that it started, and then reaps every process of the
// namespace until the command ends, whose status it reports and exits
// with.
//
//go:nosplit
//go:norace
//go:nocheckptr
func rawInit(a *rawArena) {
	if i, e := rawExec(a, a.opsOff, a.nops); e != 0 {
		rawReport(a, rawRecFailed, uint32(a.nrelay)+uint32(i), uint32(e))
		rawExit(126)
	}
	// Signals stay blocked until now (the kernel drops those sent to an
	// init that keeps the default action); the command starts with none
	// blocked.
	syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, 2 /* SIG_SETMASK */, uintptr(unsafe.Pointer(&a.mask)), 0, 8, 0, 0)
	pid, e := rawClone(syscall.SYS_CLONE, syscall.CLONE_VM|syscall.CLONE_VFORK|uintptr(syscall.SIGCHLD), a.cmdStack, unsafe.Pointer(a), roleCmd, a.cmdPC)
	if e != 0 {
		rawReport(a, rawRecFailed, uint32(a.nrelay+a.nops+a.ncmd), uint32(e))
		rawExit(126)
	}
	if a.failOp >= 0 {
		rawReport(a, rawRecFailed, uint32(a.failOp), uint32(a.failErr))
		rawExit(126)
	}
	rawReport(a, rawRecStarted, 0, 0)
	for {
		a.ws = 0
		wpid, _, e := syscall.RawSyscall6(syscall.SYS_WAIT4, ^uintptr(0), uintptr(unsafe.Pointer(&a.ws)), 0, 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			rawExit(125) // cannot happen while the command is a child
		}
		if wpid != pid {
			continue // an orphan reaped
		}
		ws := uint32(a.ws)
		if sig := ws & 0x7f; sig != 0 && sig != 0x7f {
			rawReport(a, rawRecExited, ^uint32(0), sig)
			rawExit(128 + uintptr(sig))
		}
		code := (ws >> 8) & 0xff
		rawReport(a, rawRecExited, code, 0)
		rawExit(uintptr(code))
	}
}

//go:nosplit
//go:norace
//go:nocheckptr
func rawExit(code uintptr) {
	for {
		syscall.RawSyscall6(syscall.SYS_EXIT_GROUP, code, 0, 0, 0, 0, 0)
	}
}

// rawReport writes one status record on descriptor 3.
//
//go:nosplit
//go:norace
//go:nocheckptr
func rawReport(a *rawArena, kind, x, y uint32) {
	a.rec[0], a.rec[1], a.rec[2], a.rec[3] = kind, x, y, 0
	for {
		_, _, e := syscall.RawSyscall6(syscall.SYS_WRITE, rawStatusFD, uintptr(unsafe.Pointer(&a.rec)), unsafe.Sizeof(a.rec), 0, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}

// rawExec runs n operations from offset off of the arena, and returns the
// index of the one that failed and its errno (0 when all went well).
//
//go:nosplit
//go:norace
//go:nocheckptr
func rawExec(a *rawArena, off, n uintptr) (int, uintptr) {
	base := unsafe.Pointer(a)
	for i := uintptr(0); i < n; i++ {
		o := (*rawOp)(unsafe.Add(base, off+i*unsafe.Sizeof(rawOp{})))
		args := o.args
		if o.in >= 0 && o.inArg >= 0 && o.inArg < 6 {
			args[o.inArg] = a.regs[o.in&(rawRegs-1)]
		}
		if o.in2 >= 0 && o.patch != 0 {
			*(*int32)(unsafe.Add(base, o.patch)) = int32(a.regs[o.in2&(rawRegs-1)])
		}
		r, _, e := syscall.RawSyscall6(o.nr, args[0], args[1], args[2], args[3], args[4], args[5])
		if e == 0 && o.flags&opWant != 0 && r != o.want {
			e = syscall.ESRCH
		}
		if e != 0 {
			switch {
			case o.flags&opIgnore != 0, o.okErr != 0 && uint32(e) == o.okErr:
			case o.flags&opSkip != 0 && (o.skipErr == 0 || uint32(e) == o.skipErr):
				i += uintptr(o.skip)
			default:
				return int(i), uintptr(e)
			}
			continue
		}
		if o.save >= 0 {
			a.regs[o.save&(rawRegs-1)] = r
		}
	}
	return -1, 0
}

// rawPageSize is the size the arena's stacks are aligned to.
var rawPageSize = sync.OnceValue(syscall.Getpagesize)
