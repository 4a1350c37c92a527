//go:build !linux

package runner

import "errors"

// cgroup is a run's cgroup; there are none on this platform.
type cgroup struct{ dir string }

// OpenCgroups fails on this platform: cgroups are Linux-only.
func OpenCgroups(parent string) (*Cgroups, error) {
	return nil, errors.Join(ErrNoCgroups, errors.New("cgroups exist only on Linux"))
}

// FindCgroups fails on this platform: cgroups are Linux-only.
func FindCgroups() (*Cgroups, error) { return OpenCgroups("") }

// Close does nothing: no pool can be opened on this platform.
func (c *Cgroups) Close() error { return nil }

func (c *Cgroups) get() (*cgroup, error)            { return nil, ErrNoCgroups }
func (c *Cgroups) release(*cgroup, bool)            {}
func (cg *cgroup) remove()                          {}
func (cg *cgroup) add(live []int, leader int) []int { return live }
func (cg *cgroup) kill()                            {}
func cgroupRefused(error) bool                      { return false }
func trackCgroup(string) *cgroup                    { return nil }
