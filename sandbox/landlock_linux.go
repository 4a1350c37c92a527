package sandbox

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The three Landlock system calls, straight through x/sys/unix: the
// trampoline restricts only its own executing thread, so it needs none of
// the all-thread machinery a library offers for processes that go on
// running Go code.

// llRuleset is the start of struct landlock_ruleset_attr that agentexec
// sets (ABI 6): older kernels accept it as long as the fields they do not
// know are zero.
type llRuleset struct {
	handledFS  uint64
	handledNet uint64
	scoped     uint64
}

// llABI returns the kernel's Landlock ABI version, or 0 without Landlock.
func llABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// llCreate creates a ruleset handling what attr says.
func llCreate(attr *llRuleset) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(attr)), unsafe.Sizeof(*attr), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// llAddPath allows access beneath the file or directory dir refers to.
func llAddPath(ruleset, dir int, access uint64) error {
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(dir)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// llNetPortAttr is struct landlock_net_port_attr.
type llNetPortAttr struct {
	access uint64
	port   uint64
}

// llRuleNetPort is LANDLOCK_RULE_NET_PORT.
const llRuleNetPort = 2

// llAddPort allows access (TCP bind or connect) to a port.
func llAddPort(ruleset int, access, port uint64) error {
	attr := llNetPortAttr{access: access, port: port}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), llRuleNetPort, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// llRestrictSelf enforces the ruleset on the calling thread (which needs
// no_new_privs); a program it executes inherits it.
func llRestrictSelf(ruleset int) error {
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
