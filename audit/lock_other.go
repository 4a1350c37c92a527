//go:build !unix

package audit

import "os"

// lockFile does nothing where there is no flock; the in-process mutex
// still serialises writers of one File.
func lockFile(*os.File) func() { return func() {} }
