//go:build !linux

package runner

// prepareHost has nothing to prepare where subreapers do not exist.
func prepareHost() {}

// scan cannot list processes that left the session on this platform; the
// group kill still reaches everything that stayed in it.
func (t *tree) scan() []int { return nil }
