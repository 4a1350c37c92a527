package capture

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// reference computes, from the whole stream at once, what a Buffer with
// limit l must keep. It follows the package documentation literally.
func reference(data []byte, l Limit) Snapshot {
	l = l.normalized()
	// starts[i] is the offset of the i-th character; starts[len] = len(data).
	starts := make([]int, 0, len(data)+1)
	for p := 0; p < len(data); {
		starts = append(starts, p)
		_, size := utf8.DecodeRune(data[p:])
		p += size
	}
	starts = append(starts, len(data))
	nchars := int64(len(starts) - 1)
	isStart := make([]bool, len(data)+1) // a slice, not a map: this runs on megabytes under the race detector
	for _, p := range starts {
		isStart[p] = true
	}
	headEnd := func(n int64) int {
		if l.Unit == Chars {
			return starts[min(n, nchars)]
		}
		p := int(min(n, int64(len(data))))
		for !isStart[p] {
			p--
		}
		return p
	}
	tailStart := func(n int64) int {
		if l.Unit == Chars {
			return starts[max(0, nchars-n)]
		}
		p := max(0, len(data)-int(min(n, int64(len(data)))))
		for !isStart[p] {
			p++
		}
		return p
	}
	s := Snapshot{TotalBytes: int64(len(data)), Strategy: l.Strategy, Unit: l.Unit}
	if l.Unit == Chars {
		s.TotalChars = nchars
	}
	size := int64(len(data))
	if l.Unit == Chars {
		size = nchars
	}
	switch {
	case l.Strategy == Head:
		s.Head = data[:headEnd(l.Max)]
	case l.Strategy == Tail:
		if size <= l.Max {
			s.Head = data
		} else {
			s.Tail = data[tailStart(l.Max):]
		}
	case size <= l.Max:
		s.Head = data
	default:
		s.Head = data[:headEnd(l.HeadKeep)]
		s.Tail = data[tailStart(l.TailKeep):]
	}
	s.OmittedBytes = s.TotalBytes - int64(len(s.Head)) - int64(len(s.Tail))
	s.Truncated = s.OmittedBytes > 0
	return s
}

func feed(t testing.TB, l Limit, data []byte, chunks []int) Snapshot {
	t.Helper()
	b, err := New(l)
	if err != nil {
		t.Fatalf("New(%+v): %v", l, err)
	}
	rest := data
	for i := 0; len(rest) > 0; i++ {
		n := len(rest)
		if len(chunks) > 0 {
			n = min(n, max(1, chunks[i%len(chunks)]))
		}
		if w, err := b.Write(rest[:n]); w != n || err != nil {
			t.Fatalf("Write returned %d, %v; want %d, nil", w, err, n)
		}
		rest = rest[n:]
	}
	return b.Snapshot()
}

func sameSnapshot(t testing.TB, got, want Snapshot, what string) {
	t.Helper()
	if !bytes.Equal(got.Head, want.Head) || !bytes.Equal(got.Tail, want.Tail) ||
		got.TotalBytes != want.TotalBytes || got.TotalChars != want.TotalChars ||
		got.Truncated != want.Truncated || got.OmittedBytes != want.OmittedBytes {
		t.Fatalf("%s:\n got head=%q tail=%q total=%d chars=%d trunc=%v omitted=%d\nwant head=%q tail=%q total=%d chars=%d trunc=%v omitted=%d",
			what, got.Head, got.Tail, got.TotalBytes, got.TotalChars, got.Truncated, got.OmittedBytes,
			want.Head, want.Tail, want.TotalBytes, want.TotalChars, want.Truncated, want.OmittedBytes)
	}
}

func TestBufferCases(t *testing.T) {
	euro := "€" // 3 bytes
	cases := []struct {
		name      string
		limit     Limit
		data      string
		head      string
		tail      string
		truncated bool
	}{
		{"head fits", Limit{Strategy: Head, Max: 10}, "hello", "hello", "", false},
		{"head exact", Limit{Strategy: Head, Max: 5}, "hello", "hello", "", false},
		{"head cut", Limit{Strategy: Head, Max: 3}, "hello", "hel", "", true},
		{"head cut before rune", Limit{Strategy: Head, Max: 4}, "abc" + euro + "d", "abc", "", true},
		{"head chars", Limit{Strategy: Head, Unit: Chars, Max: 4}, "abc" + euro + "def", "abc" + euro, "", true},
		{"tail cut", Limit{Strategy: Tail, Max: 3}, "hello", "", "llo", true},
		{"tail cut after rune", Limit{Strategy: Tail, Max: 3}, "ab" + euro + "cd", "", "cd", true},
		{"tail chars", Limit{Strategy: Tail, Unit: Chars, Max: 3}, "ab" + euro + "cd", "", euro + "cd", true},
		{"tail fits", Limit{Strategy: Tail, Max: 30}, "hello", "hello", "", false},
		{"middle fits", Limit{Strategy: Middle, Max: 5}, "hello", "hello", "", false},
		{"middle cut", Limit{Strategy: Middle, Max: 4, HeadKeep: 2, TailKeep: 2}, "abcdefgh", "ab", "gh", true},
		{"middle default halves", Limit{Strategy: Middle, Max: 4}, "abcdefgh", "ab", "gh", true},
		{"middle chars", Limit{Strategy: Middle, Unit: Chars, Max: 4, HeadKeep: 1, TailKeep: 1}, euro + euro + euro + euro + euro, euro, euro, true},
		{"invalid bytes count as chars", Limit{Strategy: Head, Unit: Chars, Max: 2}, "\xff\xfeabc", "\xff\xfe", "", true},
		{"empty", Limit{Strategy: Middle, Max: 4}, "", "", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, chunk := range []int{0, 1, 2, 3} {
				var chunks []int
				if chunk > 0 {
					chunks = []int{chunk}
				}
				got := feed(t, c.limit, []byte(c.data), chunks)
				if string(got.Head) != c.head || string(got.Tail) != c.tail || got.Truncated != c.truncated {
					t.Fatalf("chunk %d: got head %q tail %q truncated %v; want %q %q %v", chunk, got.Head, got.Tail, got.Truncated, c.head, c.tail, c.truncated)
				}
				if got.TotalBytes != int64(len(c.data)) {
					t.Fatalf("TotalBytes = %d, want %d", got.TotalBytes, len(c.data))
				}
				sameSnapshot(t, got, reference([]byte(c.data), c.limit), "against reference")
			}
		})
	}
}

