package runner

import "errors"

// watchdogArg is the argument that makes Main run the watchdog.
const watchdogArg = "__agentexec_watchdog"

// ErrNoWatchdog is wrapped by WatchHost's error when the watchdog could not
// be started; commands still run, but a host that is killed leaves their
// trees running (on Linux their main processes still get SIGKILL).
var ErrNoWatchdog = errors.New("runner: no watchdog")
