// Package capture keeps the output of a process in bounded memory.
//
// A Buffer accepts any amount of data through Write and keeps only what its
// Limit allows: the first part (Head), the last part (Tail), or both ends
// with the middle cut out (Middle). It counts every byte it was given, so a
// caller can always say exactly how much was dropped. Cuts never split a
// UTF-8 encoded rune: a kept part starts and ends on the boundaries that a
// decoder reading the whole stream from its start would see.
//
// The package is pure: it starts no goroutines and touches no files.
package capture

import (
	"errors"
	"fmt"
)

// Strategy says which part of an over-long stream is kept.
type Strategy uint8

const (
	// Head keeps the first Max units and drops the rest.
	Head Strategy = iota
	// Tail keeps the last Max units and drops what came before.
	Tail
	// Middle keeps everything while the stream fits in Max units; once it
	// does not, it keeps the first HeadKeep and the last TailKeep units and
	// drops the middle.
	Middle
)

// String returns the lower-case name used in flags and configuration.
func (s Strategy) String() string {
	switch s {
	case Head:
		return "head"
	case Tail:
		return "tail"
	case Middle:
		return "middle"
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s))
}

// ParseStrategy parses "head", "tail" or "middle".
func ParseStrategy(s string) (Strategy, error) {
	switch s {
	case "head":
		return Head, nil
	case "tail":
		return Tail, nil
	case "middle":
		return Middle, nil
	}
	return 0, fmt.Errorf("capture: unknown strategy %q: want head, tail or middle", s)
}

// Unit says what a Limit counts.
type Unit uint8

const (
	// Bytes counts bytes. A cut is moved towards the kept side's outer edge
	// (so fewer bytes are kept) rather than split a rune.
	Bytes Unit = iota
	// Chars counts characters: runes as a UTF-8 decoder sees them, where
	// each byte of an invalid sequence counts as one character (and is shown
	// as U+FFFD in text views).
	Chars
)

// String returns "bytes" or "chars".
func (u Unit) String() string {
	switch u {
	case Bytes:
		return "bytes"
	case Chars:
		return "chars"
	}
	return fmt.Sprintf("Unit(%d)", uint8(u))
}

// DefaultMax is the limit used when Limit.Max is zero: 1 MiB (or 1Mi
// characters).
const DefaultMax = 1 << 20

// Limit bounds what a Buffer keeps. The zero value keeps the first
// DefaultMax bytes.
type Limit struct {
	// Strategy chooses which part is kept when the stream is too long.
	Strategy Strategy
	// Unit says whether Max, HeadKeep and TailKeep count bytes or chars.
	Unit Unit
	// Max is the most that is kept; zero means DefaultMax. For Middle it is
	// the threshold above which the middle is cut.
	Max int64
	// HeadKeep and TailKeep are, for Middle only, how much of each end is
	// kept once the stream is longer than Max. Zero for both means Max/2
	// each. Their sum must not exceed Max.
	HeadKeep, TailKeep int64
}

// ErrInvalidLimit is wrapped by every error Limit.Validate returns.
var ErrInvalidLimit = errors.New("capture: invalid limit")

// Validate reports whether l describes a limit a Buffer can honour.
func (l Limit) Validate() error {
	if l.Strategy > Middle {
		return fmt.Errorf("%w: unknown strategy %d", ErrInvalidLimit, l.Strategy)
	}
	if l.Unit > Chars {
		return fmt.Errorf("%w: unknown unit %d", ErrInvalidLimit, l.Unit)
	}
	if l.Max < 0 {
		return fmt.Errorf("%w: max %d is negative", ErrInvalidLimit, l.Max)
	}
	if l.HeadKeep < 0 || l.TailKeep < 0 {
		return fmt.Errorf("%w: head and tail keep must not be negative", ErrInvalidLimit)
	}
	if l.Strategy != Middle && (l.HeadKeep != 0 || l.TailKeep != 0) {
		return fmt.Errorf("%w: head and tail keep apply to the middle strategy only", ErrInvalidLimit)
	}
	n := l.normalized()
	if n.HeadKeep+n.TailKeep > n.Max {
		return fmt.Errorf("%w: head keep %d plus tail keep %d exceed max %d", ErrInvalidLimit, n.HeadKeep, n.TailKeep, n.Max)
	}
	return nil
}

// normalized fills in the documented defaults.
func (l Limit) normalized() Limit {
	if l.Max == 0 {
		l.Max = DefaultMax
	}
	if l.Strategy == Middle && l.HeadKeep == 0 && l.TailKeep == 0 {
		l.HeadKeep = l.Max / 2
		l.TailKeep = l.Max - l.HeadKeep
	}
	return l
}
