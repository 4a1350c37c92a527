//go:build linux && !race

package sandbox

// trampolineEnv is the trampoline's environment: one P, because the
// trampoline does one thing, and fewer threads make the all-thread system
// calls of Landlock and seccomp cheaper.
var trampolineEnv = []string{"GOMAXPROCS=1"}
