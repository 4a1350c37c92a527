//go:build linux && race

package runner

// watchdogEnv is the watchdog's environment. In a program built with the
// race detector (the tests) it turns off the race runtime's one-second
// sleep before exit, which tests that wait for a watchdog to finish would
// otherwise wait for; races are still reported.
var watchdogEnv = []string{"GORACE=atexit_sleep_ms=0"}
