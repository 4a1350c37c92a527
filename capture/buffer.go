package capture

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// slack is how many bytes a Buffer keeps beyond each window so that a cut can
// be moved to a rune boundary without guessing.
const slack = 2 * utf8.UTFMax

// maxWindow bounds a window's byte capacity so that huge limits cannot
// overflow; memory is only used as data actually arrives.
const maxWindow = 1 << 46

// Buffer keeps the part of a stream that its Limit allows, in memory bounded
// by the limit whatever the stream's size. Create one with New.
//
// A Buffer is not safe for concurrent use; the runner serialises its writes.
type Buffer struct {
	lim     Limit
	total   int64
	chars   int64 // complete characters seen (Unit Chars only)
	carry   [utf8.UTFMax]byte
	ncarry  int
	head    []byte // Head: the first bytes; Middle: everything, then the head part
	tail    []byte // Tail and cut Middle: a window ending at the last byte
	headCap int
	tailCap int
	cut     bool // Middle: the stream outgrew the store and was split
}

// New returns an empty Buffer with limit l. It returns an error wrapping
// ErrInvalidLimit if l does not validate.
func New(l Limit) (*Buffer, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	l = l.normalized()
	b := &Buffer{lim: l}
	switch l.Strategy {
	case Head:
		b.headCap = window(l.Max, l.Unit)
	case Tail:
		b.tailCap = window(l.Max, l.Unit)
	case Middle:
		b.headCap = window(l.HeadKeep, l.Unit)
		b.tailCap = window(l.TailKeep, l.Unit)
	}
	return b, nil
}

// window is the byte capacity that holds n units plus the slack.
func window(n int64, u Unit) int {
	if u == Chars {
		if n > maxWindow/utf8.UTFMax {
			return maxWindow
		}
		n *= utf8.UTFMax
	}
	return int(min(n, maxWindow)) + slack
}

// store is the byte capacity of the Middle strategy before it is cut.
func (b *Buffer) store() int { return window(b.lim.Max, b.lim.Unit) }

// Limit returns the limit the Buffer was created with, defaults filled in.
func (b *Buffer) Limit() Limit { return b.lim }

// Len returns the number of bytes written so far, kept or not.
func (b *Buffer) Len() int64 { return b.total }

// Write records p. It always consumes all of p and never fails, so a
// producer is never blocked by a full buffer.
func (b *Buffer) Write(p []byte) (int, error) {
	n := len(p)
	if n == 0 {
		return 0, nil
	}
	b.total += int64(n)
	if b.lim.Unit == Chars {
		b.countChars(p)
	}
	switch b.lim.Strategy {
	case Head:
		if room := b.headCap - len(b.head); room > 0 {
			b.head = append(b.head, p[:min(room, n)]...)
		}
	case Tail:
		b.tail = appendWindow(b.tail, p, b.tailCap)
	case Middle:
		if b.cut {
			if room := b.headCap - len(b.head); room > 0 {
				b.head = append(b.head, p[:min(room, n)]...)
			}
			b.tail = appendWindow(b.tail, p, b.tailCap)
			break
		}
		if room := b.store() - len(b.head); n <= room {
			b.head = append(b.head, p...)
			if b.over(b.chars) {
				b.split(nil)
			}
		} else {
			b.split(p)
		}
	}
	return n, nil
}

// over reports whether a stream of b.total bytes and chars characters is
// longer than Max.
func (b *Buffer) over(chars int64) bool {
	if b.lim.Unit == Chars {
		return chars > b.lim.Max
	}
	return b.total > b.lim.Max
}

// split turns a Middle buffer holding the whole stream so far into a head
// part and a tail window, then adds p, which has not been stored yet.
func (b *Buffer) split(p []byte) {
	old := b.head
	keep := min(len(old), b.tailCap)
	b.tail = appendWindow(make([]byte, 0, min(2*b.tailCap, len(old)+len(p))), old[len(old)-keep:], b.tailCap)
	b.tail = appendWindow(b.tail, p, b.tailCap)
	b.head = old[:min(len(old), b.headCap):min(len(old), b.headCap)]
	if room := b.headCap - len(b.head); room > 0 && len(p) > 0 {
		b.head = append(b.head, p[:min(room, len(p))]...)
	}
	b.cut = true
}

// appendWindow appends p to w and keeps at least the last capacity bytes,
// moving them to the front when w has grown to twice that.
func appendWindow(w, p []byte, capacity int) []byte {
	if len(p) >= capacity {
		return append(w[:0], p[len(p)-capacity:]...)
	}
	w = append(w, p...)
	if len(w) > 2*capacity {
		n := copy(w, w[len(w)-capacity:])
		w = w[:n]
	}
	return w
}

// countChars adds the characters of p to b.chars, holding back an
// incomplete rune at the end until more bytes arrive.
func (b *Buffer) countChars(p []byte) {
	if b.ncarry > 0 {
		var tmp [2 * utf8.UTFMax]byte
		k := copy(tmp[:], b.carry[:b.ncarry])
		k += copy(tmp[k:], p)
		t := tmp[:k]
		pos := 0
		for pos < b.ncarry {
			if !utf8.FullRune(t[pos:]) {
				b.ncarry = copy(b.carry[:], t[pos:])
				return
			}
			_, size := utf8.DecodeRune(t[pos:])
			b.chars++
			pos += size
		}
		p = p[pos-b.ncarry:]
		b.ncarry = 0
	}
	end := len(p)
	for j := max(0, len(p)-utf8.UTFMax+1); j < len(p); j++ {
		if p[j] >= 0xC0 && !utf8.FullRune(p[j:]) {
			end = j
			break
		}
	}
	b.chars += int64(utf8.RuneCount(p[:end]))
	b.ncarry = copy(b.carry[:], p[end:])
}

