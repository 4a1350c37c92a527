package cli

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interruptible returns a context cancelled when agentexec gets SIGINT,
// SIGTERM or SIGHUP, a function that reports which signal did it (nil if
// none), and a stop function to call when done.
func interruptible(ctx context.Context) (context.Context, func() os.Signal, func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	var mu sync.Mutex
	var got os.Signal
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case s := <-sigs:
			mu.Lock()
			got = s
			mu.Unlock()
			cancel()
		case <-done:
		}
	}()
	which := func() os.Signal {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	stop := func() {
		signal.Stop(sigs)
		close(done)
		<-finished
		cancel()
	}
	return ctx, which, stop
}
