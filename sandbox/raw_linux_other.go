//go:build linux && !amd64

package sandbox

import (
	"errors"
	"os"

	"github.com/agentexec/agentexec/runner"
)

// rawAvailable says whether this architecture has the in-process
// launcher: not yet; the Go trampoline starts every sandboxed command.
const rawAvailable = false

var errRawUnavailable = errors.New("the in-process launcher is only built for linux/amd64")

type rawStatic struct{ userFD int }

func compileStatic(*Spec, *nsPlan, int) (*rawStatic, error) { return nil, errRawUnavailable }

func wrapRaw(*rawStatic, Spec, *nsPlan, *os.File, string, []string, []string) (*runner.Wrapped, error) {
	return nil, errRawUnavailable
}
