//go:build linux && race

package sandbox

// trampolineEnv is the trampoline's environment. In a program built with
// the race detector (the tests), the trampoline also gets
// GORACE=atexit_sleep_ms=0: the race runtime otherwise sleeps a second
// before every exit, and the trampoline that waits for a command as its
// namespace's init would add that second to every sandboxed command.
var trampolineEnv = []string{"GOMAXPROCS=1", "GORACE=atexit_sleep_ms=0"}
