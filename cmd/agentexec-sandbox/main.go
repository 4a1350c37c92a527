// Command agentexec-sandbox is agentexec's sandbox trampoline as a small
// program of its own: agentexec starts it (when it is installed next to the
// agentexec binary) to confine a command and execute it where the
// in-process launcher is not used (architectures other than amd64, or
// AGENTEXEC_SANDBOX_LAUNCHER=trampoline), which is faster than
// re-executing agentexec itself; and, for ordinary users, once per
// agentexec process to map the ids of the user namespace the in-process
// launcher's runs share. It is not meant to be run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/agentexec/agentexec/sandbox"
)

func main() {
	sandbox.Main() // confines itself and executes the command; returns only when not started by agentexec
	fmt.Fprintln(os.Stderr, "agentexec-sandbox: this program is started by agentexec to confine commands; it is not meant to be run by hand")
	os.Exit(2)
}
