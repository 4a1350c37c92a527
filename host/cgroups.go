package host

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/agentexec/agentexec/runner"
)

// OpenCgroups opens the cgroup pool the tools.cgroup setting asks for:
// "off" gives nil; "auto" (or "") gives a pool under this process's own
// cgroup v2 directory, or nil where there is none it may write to; a path
// gives a pool under that directory, or an error saying why it cannot be
// used; anything else is an error naming the accepted forms.
func OpenCgroups(mode string) (*runner.Cgroups, error) {
	switch mode {
	case "off":
		return nil, nil
	case "", "auto":
		pool, err := runner.FindCgroups()
		if errors.Is(err, runner.ErrNoCgroups) {
			return nil, nil
		}
		return pool, err
	}
	if !filepath.IsAbs(mode) {
		return nil, fmt.Errorf("%q: use auto, off, or the absolute path of a cgroup v2 directory", mode)
	}
	return runner.OpenCgroups(mode)
}
