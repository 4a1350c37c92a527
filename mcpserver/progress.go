package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxTailLines and maxTailBytes bound the latest output a progress
// notification carries.
const (
	maxTailLines = 5
	maxTailBytes = 2 << 10
)

// progress reports a running call to a client that sent a progress token:
// elapsed time, bytes so far and the latest output lines, at most once per
// interval.
type progress struct {
	ss       *mcp.ServerSession
	token    any
	interval time.Duration
	start0   time.Time

	mu    sync.Mutex
	bytes int64
	tail  []byte // the last maxTailBytes of output
	dirty bool

	done chan struct{}
	wg   sync.WaitGroup
}

func newProgress(ss *mcp.ServerSession, token any, interval time.Duration) *progress {
	return &progress{ss: ss, token: token, interval: interval, start0: time.Now(), done: make(chan struct{})}
}

// output is the call's OnOutput hook.
func (p *progress) output(_ string, b []byte) {
	p.mu.Lock()
	p.bytes += int64(len(b))
	p.tail = append(p.tail, b...)
	if len(p.tail) > maxTailBytes {
		p.tail = append(p.tail[:0], p.tail[len(p.tail)-maxTailBytes:]...)
	}
	p.dirty = true
	p.mu.Unlock()
}

func (p *progress) start(ctx context.Context) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				p.send(ctx)
			}
		}
	}()
}

func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
}

// send notifies the client. Progress is the elapsed time in seconds, which
// only grows.
func (p *progress) send(ctx context.Context) {
	p.mu.Lock()
	n, tail := p.bytes, lastLines(p.tail, maxTailLines)
	p.dirty = false
	p.mu.Unlock()
	elapsed := time.Since(p.start0)
	msg := fmt.Sprintf("running for %s, %d bytes of output", elapsed.Round(100*time.Millisecond), n)
	if tail != "" {
		msg += "; latest:\n" + tail
	}
	p.ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: elapsed.Seconds(), Message: msg})
}

// lastLines returns the last n complete or partial lines of b, as valid
// text.
func lastLines(b []byte, n int) string {
	b = bytes.TrimRight(b, "\n")
	start := len(b)
	for i := 0; i < n && start > 0; i++ {
		j := bytes.LastIndexByte(b[:start], '\n')
		start = j
		if j < 0 {
			start = 0
			break
		}
	}
	if start > 0 {
		start++
	}
	return strings.ToValidUTF8(string(b[start:]), "\uFFFD")
}
