package jobs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// outputFile is a job's output file with its size cap: when it grows past
// the cap, the oldest output is dropped so that the newest half of the cap
// stays, under a line that says how much was dropped. Offsets in the whole
// stream stay meaningful: Info.Dropped and Info.HeaderLen map them to the
// file.
type outputFile struct {
	mu      sync.Mutex
	dir     string
	path    string
	f       *os.File
	size    int64 // bytes in the file
	max     int64
	info    *Info
	written int64
}

func openOutput(dir string, max int64, info *Info) (*outputFile, error) {
	if max <= 0 {
		max = DefaultMaxOutput
	}
	path := filepath.Join(dir, "output")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("jobs: cannot open the output file: %w", err)
	}
	return &outputFile{dir: dir, path: path, f: f, max: max, info: info}, nil
}

func (o *outputFile) write(b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, _ := o.f.Write(b)
	o.size += int64(n)
	o.written += int64(n)
	if o.size > o.max {
		o.compact()
	}
}

// compact keeps the newest half of the cap.
func (o *outputFile) compact() {
	keep := o.max / 2
	src, err := os.Open(o.path)
	if err != nil {
		return
	}
	defer src.Close()
	drop := o.size - keep
	o.info.Dropped += drop - o.info.HeaderLen
	header := fmt.Sprintf("[agentexec: the first %d bytes of output were dropped to keep this file under %d bytes]\n", o.info.Dropped, o.max)
	tmp := o.path + ".tmp"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	dst.WriteString(header)
	src.Seek(drop, io.SeekStart)
	io.Copy(dst, src)
	dst.Close()
	if os.Rename(tmp, o.path) != nil {
		return
	}
	o.f.Close()
	o.f, _ = os.OpenFile(o.path, os.O_WRONLY|os.O_APPEND, 0)
	o.info.HeaderLen = int64(len(header))
	o.size = keep + o.info.HeaderLen
	writeInfo(o.dir, o.info)
}

func (o *outputFile) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.f.Close()
}
