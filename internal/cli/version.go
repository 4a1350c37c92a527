package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// versionText is what `agentexec --version` prints: agentexec's version,
// the module's version and the VCS revision the binary was built from, as
// recorded in its build information (bi; ok false when there is none).
// A binary built with -buildvcs=false, or outside a git checkout, says
// that its revision is unknown instead of inventing one.
func versionText(bi *debug.BuildInfo, ok bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "agentexec %s\n", Version)
	if !ok || bi == nil {
		b.WriteString("module: unknown (the binary carries no build information)\n")
		fmt.Fprintf(&b, "built with %s for %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return b.String()
	}
	mod := bi.Main.Path
	if mod == "" {
		mod = "github.com/agentexec/agentexec"
	}
	ver := bi.Main.Version
	if ver == "" {
		ver = "(devel)"
	}
	fmt.Fprintf(&b, "module: %s %s\n", mod, ver)
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "revision: %s", rev)
		if settings["vcs.modified"] == "true" {
			b.WriteString(" (with uncommitted changes)")
		}
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, ", committed %s", t)
		}
		b.WriteString("\n")
	} else {
		b.WriteString("revision: unknown (built without VCS information: -buildvcs=false, or not from a git checkout)\n")
	}
	goVer := bi.GoVersion
	if goVer == "" {
		goVer = runtime.Version()
	}
	fmt.Fprintf(&b, "built with %s for %s/%s\n", goVer, runtime.GOOS, runtime.GOARCH)
	return b.String()
}
