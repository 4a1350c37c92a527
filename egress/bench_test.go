package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// sink serves each connection: "d" sends size bytes and closes, "e"
// echoes one byte.
func sink(b *testing.B, size int64) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var op [1]byte
				if _, err := io.ReadFull(c, op[:]); err != nil {
					return
				}
				if op[0] == 'e' {
					c.Write(op[:])
					return
				}
				for left := size; left > 0; {
					n := min(left, int64(len(buf)))
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
					left -= n
				}
			}()
		}
	}()
	b.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// benchSize is the size of one benchmark transfer: 1 GiB, 64 MiB with
// -short.
func benchSize() int64 {
	if testing.Short() {
		return 64 << 20
	}
	return 1 << 30
}

// fetch asks the sink at target for its data (directly or through the
// proxy, as dialVia does) and reads all of it, failing b unless it is size
// bytes.
func fetch(b *testing.B, how, proxy, target string, size int64, buf []byte) {
	c := dialVia(b, how, proxy, target)
	defer c.Close()
	c.Write([]byte{'d'})
	var got int64
	for {
		n, err := c.Read(buf)
		got += int64(n)
		if err != nil {
			break
		}
	}
	if got != size {
		b.Fatalf("got %d bytes of %d", got, size)
	}
}

// benchProxy serves a proxy that allows 127.0.0.1 on a loopback port,
// closed when b ends, and returns its address.
func benchProxy(b *testing.B) string {
	b.Helper()
	p, err := New(Config{Allow: []string{"127.0.0.1"}, AllowPrivate: true})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go p.Serve(ln)
	b.Cleanup(func() { p.Close() })
	return ln.Addr().String()
}

// dialVia opens a connection to target directly ("direct"), through an
// HTTP CONNECT ("connect") or through SOCKS5 ("socks5").
func dialVia(b *testing.B, how, proxy, target string) net.Conn {
	switch how {
	case "direct":
		c, err := net.Dial("tcp", target)
		if err != nil {
			b.Fatal(err)
		}
		return c
	case "connect":
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 || br.Buffered() != 0 {
			b.Fatalf("CONNECT: %v %v", resp, err)
		}
		return c
	}
	host, port, _ := net.SplitHostPort(target)
	n, _ := strconv.Atoi(port)
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		b.Fatal(err)
	}
	ip := net.ParseIP(host).To4()
	c.Write(append([]byte{5, 1, 0, 5, 1, 0, 1, ip[0], ip[1], ip[2], ip[3]}, byte(n>>8), byte(n)))
	var rep [12]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil || rep[3] != 0 {
		b.Fatalf("SOCKS5: %v %v", rep, err)
	}
	return c
}

// BenchmarkThroughput moves 1 GiB (64 MiB with -short) from a loopback
// server to a client: direct (the baseline) and through the proxy's
// CONNECT tunnel and SOCKS5.
func BenchmarkThroughput(b *testing.B) {
	size := benchSize()
	target := sink(b, size)
	proxy := benchProxy(b)
	buf := make([]byte, 64<<10)
	for _, how := range []string{"direct", "connect", "socks5"} {
		b.Run(how, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				fetch(b, how, proxy, target, size, buf)
			}
		})
	}
}

// BenchmarkSetup opens a connection and does one round trip: direct (the
// baseline), through CONNECT and through SOCKS5; the difference is the
// proxy's set-up cost (accept, parse, rule check, dial, reply).
func BenchmarkSetup(b *testing.B) {
	target := sink(b, 0)
	proxy := benchProxy(b)
	for _, how := range []string{"direct", "connect", "socks5"} {
		b.Run(how, func(b *testing.B) {
			var one [1]byte
			for b.Loop() {
				c := dialVia(b, how, proxy, target)
				c.Write([]byte{'e'})
				if _, err := io.ReadFull(c, one[:]); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}

// BenchmarkThroughputPaired moves the same data direct and through the
// proxy's CONNECT tunnel in each iteration, alternating which goes first,
// and reports the ratio of their speeds (proxy/direct; 1 is no cost), which
// holds up on a loaded machine where separate runs drift.
func BenchmarkThroughputPaired(b *testing.B) {
	size := benchSize()
	target := sink(b, size)
	proxy := benchProxy(b)
	buf := make([]byte, 64<<10)
	transfer := func(how string) time.Duration {
		start := time.Now()
		fetch(b, how, proxy, target, size, buf)
		return time.Since(start)
	}
	var direct, proxied time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			direct += transfer("direct")
			proxied += transfer("connect")
		} else {
			proxied += transfer("connect")
			direct += transfer("direct")
		}
		i++
	}
	b.ReportMetric(float64(direct)/float64(proxied), "proxy/direct")
	b.ReportMetric(float64(size)*float64(i)/direct.Seconds()/1e6, "direct-MB/s")
	b.ReportMetric(float64(size)*float64(i)/proxied.Seconds()/1e6, "proxy-MB/s")
}

// BenchmarkSetupPaired opens a connection and does one round trip, direct
// and through CONNECT in each iteration (alternating), and reports the
// time the proxy adds per connection.
func BenchmarkSetupPaired(b *testing.B) {
	target := sink(b, 0)
	proxy := benchProxy(b)
	var one [1]byte
	once := func(how string) time.Duration {
		start := time.Now()
		c := dialVia(b, how, proxy, target)
		c.Write([]byte{'e'})
		if _, err := io.ReadFull(c, one[:]); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		c.Close()
		return d
	}
	var direct, proxied time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			direct += once("direct")
			proxied += once("connect")
		} else {
			proxied += once("connect")
			direct += once("direct")
		}
		i++
	}
	b.ReportMetric(float64(direct.Microseconds())/float64(i), "direct-µs")
	b.ReportMetric(float64((proxied-direct).Microseconds())/float64(i), "added-µs")
}
