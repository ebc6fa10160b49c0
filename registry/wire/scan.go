package wire

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strings"
)

// The JSON scanner's primitives, shared by the three readers of Eureka's
// JSON: jsonReader (the strict decoders of instances and applications),
// jsonStream (syncUp's streaming decode, ReadApplicationsJSON) and Scanner
// (the fast path of replication's peer batches). White space, the extent
// of a value and the grammar of an integer are written once, here.

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space (RFC 8259 §2), len(s) if none.
func skipSpace[T ~string | ~[]byte](s T, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// integerEnd returns the end of -?(0|[1-9][0-9]*) at i when no fraction
// or exponent follows it; ok is false otherwise.
func integerEnd[T ~string | ~[]byte](s T, i int) (end int, ok bool) {
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := i
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if n := i - digits; n == 0 || n > 1 && s[digits] == '0' {
		return i, false
	}
	if i < len(s) {
		if c := s[i]; c == '.' || c == 'e' || c == 'E' {
			return i, false
		}
	}
	return i, true
}

// extent finds where one JSON value ends by its strings and brackets
// alone, without checking it: the caller checks the bytes (jsonReader, or
// json.Valid). It resumes where it stopped when its input grows, so a
// stream scans each byte once however it arrives. The zero value is ready
// for a value that starts with buf[0].
type extent struct {
	k            int // bytes of the value scanned so far
	depth        int // open brackets
	inStr        bool
	scalar, open bool // the value is a number or literal; its first byte was seen
}

// scan goes on through buf (the value's bytes from its first, which may
// have grown since the last call) and returns the value's length once its
// end is in buf. With more false, the end of buf is the end of the input,
// which ends a number or literal.
func (e *extent) scan(buf []byte, more bool) (n int, done bool) {
	if !e.open {
		if len(buf) == 0 {
			return 0, false
		}
		e.open = true
		e.scalar = buf[0] != '{' && buf[0] != '[' && buf[0] != '"'
	}
	for e.k < len(buf) {
		if e.inStr {
			// Jump to the next quote or backslash.
			rest := buf[e.k:]
			i := bytes.IndexAny(rest, "\"\\")
			if i < 0 {
				e.k = len(buf)
				break
			}
			if rest[i] == '\\' {
				if e.k+i+1 >= len(buf) {
					e.k += i // come back to the backslash with more input
					break
				}
				e.k += i + 2
				continue
			}
			e.k += i + 1
			e.inStr = false
			if e.depth == 0 {
				return e.k, true
			}
			continue
		}
		c := buf[e.k]
		if e.scalar {
			switch c {
			case ',', '}', ']', ':', ' ', '\t', '\n', '\r':
				return e.k, true // may be empty: the caller's check says why
			}
			e.k++
			continue
		}
		e.k++
		switch c {
		case '"':
			e.inStr = true
		case '{', '[':
			e.depth++
		case '}', ']':
			if e.depth--; e.depth <= 0 {
				return e.k, true
			}
		}
	}
	if !more && e.scalar && e.k > 0 {
		return e.k, true
	}
	return 0, false
}

// Scanner reads JSON from a byte slice token by token for a caller that
// knows the shape it expects and takes a quicker road for the common case:
// every method reports false, and leaves the position unspecified, when
// the input is not what it handles (escapes, non-ASCII, fractions, another
// shape), and the caller then hands the bytes to a full decoder. It never
// reports as read what is not valid JSON, except SkipValue, whose bytes
// the caller checks. A Scanner is a small value; use it by pointer.
type Scanner struct {
	s []byte
	i int
}

// NewScanner returns a scanner at the start of s.
func NewScanner(s []byte) Scanner { return Scanner{s: s} }

// Pos is the offset of the next unread byte.
func (sc *Scanner) Pos() int { return sc.i }

// Seek moves to offset i (one Pos returned before, to read a value again).
func (sc *Scanner) Seek(i int) { sc.i = i }

// Peek skips white space and returns the next byte, 0 at the end.
func (sc *Scanner) Peek() byte {
	sc.i = skipSpace(sc.s, sc.i)
	if sc.i < len(sc.s) {
		return sc.s[sc.i]
	}
	return 0
}

// Byte reads c, after white space.
func (sc *Scanner) Byte(c byte) bool {
	if sc.Peek() != c {
		return false
	}
	sc.i++
	return true
}

// AtEnd skips white space and reports whether nothing follows.
func (sc *Scanner) AtEnd() bool {
	sc.i = skipSpace(sc.s, sc.i)
	return sc.i == len(sc.s)
}

// Key reads "name": and reports whether it was that name.
func (sc *Scanner) Key(name string) bool {
	k, ok := sc.PlainString()
	return ok && string(k) == name && sc.Byte(':')
}

// PlainString reads a string of printable ASCII without escapes and
// returns its content, a slice of the input.
func (sc *Scanner) PlainString() ([]byte, bool) {
	if !sc.Byte('"') {
		return nil, false
	}
	start := sc.i
	// Eight bytes at a time (a batch is mostly such strings: byte by byte
	// they were most of its decoding): the first byte a word flags is the
	// first one that ends the string or may not be in it.
	for sc.i+8 <= len(sc.s) {
		flagged := plainStops(binary.LittleEndian.Uint64(sc.s[sc.i:]))
		if flagged == 0 {
			sc.i += 8
			continue
		}
		sc.i += bits.TrailingZeros64(flagged) / 8
		if sc.s[sc.i] != '"' {
			return nil, false
		}
		sc.i++
		return sc.s[start : sc.i-1], true
	}
	for ; sc.i < len(sc.s); sc.i++ {
		switch c := sc.s[sc.i]; {
		case c == '"':
			sc.i++
			return sc.s[start : sc.i-1], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// plainStops flags (with its high bit) each of the eight bytes in w, read
// little-endian, that is a quote, a backslash, a control byte or above
// 0x7e: where PlainString stops. The lowest flagged byte is always such a
// byte (the borrows and carries that may flag others only run upwards
// from one), which is all PlainString asks.
func plainStops(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zeroByte := func(v uint64) uint64 { return (v - ones) & ^v & highs }
	below := (w - ones*0x20) & ^w & highs // a byte < 0x20
	above := ((w + ones) | w) & highs     // a byte > 0x7e
	return below | above | zeroByte(w^(ones*'"')) | zeroByte(w^(ones*'\\'))
}

// Integer reads an integer without fraction or exponent and returns its
// text.
func (sc *Scanner) Integer() ([]byte, bool) {
	start := skipSpace(sc.s, sc.i)
	end, ok := integerEnd(sc.s, start)
	sc.i = end
	return sc.s[start:end], ok
}

// Literal reads word (true, false, null), after white space.
func (sc *Scanner) Literal(word string) bool {
	sc.i = skipSpace(sc.s, sc.i)
	if !strings.HasPrefix(string(sc.s[sc.i:min(sc.i+len(word), len(sc.s))]), word) {
		return false
	}
	sc.i += len(word)
	return true
}

// SkipValue moves past one value, finding its end by its strings and
// brackets only, and returns its bytes: the caller checks them (json.Valid).
func (sc *Scanner) SkipValue() ([]byte, bool) {
	start := skipSpace(sc.s, sc.i)
	var e extent
	n, ok := e.scan(sc.s[start:], false)
	if !ok || n == 0 {
		return nil, false
	}
	sc.i = start + n
	return sc.s[start:sc.i], true
}
