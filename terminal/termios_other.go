//go:build unix && !linux

package terminal

import "os"

// echoOff is not known here: input is then recorded as any other.
func echoOff(*os.File) bool { return false }
