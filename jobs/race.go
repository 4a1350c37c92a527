//go:build race

package jobs

// supervisorEnv is added to the supervisor's environment. In a program
// built with the race detector (the tests) it turns off the race runtime's
// one-second sleep before exit, which every job's end would otherwise wait
// for; races are still reported.
var supervisorEnv = []string{"GORACE=atexit_sleep_ms=0"}
