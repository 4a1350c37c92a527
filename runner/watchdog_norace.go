//go:build linux && !race

package runner

// watchdogEnv is the watchdog's environment: empty.
var watchdogEnv = []string{}
