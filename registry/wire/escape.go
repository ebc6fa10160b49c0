package wire

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// jsonPlain marks the bytes a JSON string may hold unescaped: printable
// ASCII except '"' and '\'. Bytes ≥ 0x80 are false so that the slow path can
// check UTF-8.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendJSONString appends s as a JSON string, escaped as Jackson escapes it:
// '"', '\' and control characters are escaped; '<', '>', '&', '/' and all
// non-ASCII runes stay literal. Invalid UTF-8 becomes U+FFFD, so the output
// is always valid JSON.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	i := plainJSONPrefix(s)
	if i == len(s) {
		b = append(b, s...)
		return append(b, '"')
	}
	start := 0
	for i < len(s) {
		c := s[i]
		if jsonPlain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plainJSONPrefix returns the length of the longest prefix of s that needs
// no JSON escaping and is ASCII. It looks at eight bytes per step: most
// strings in a registry (host names, URLs, ids) are plain ASCII, and this
// loop is where a full-registry encode spends much of its time.
func plainJSONPrefix(s string) int {
	i := 0
	for ; len(s)-i >= 8; i += 8 {
		t := s[i : i+8] // one bounds check; the compiler merges the loads
		x := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
			uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
		// A byte is special if it is < 0x20, '"', '\' or ≥ 0x80 (its own
		// high bit); the byte loop below then finds which one exactly.
		if (hasLess(x, 0x20)|hasByte(x, '"')|hasByte(x, '\\')|x)&highs != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if !jsonPlain[s[i]] {
			return i
		}
	}
	return i
}

// plainXMLPrefix is plainJSONPrefix for XML text: it returns the length of
// the longest ASCII prefix of s without control characters, '&', '<', '>',
// '"' or an apostrophe.
func plainXMLPrefix(s string) int {
	i := 0
	for ; len(s)-i >= 8; i += 8 {
		t := s[i : i+8]
		x := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
			uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
		if (hasLess(x, 0x20)|hasByte(x, '&')|hasByte(x, '<')|hasByte(x, '>')|hasByte(x, '"')|hasByte(x, '\'')|x)&highs != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if !xmlPlain[s[i]] {
			return i
		}
	}
	return i
}

// SWAR helpers on eight bytes at a time. hasLess sets the high bit of a
// byte below n, hasByte that of a byte equal to c; borrows can also set it
// in bytes above a true hit, so only "any bit set" is exact, which is all
// the callers ask.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

func hasLess(x uint64, n byte) uint64 { return (x - ones*uint64(n)) &^ x }

func hasByte(x uint64, c byte) uint64 {
	y := x ^ (ones * uint64(c))
	return (y - ones) &^ y
}

// xmlPlain marks the bytes XML text and attribute values may hold
// unescaped: printable ASCII except '&', '<', '>', '"' and the apostrophe.
var xmlPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '&' && c != '<' && c != '>' && c != '"' && c != '\''
	}
	return t
}()

// appendXMLText appends s escaped for XML character data or a double-quoted
// attribute value. '&', '<', '>', '"' and the apostrophe become entities,
// as XStream's writer does; CR, and in attributes tab and LF, become
// character references so that parsers' line-end and attribute
// normalisation keep them; other characters XML 1.0 forbids (C0 controls,
// U+FFFE, U+FFFF) and invalid UTF-8 become U+FFFD, so the output is always
// well-formed.
func appendXMLText(b []byte, s string, attr bool) []byte {
	i := plainXMLPrefix(s)
	if i == len(s) {
		return append(b, s...)
	}
	start := 0
	for i < len(s) {
		c := s[i]
		if xmlPlain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			var esc string
			switch c {
			case '&':
				esc = "&amp;"
			case '<':
				esc = "&lt;"
			case '>':
				esc = "&gt;"
			case '"':
				esc = "&quot;"
			case '\'':
				esc = "&apos;"
			case '\r':
				esc = "&#xD;"
			case '\n':
				if !attr {
					i++
					continue
				}
				esc = "&#xA;"
			case '\t':
				if !attr {
					i++
					continue
				}
				esc = "&#x9;"
			default:
				esc = "\uFFFD"
			}
			b = append(b, s[start:i]...)
			b = append(b, esc...)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == 0xFFFE || r == 0xFFFF {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}

// appendXMLName appends an element name for key, coded as XStream's
// XmlFriendlyNameCoder codes it (Eureka's XmlXStream#initializeNameCoder):
// '$' becomes "_-", '_' becomes "__", and a character that may not appear at
// its place in an XML name becomes "_." and four lower-case hex digits (one
// group per UTF-16 unit). XStream's coder has a fast path that lets through
// names such as "a b" or "8080" unescaped, producing broken XML; this one
// escapes them. It also escapes what XStream lets through but is unsafe for
// other parsers: ':' (a namespace separator to most of them) and every
// non-ASCII character. XStream-based clients decode all of these back to the
// original key, and decodeXMLName does too.
func appendXMLName(b []byte, key string) []byte {
	if isPlainXMLName(key) {
		return append(b, key...)
	}
	for i, r := range key {
		switch {
		case r == '$':
			b = append(b, '_', '-')
		case r == '_':
			b = append(b, '_', '_')
		case isASCIILetter(r) || (i > 0 && (isASCIIDigit(r) || r == '-' || r == '.')):
			b = append(b, byte(r))
		default:
			if r >= 0x10000 {
				r1, r2 := utf16.EncodeRune(r)
				b = appendHexEscape(b, r1)
				b = appendHexEscape(b, r2)
			} else {
				b = appendHexEscape(b, r)
			}
		}
	}
	return b
}

func appendHexEscape(b []byte, r rune) []byte {
	return append(b, '_', '.', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// isPlainXMLName reports whether key is a non-empty XML name that needs no
// coding: an ASCII letter followed by ASCII letters, digits, '-' and '.'.
func isPlainXMLName(key string) bool {
	if key == "" || !isASCIILetter(rune(key[0])) {
		return false
	}
	for i := 1; i < len(key); i++ {
		c := rune(key[i])
		if !isASCIILetter(c) && !isASCIIDigit(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isASCIILetter(r rune) bool { return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' }
func isASCIIDigit(r rune) bool  { return '0' <= r && r <= '9' }

// decodeXMLName reverses XmlFriendlyNameCoder: "_-" is '$', "__" is '_' and
// "_." plus four hex digits is that UTF-16 unit. A '_' that starts none of
// these stays as it is, as in XStream's decoder.
func decodeXMLName(name string) string {
	if strings.IndexByte(name, '_') < 0 {
		return name
	}
	var units []uint16
	flush := func(sb *strings.Builder) {
		if len(units) > 0 {
			for _, r := range utf16.Decode(units) {
				sb.WriteRune(r)
			}
			units = units[:0]
		}
	}
	var sb strings.Builder
	sb.Grow(len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' && i+1 < len(name) {
			switch name[i+1] {
			case '-':
				flush(&sb)
				sb.WriteByte('$')
				i++
				continue
			case '_':
				flush(&sb)
				sb.WriteByte('_')
				i++
				continue
			case '.':
				if u, ok := parseHex4(name, i+2); ok {
					units = append(units, u)
					i += 5
					continue
				}
			}
		}
		flush(&sb)
		sb.WriteByte(c)
	}
	flush(&sb)
	return sb.String()
}

func parseHex4(s string, at int) (uint16, bool) {
	if at+4 > len(s) {
		return 0, false
	}
	var u uint16
	for i := at; i < at+4; i++ {
		c := s[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		u = u<<4 | uint16(d)
	}
	return u, true
}
