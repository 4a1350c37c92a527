//go:build !unix

package terminal

import "os"

func openPTY(rows, cols uint16) (master, slave *os.File, name string, err error) {
	return nil, nil, "", ErrUnsupported
}

func echoOff(*os.File) bool { return false }
