package terminal

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Filter turns raw terminal output into text a model can read: "\r\n"
// becomes "\n", a line rewritten with carriage returns (a progress bar)
// keeps only what a screen would finally show, backspaces erase, and ANSI
// escape sequences (colours, cursor movement, window titles) are removed,
// with the few that edit the current line (erase in line, cursor left,
// right and to a column) applied. Other control characters but tab are
// dropped.
//
// A Filter keeps the state of an escape sequence or a UTF-8 character cut
// between two chunks, so a stream can be rendered chunk by chunk; the line
// being edited starts afresh with each chunk. The zero value is ready to
// use. A Filter is not safe for concurrent use.
type Filter struct {
	state   uint8
	params  []byte // of the CSI sequence being read
	pending []byte // an incomplete UTF-8 character at the end of the last chunk
}

const (
	ground uint8 = iota
	escape
	escInter
	csi
	osc
	oscEscape
	str // DCS, SOS, PM, APC: up to the string terminator
	strEscape
)

// line is the line being edited: runes and a cursor column.
type line struct {
	r   []rune
	col int
}

func (l *line) put(r rune) {
	for len(l.r) < l.col {
		l.r = append(l.r, ' ')
	}
	if l.col < len(l.r) {
		l.r[l.col] = r
	} else {
		l.r = append(l.r, r)
	}
	l.col++
}

func (l *line) flush(b *strings.Builder) {
	b.WriteString(string(l.r))
	l.r, l.col = l.r[:0], 0
}

// Render returns the readable text of the next chunk of raw output.
func (f *Filter) Render(raw []byte) string {
	if len(f.pending) > 0 {
		raw = append(f.pending[:len(f.pending):len(f.pending)], raw...)
		f.pending = nil
	}
	var b strings.Builder
	b.Grow(len(raw))
	var ln line
	for i := 0; i < len(raw); {
		c := raw[i]
		switch f.state {
		case escape:
			i++
			switch {
			case c == '[':
				f.state, f.params = csi, f.params[:0]
			case c == ']':
				f.state = osc
			case c == 'P' || c == 'X' || c == '^' || c == '_':
				f.state = str
			case c >= 0x20 && c <= 0x2f:
				f.state = escInter
			case c == 0x1b:
				// ESC ESC: start again
			default:
				f.state = ground
			}
			continue
		case escInter:
			i++
			if c >= 0x30 && c <= 0x7e {
				f.state = ground
			} else if c == 0x1b {
				f.state = escape
			}
			continue
		case csi:
			i++
			switch {
			case c >= 0x40 && c <= 0x7e:
				f.state = ground
				f.applyCSI(&ln, c)
			case c == 0x1b:
				f.state = escape
			case c == 0x18 || c == 0x1a: // CAN, SUB abort the sequence
				f.state = ground
			default:
				if len(f.params) < 64 {
					f.params = append(f.params, c)
				}
			}
			continue
		case osc, str:
			i++
			switch c {
			case 0x07:
				if f.state == osc {
					f.state = ground
				}
			case 0x1b:
				if f.state == osc {
					f.state = oscEscape
				} else {
					f.state = strEscape
				}
			case 0x18, 0x1a:
				f.state = ground
			}
			continue
		case oscEscape, strEscape:
			// ESC \ ends the string; anything else is still inside it.
			i++
			if c == '\\' {
				f.state = ground
			} else if f.state == oscEscape {
				f.state = osc
			} else {
				f.state = str
			}
			continue
		}
		// ground
		if c < utf8.RuneSelf {
			i++
			switch c {
			case '\n':
				ln.flush(&b)
				b.WriteByte('\n')
			case '\r':
				ln.col = 0
			case '\b':
				if ln.col > 0 {
					ln.col--
				}
			case '\t':
				ln.put('\t')
			case 0x1b:
				f.state = escape
			default:
				if c >= 0x20 && c != 0x7f {
					ln.put(rune(c))
				}
			}
			continue
		}
		if !utf8.FullRune(raw[i:]) {
			f.pending = append([]byte(nil), raw[i:]...)
			break
		}
		r, size := utf8.DecodeRune(raw[i:])
		i += size
		if r >= 0x80 && r <= 0x9f { // C1 controls
			continue
		}
		ln.put(r)
	}
	ln.flush(&b)
	return b.String()
}

// Pending reports whether the filter holds the start of an escape sequence
// or a character that the next chunk completes.
func (f *Filter) Pending() bool { return f.state != ground || len(f.pending) > 0 }

// applyCSI applies the CSI sequences that edit the current line.
func (f *Filter) applyCSI(ln *line, final byte) {
	n := 0
	if p := string(f.params); p != "" && !strings.ContainsAny(p, ";?<=>") {
		n, _ = strconv.Atoi(p)
	}
	switch final {
	case 'K': // erase in line
		switch n {
		case 0:
			if ln.col < len(ln.r) {
				ln.r = ln.r[:ln.col]
			}
		case 1:
			for i := 0; i < ln.col && i < len(ln.r); i++ {
				ln.r[i] = ' '
			}
		case 2:
			ln.r = ln.r[:0]
		}
	case 'G': // cursor to column
		ln.col = max(n, 1) - 1
	case 'C': // cursor right
		ln.col += max(n, 1)
	case 'D': // cursor left
		ln.col = max(ln.col-max(n, 1), 0)
	}
	if ln.col > 4096 {
		ln.col = 4096
	}
}

// Readable renders a whole stream at once (see Filter).
func Readable(raw []byte) string {
	var f Filter
	return f.Render(raw)
}