func TestLimitValidate(t *testing.T) {
	bad := []Limit{
		{Strategy: 9},
		{Unit: 7},
		{Max: -1},
		{Strategy: Head, HeadKeep: 1},
		{Strategy: Middle, Max: 10, HeadKeep: 6, TailKeep: 6},
		{Strategy: Middle, HeadKeep: -1},
	}
	for _, l := range bad {
		if _, err := New(l); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", l)
		}
	}
	if _, err := New(Limit{}); err != nil {
		t.Errorf("zero Limit: %v", err)
	}
}

func TestTextViews(t *testing.T) {
	s := feed(t, Limit{Strategy: Middle, Max: 4, HeadKeep: 2, TailKeep: 2}, []byte("ab\xffdefgh"), nil)
	if got, want := s.Text(), "ab\n[... 4 bytes omitted ...]\ngh"; got != want {
		t.Errorf("Text() = %q, want %q", got, want)
	}
	if got := ValidText([]byte("a\xff\xfeb")); got != "a\uFFFD\uFFFDb" {
		t.Errorf("ValidText = %q", got)
	}
	s = feed(t, Limit{Strategy: Tail, Max: 2}, []byte("abcd"), nil)
	if got, want := s.Text(), "[... 2 bytes omitted ...]\ncd"; got != want {
		t.Errorf("tail Text() = %q, want %q", got, want)
	}
}

// TestLargeStream pushes many windows' worth of data through each strategy
// and checks the exact bytes kept at each end.
func TestLargeStream(t *testing.T) {
	chunk := []byte(strings.Repeat("0123456789€abcdef\n", 4000))
	for _, l := range []Limit{
		{Strategy: Head, Max: 1000},
		{Strategy: Tail, Max: 1000},
		{Strategy: Middle, Max: 128 << 10, HeadKeep: 4 << 10, TailKeep: 4 << 10},
		{Strategy: Middle, Unit: Chars, Max: 50000},
		{Strategy: Tail, Unit: Chars, Max: 777},
	} {
		all := make([]byte, 0, 50*len(chunk))
		b, _ := New(l)
		for i := 0; i < 50; i++ {
			p := append([]byte(nil), chunk...)
			p[0] = byte('A' + i%26)
			all = append(all, p...)
			b.Write(p)
		}
		sameSnapshot(t, b.Snapshot(), reference(all, l), l.Strategy.String()+"/"+l.Unit.String())
	}
}

// FuzzBuffer checks Buffer against the reference for any data, limit and
// chunking.
func FuzzBuffer(f *testing.F) {
	f.Add([]byte("hello, world"), uint8(0), uint8(0), uint16(5), uint16(0), uint16(0), []byte{3})
	f.Add([]byte("ab€cd€€ef\xffg\xe2\x82"), uint8(1), uint8(1), uint16(3), uint16(0), uint16(0), []byte{1, 2})
	f.Add([]byte("€€€€€€€€€€€€€€€€€€€"), uint8(2), uint8(1), uint16(6), uint16(2), uint16(3), []byte{4, 1})
	f.Add([]byte("\xf0\x9f\x98\x80\xf0\x9f\x98"), uint8(2), uint8(0), uint16(5), uint16(2), uint16(2), []byte{1})
	f.Fuzz(func(t *testing.T, data []byte, strategy, unit uint8, maxv, hk, tk uint16, chunks []byte) {
		l := Limit{Strategy: Strategy(strategy % 3), Unit: Unit(unit % 2), Max: int64(maxv%300) + 1}
		if l.Strategy == Middle {
			l.HeadKeep, l.TailKeep = int64(hk)%(l.Max+1), int64(tk)%(l.Max+1)
			if l.HeadKeep+l.TailKeep > l.Max {
				l.TailKeep = l.Max - l.HeadKeep
			}
		}
		var sizes []int
		for _, c := range chunks {
			sizes = append(sizes, int(c))
		}
		got := feed(t, l, data, sizes)
		sameSnapshot(t, got, reference(data, l), "fuzz")
		if !utf8.ValidString(got.Text()) {
			t.Fatalf("Text() is not valid UTF-8")
		}
	})
}
