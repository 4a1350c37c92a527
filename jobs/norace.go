//go:build !race

package jobs

// supervisorEnv is added to the supervisor's environment (nothing outside
// race-detector builds).
var supervisorEnv []string
