//go:build !unix

package jobs

import "io/fs"

func checkOwner(fs.FileInfo) error { return nil }
