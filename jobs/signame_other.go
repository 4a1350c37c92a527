//go:build !unix

package jobs

import "strconv"

func signalName(sig int) string { return "signal " + strconv.Itoa(sig) }
