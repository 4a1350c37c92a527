//go:build !unix

package jobs

import "syscall"

func detached() *syscall.SysProcAttr { return nil }
