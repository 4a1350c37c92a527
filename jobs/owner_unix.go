//go:build unix

package jobs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

func checkOwner(fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return errors.New("it belongs to another user")
	}
	return nil
}
