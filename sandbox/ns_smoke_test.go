//go:build linux

package sandbox

import "testing"

func TestSmokeNS(t *testing.T) {
	ws, _ := workspace(t)
	s, err := Profile("no-network", ProfileOptions{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, s, ws, `id; grep Cap /proc/self/status; ls /; echo HOME=$HOME; ls -la ~; ls /proc | head -5; pwd; touch x && echo wrote; env | grep -i cache; ls /dev; exit 3`)
	t.Logf("exit %d sig %d\n%s", r.ExitCode, r.Signal, out(r))
}
