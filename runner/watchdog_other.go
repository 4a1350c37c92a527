//go:build !linux

package runner

import "fmt"

// Main returns at once: the watchdog exists only on Linux.
func Main() {}

// WatchHost returns an error wrapping ErrNoWatchdog: the watchdog exists
// only on Linux.
func WatchHost() error { return fmt.Errorf("%w: the watchdog exists only on Linux", ErrNoWatchdog) }

func watchStart(int, string, ...string) {}
func watchEnd(int, string, bool)        {}

// WatchdogAvailable reports false: the watchdog exists only on Linux.
func WatchdogAvailable() bool { return false }
