package terminal

// Ring keeps the newest bytes of a stream in a bounded amount of memory
// and counts everything that went through it, so that a reader with a
// cursor (a position in the whole stream) learns exactly how much it
// missed. Its memory grows with what was written, up to its capacity. The
// zero value keeps nothing; create one with NewRing. A Ring is not safe for
// concurrent use.
type Ring struct {
	buf     []byte // until it wraps: bytes [0, written); then size bytes, byte i at i%size
	size    int
	written int64
}

// NewRing returns a ring that keeps the last size bytes (at least 1).
func NewRing(size int) *Ring {
	return &Ring{size: max(size, 1)}
}

// Cap returns how many bytes the ring keeps.
func (r *Ring) Cap() int { return r.size }

// Written returns how many bytes were ever written: the cursor after the
// newest byte.
func (r *Ring) Written() int64 { return r.written }

// Write appends p, overwriting the oldest bytes beyond the capacity. It
// never fails.
func (r *Ring) Write(p []byte) (int, error) {
	n := len(p)
	size := r.size
	if size == 0 {
		r.written += int64(n)
		return n, nil
	}
	if len(r.buf) < size {
		if need := len(r.buf) + len(p); need <= size {
			if need > cap(r.buf) {
				nb := make([]byte, len(r.buf), min(max(2*cap(r.buf), need, 4096), size))
				copy(nb, r.buf)
				r.buf = nb
			}
			r.buf = append(r.buf, p...)
			r.written += int64(n)
			return n, nil
		}
		nb := make([]byte, size) // wraps from now on; byte i stays at i
		copy(nb, r.buf)
		r.buf = nb
	}
	if len(p) > size {
		r.written += int64(len(p) - size)
		p = p[len(p)-size:]
	}
	for len(p) > 0 {
		off := int(r.written % int64(size))
		c := copy(r.buf[off:], p)
		p = p[c:]
		r.written += int64(c)
	}
	return n, nil
}

// Read appends to dst the bytes from cursor on, at most limit of them
// (limit <= 0: all that are kept), and returns dst, the cursor after what
// was read, and how many bytes between cursor and the oldest byte kept
// were lost. A cursor beyond the end reads nothing.
func (r *Ring) Read(dst []byte, cursor int64, limit int) ([]byte, int64, int64) {
	oldest := r.written - int64(r.size)
	if oldest < 0 {
		oldest = 0
	}
	var dropped int64
	if cursor < oldest {
		dropped = oldest - cursor
		cursor = oldest
	}
	if cursor >= r.written {
		return dst, r.written, dropped
	}
	n := r.written - cursor
	if limit > 0 && n > int64(limit) {
		n = int64(limit)
	}
	size := int64(r.size)
	for n > 0 {
		off := cursor % size
		end := min(off+n, size)
		dst = append(dst, r.buf[off:end]...)
		n -= end - off
		cursor += end - off
	}
	return dst, cursor, dropped
}
