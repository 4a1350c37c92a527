//go:build !unix

package jobs

import (
	"os"
	"syscall"
)

func detached() *syscall.SysProcAttr { return nil }

func terminate(p *os.Process) { p.Kill() }