// Snapshot describes what a Buffer kept of its stream.
type Snapshot struct {
	// Head is the kept beginning of the stream; when nothing was dropped it
	// is the whole stream.
	Head []byte
	// Tail is the kept end of the stream; empty unless something was
	// dropped and the strategy keeps the end (Tail or Middle).
	Tail []byte
	// TotalBytes is the number of bytes the stream had.
	TotalBytes int64
	// TotalChars is the number of characters the stream had; it is counted
	// only when the limit's unit is Chars and is zero otherwise.
	TotalChars int64
	// Truncated is true when some bytes were dropped.
	Truncated bool
	// OmittedBytes is the number of bytes dropped.
	OmittedBytes int64
	// Strategy and Unit are those of the limit that produced the snapshot.
	Strategy Strategy
	Unit     Unit
}

// Snapshot returns what the Buffer holds now. Its slices alias the Buffer's
// memory and stay valid only until the next Write.
func (b *Buffer) Snapshot() Snapshot {
	s := Snapshot{TotalBytes: b.total, Strategy: b.lim.Strategy, Unit: b.lim.Unit}
	if b.lim.Unit == Chars {
		s.TotalChars = b.chars + int64(utf8.RuneCount(b.carry[:b.ncarry]))
	}
	complete := b.total == int64(len(b.head))
	switch b.lim.Strategy {
	case Head:
		s.Head = b.head[:headEnd(b.head, b.lim.Max, b.lim.Unit, complete)]
	case Tail:
		start := tailStart(b.tail, b.lim.Max, b.lim.Unit, b.total == int64(len(b.tail)))
		if b.total == int64(len(b.tail)) && start == 0 {
			s.Head = b.tail
		} else {
			s.Tail = b.tail[start:]
		}
	case Middle:
		switch {
		case !b.over(s.TotalChars):
			s.Head = b.head
		case !b.cut:
			s.Head = b.head[:headEnd(b.head, b.lim.HeadKeep, b.lim.Unit, false)]
			s.Tail = b.head[tailStart(b.head, b.lim.TailKeep, b.lim.Unit, true):]
		default:
			s.Head = b.head[:headEnd(b.head, b.lim.HeadKeep, b.lim.Unit, false)]
			s.Tail = b.tail[tailStart(b.tail, b.lim.TailKeep, b.lim.Unit, b.total == int64(len(b.tail))):]
		}
	}
	s.OmittedBytes = b.total - int64(len(s.Head)) - int64(len(s.Tail))
	s.Truncated = s.OmittedBytes > 0
	return s
}

// boundary reports whether offset p of data is a rune boundary, looking at
// up to three bytes before p. data must hold the bytes after p up to the end
// of any rune that starts before p, or end where the stream ends.
func boundary(data []byte, p int) bool {
	for k := 1; k < utf8.UTFMax && p-k >= 0; k++ {
		if data[p-k] >= 0xC0 {
			if _, size := utf8.DecodeRune(data[p-k:]); size > k {
				return false
			}
		}
	}
	return true
}

// headEnd returns where a head of n units ends in data, which starts at the
// start of the stream. complete says data is the whole stream.
func headEnd(data []byte, n int64, u Unit, complete bool) int {
	if u == Chars {
		p := 0
		for i := int64(0); i < n && p < len(data); i++ {
			_, size := utf8.DecodeRune(data[p:])
			p += size
		}
		return p
	}
	if n >= int64(len(data)) && complete {
		return len(data)
	}
	p := int(min(n, int64(len(data))))
	for p > 0 && !boundary(data, p) {
		p--
	}
	return p
}

// tailStart returns where a tail of n units starts in data, which ends at the
// end of the stream. fromStart says data starts at the start of the stream.
func tailStart(data []byte, n int64, u Unit, fromStart bool) int {
	if u == Chars {
		p0 := 0
		if !fromStart {
			p0 = min(utf8.UTFMax-1, len(data))
			for p0 < len(data) && !boundary(data, p0) {
				p0++
			}
		}
		count := int64(utf8.RuneCount(data[p0:]))
		p := p0
		for ; count > n; count-- {
			_, size := utf8.DecodeRune(data[p:])
			p += size
		}
		return p
	}
	if int64(len(data)) <= n {
		if fromStart {
			return 0
		}
		n = int64(len(data)) // cannot happen for full windows; stay in range
	}
	p := len(data) - int(n)
	for p < len(data) && !boundary(data, p) {
		p++
	}
	return p
}

// ValidText returns b as a string in which each byte that is not part of a
// valid UTF-8 encoding is replaced by U+FFFD, one replacement per byte.
func ValidText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 16)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.Write(b[:size])
		}
		b = b[size:]
	}
	return sb.String()
}

// Text returns the kept output as valid UTF-8 (see ValidText). When bytes
// were dropped, a marker line saying how many takes their place: after Head
// for the Head strategy, before Tail for Tail, between the two for Middle.
func (s Snapshot) Text() string {
	if !s.Truncated {
		return ValidText(s.Head)
	}
	marker := "[... " + strconv.FormatInt(s.OmittedBytes, 10) + " bytes omitted ...]"
	var sb strings.Builder
	sb.WriteString(ValidText(s.Head))
	if len(s.Head) > 0 && s.Head[len(s.Head)-1] != '\n' {
		sb.WriteByte('\n')
	}
	sb.WriteString(marker)
	if s.Strategy != Head {
		sb.WriteByte('\n')
		sb.WriteString(ValidText(s.Tail))
	}
	return sb.String()
}
