package terminal

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

func TestReadable(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"crlf", "a\r\nb\r\n", "a\nb\n"},
		{"progress", "10%\r20%\r100%\n", "100%\n"},
		{"partial overwrite", "abcdef\rxy\n", "xycdef\n"},
		{"colour", "\x1b[1;31mred\x1b[0m plain\n", "red plain\n"},
		{"erase line", "downloading 1\r\x1b[Kdone\n", "done\n"},
		{"erase whole", "junk\x1b[2K\rok\n", "ok\n"},
		{"title", "\x1b]0;my title\x07text\n", "text\n"},
		{"title st", "\x1b]2;t\x1b\\text\n", "text\n"},
		{"bracketed paste", "\x1b[?2004hprompt$ \x1b[?2004l\n", "prompt$ \n"},
		{"charset", "\x1b(Bx\n", "x\n"},
		{"backspace", "abc\b\bX\n", "aXc\n"},
		{"bell and nul", "a\a\x00b\n", "ab\n"},
		{"tab kept", "a\tb\n", "a\tb\n"},
		{"column", "abc\x1b[1Gz\n", "zbc\n"},
		{"cursor right", "a\x1b[3Cb\n", "a   b\n"},
		{"utf8", "héllo ✓\n", "héllo ✓\n"},
		{"invalid utf8", "a\xffb\n", "a\uFFFDb\n"},
		{"no final newline", "abc", "abc"},
		{"dcs", "\x1bPq#0;1\x1b\\after\n", "after\n"},
	} {
		if got := Readable([]byte(c.in)); got != c.want {
			t.Errorf("%s: Readable(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

func TestFilterSplitSequences(t *testing.T) {
	in := []byte("\x1b[31mred\x1b[0m ✓ \x1b]0;title\x07end\n")
	want := Readable(in)
	for cut := 0; cut <= len(in); cut++ {
		var f Filter
		got := f.Render(in[:cut]) + f.Render(in[cut:])
		if got != want {
			t.Errorf("cut at %d: %q, want %q", cut, got, want)
		}
	}
}

func TestRing(t *testing.T) {
	r := NewRing(8)
	r.Write([]byte("abc"))
	b, cur, dropped := r.Read(nil, 0, 0)
	if string(b) != "abc" || cur != 3 || dropped != 0 {
		t.Fatalf("%q %d %d", b, cur, dropped)
	}
	r.Write([]byte("defghijklm"))
	b, cur, dropped = r.Read(nil, cur, 0)
	if string(b) != "fghijklm" || cur != 13 || dropped != 2 {
		t.Fatalf("%q %d %d", b, cur, dropped)
	}
	r.Write([]byte("nop"))
	b, cur, _ = r.Read(nil, cur, 2)
	if string(b) != "no" || cur != 15 {
		t.Fatalf("%q %d", b, cur)
	}
}

func TestRingGrowsWithUse(t *testing.T) {
	r := NewRing(DefaultRingSize)
	r.Write([]byte("hello"))
	if cap(r.buf) > 4096 {
		t.Errorf("a ring holding 5 bytes uses %d", cap(r.buf))
	}
	big := bytes.Repeat([]byte("x"), DefaultRingSize+10)
	r.Write(big)
	if len(r.buf) != DefaultRingSize || cap(r.buf) != DefaultRingSize {
		t.Errorf("a full ring uses %d (len %d)", cap(r.buf), len(r.buf))
	}
	b, _, dropped := r.Read(nil, 0, 0)
	if len(b) != DefaultRingSize || dropped != 15 {
		t.Errorf("read %d, dropped %d", len(b), dropped)
	}
}

func FuzzFilter(f *testing.F) {
	for _, s := range []string{"a\r\nb", "\x1b[31mx\x1b[0m", "\x1b]0;t\x07", "10%\r20%", "é\xff", "\x1b[9999999999G"} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		whole := Readable(in)
		if !utf8.ValidString(whole) {
			t.Fatalf("invalid UTF-8 out of %q", in)
		}
		if bytes.ContainsAny([]byte(whole), "\x1b\r\x00") {
			t.Fatalf("control characters left in %q (from %q)", whole, in)
		}
		if cut < 0 || cut > len(in) {
			return
		}
		var fl Filter
		if fl.Render(in[:cut]) == "" && fl.Render(in[cut:]) == "" && whole != "" && !bytes.ContainsAny(in, "\r\b\x1b") {
			t.Fatalf("chunked rendering lost everything of %q", in)
		}
	})
}

func FuzzRing(f *testing.F) {
	f.Add([]byte("hello world"), 4, 3)
	f.Fuzz(func(t *testing.T, data []byte, size, chunk int) {
		if size <= 0 || size > 1<<12 || chunk <= 0 {
			return
		}
		r := NewRing(size)
		for p := data; len(p) > 0; {
			n := min(chunk, len(p))
			r.Write(p[:n])
			p = p[n:]
		}
		b, cur, dropped := r.Read(nil, 0, 0)
		if cur != int64(len(data)) || dropped+int64(len(b)) != int64(len(data)) || !bytes.Equal(b, data[int(dropped):]) {
			t.Fatalf("size %d chunk %d: read %q dropped %d, data %q", size, chunk, b, dropped, data)
		}
	})
}
