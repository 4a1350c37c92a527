//go:build linux && !amd64

package sandbox

import (
	"errors"

	"github.com/agentexec/agentexec/runner"
)

// rawAvailable says whether this architecture has the in-process
// launcher: not yet; the Go trampoline starts every sandboxed command.
const rawAvailable = false

var errRawUnavailable = errors.New("the in-process launcher is only built for linux/amd64")

type rawStatic struct{}

func compileStatic(*Spec, *nsPlan) (*rawStatic, error) { return nil, errRawUnavailable }

func wrapRaw(*rawStatic, Spec, *nsPlan, string, []string, []string) (*runner.Wrapped, error) {
	return nil, errRawUnavailable
}
