//go:build unix

package mcpserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
)

// listen listens on addr: TCP, or a Unix socket ("unix:PATH") created with
// mode 0600 (the umask is narrowed while it is made, so that it is never
// open to others, even for a moment). A stale socket of this user at PATH
// is replaced; anything else there is refused.
func listen(addr string) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok {
		return net.Listen("tcp", addr)
	}
	if fi, err := os.Lstat(path); err == nil {
		st, _ := fi.Sys().(*syscall.Stat_t)
		if fi.Mode()&os.ModeSocket == 0 || st == nil || int(st.Uid) != os.Getuid() {
			return nil, fmt.Errorf("%s exists and is not a socket of this user; remove it or choose another path", path)
		}
		os.Remove(path)
	}
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

type peerKey struct{}

// withPeer records the uid of a Unix-socket peer in the connection's
// context.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	if uid, ok := peerOf(c); ok {
		return context.WithValue(ctx, peerKey{}, uid)
	}
	return ctx
}

// peerUID returns the uid of the request's Unix-socket peer, if known.
func peerUID(ctx context.Context) (int, bool) {
	uid, ok := ctx.Value(peerKey{}).(int)
	return uid, ok
}
