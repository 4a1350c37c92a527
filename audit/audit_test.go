package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func readLines(t *testing.T, path string) []Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("malformed line %q: %v", sc.Text(), err)
		}
		evs = append(evs, e)
	}
	return evs
}

func TestFileWritesJSONLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "audit.jsonl")
	a, err := OpenFile(path, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	code := 3
	a.Write(Event{Time: time.Now(), Type: Dispatched, Tool: "bash", Command: "ls", EnvKeys: []string{"A"}})
	a.Write(Event{Time: time.Now(), Type: Finished, Tool: "bash", ExitCode: &code})
	a.Close()
	evs := readLines(t, path)
	if len(evs) != 2 || evs[0].Command != "ls" || *evs[1].ExitCode != 3 {
		t.Errorf("events %+v", evs)
	}
	for _, p := range []string{path, filepath.Dir(path)} {
		fi, _ := os.Stat(p)
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is open to others: %v", p, fi.Mode())
		}
	}
	if err := a.Write(Event{}); err == nil {
		t.Error("write after close succeeded")
	}
}

func TestFileRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := OpenFile(path, 1000, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := range 100 {
		if err := a.Write(Event{Type: Finished, Tool: "t", CallID: fmt.Sprint(i), Reason: strings.Repeat("x", 50)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{path, path + ".1", path + ".2"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if fi.Size() > 1000 {
			t.Errorf("%s is %d bytes, over the cap", p, fi.Size())
		}
		readLines(t, p)
	}
	if _, err := os.Stat(path + ".3"); err == nil {
		t.Error("kept more than 2 old files")
	}
	evs := readLines(t, path)
	if last := evs[len(evs)-1]; last.CallID != "99" {
		t.Errorf("newest event %q", last.CallID)
	}
}

// TestFileSharedByWriters: two sinks on one file (two processes' worth)
// never interleave or lose lines, across rotations.
func TestFileSharedByWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var wg sync.WaitGroup
	for w := range 2 {
		a, err := OpenFile(path, 64<<10, 10)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer a.Close()
			for i := range 500 {
				a.Write(Event{Type: Finished, Tool: "t", CallID: fmt.Sprintf("%d-%d", w, i), Reason: strings.Repeat("y", 200)})
			}
		}()
	}
	wg.Wait()
	n := 0
	for i := range 10 {
		p := path
		if i > 0 {
			p += fmt.Sprint(".", i)
		}
		if _, err := os.Stat(p); err == nil {
			n += len(readLines(t, p))
		}
	}
	if n != 1000 {
		t.Errorf("%d events, want 1000", n)
	}
	if _, err := os.Stat(path + ".2"); err != nil {
		t.Error("the test did not rotate")
	}
}

func TestMemory(t *testing.T) {
	var m Memory
	m.Write(Event{Type: Denied})
	if evs := m.Events(); len(evs) != 1 || evs[0].Type != Denied {
		t.Errorf("%+v", evs)
	}
	if Discard.Write(Event{}) != nil {
		t.Error("Discard failed")
	}
}
