//go:build !linux

package terminal

// foreground cannot be told here.
func foreground(int, bool) Foreground { return Foreground{} }
