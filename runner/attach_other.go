//go:build !unix

package runner

import "errors"

// startAttached is not available here: Start needs Unix sessions.
func startAttached(p *plan, _ []string, _ Attach, _ *cgroup) (*child, error) {
	return nil, errors.New("runner: attached processes need a Unix system")
}
