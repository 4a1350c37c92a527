//go:build !unix

package mcpserver

import (
	"context"
	"net"
	"strings"
)

func listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		return net.Listen("unix", path)
	}
	return net.Listen("tcp", addr)
}

func withPeer(ctx context.Context, _ net.Conn) context.Context { return ctx }

func peerUID(context.Context) (int, bool) { return 0, false }
