//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package mcpserver

import "os"

// watchHangup does nothing here: a closed stdout is noticed at the next write.
func watchHangup(*os.File, <-chan struct{}, func()) {}

func catchSIGPIPE() (stop func()) { return func() {} }
