//go:build unix && !linux

package runner

import "syscall"

func signalProcess(pid int, sig syscall.Signal) { syscall.Kill(pid, sig) }
