//go:build linux && amd64

package sandbox

import "golang.org/x/sys/unix"

// archDenied are the administrator-only calls of this architecture only.
var archDenied = []uintptr{unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_CREATE_MODULE, unix.SYS_GET_KERNEL_SYMS, unix.SYS_NFSSERVCTL, unix.SYS_USELIB, unix.SYS_USTAT, unix.SYS_SYSFS, unix.SYS__SYSCTL}

// archMknod are this architecture's mknod calls with the mode second.
var archMknod = []uintptr{unix.SYS_MKNOD}
