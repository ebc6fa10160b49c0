package wire

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of objects and arrays, so that a body of
// nested brackets cannot exhaust the stack. Eureka's documents nest 6 deep.
const maxJSONDepth = 256

// jsonReader is a small strict JSON reader (RFC 8259) driven by the
// decoders, which know the shape they expect; values they do not know are
// checked and skipped. It works on the body as a string, so that a decoded
// string without escapes is a substring of it rather than a new allocation.
// That keeps a register body's decode to a few allocations; the price is
// that decoded instances keep their body's memory alive.
type jsonReader struct {
	s     string
	i     int
	depth int
}

func newJSONReader(data []byte) *jsonReader {
	return &jsonReader{s: string(data)}
}

type jsonKind uint8

const (
	kindInvalid jsonKind = iota
	kindObject
	kindArray
	kindString
	kindNumber
	kindTrue
	kindFalse
	kindNull
)

func (k jsonKind) String() string {
	switch k {
	case kindObject:
		return "an object"
	case kindArray:
		return "an array"
	case kindString:
		return "a string"
	case kindNumber:
		return "a number"
	case kindTrue:
		return "true"
	case kindFalse:
		return "false"
	case kindNull:
		return "null"
	}
	return "invalid JSON"
}

// describe names a value in an error message.
func describe(k jsonKind, text string) string {
	switch k {
	case kindString:
		return quoteValue(text)
	case kindNumber:
		if len(text) > 40 {
			return text[:40] + "…"
		}
		return text
	}
	return k.String()
}

func (r *jsonReader) syntaxError(at int, reason string) error {
	return newSyntaxError("invalid JSON at offset " + strconv.Itoa(at) + ": " + reason)
}

// wantObject checks that an object is at the cursor; otherwise the error
// names path.
func (r *jsonReader) wantObject(path string) error {
	switch k := r.kind(); k {
	case kindObject:
		return nil
	case kindInvalid:
		return r.unexpected()
	default:
		return &decodeError{path: path, reason: "want an object, got " + k.String()}
	}
}

// unexpected reports the byte at the cursor (or the end of input).
func (r *jsonReader) unexpected() error {
	if r.i >= len(r.s) {
		return r.syntaxError(r.i, "unexpected end of input")
	}
	c := r.s[r.i]
	if c >= 0x20 && c < 0x7f {
		return r.syntaxError(r.i, "unexpected "+strconv.QuoteRune(rune(c)))
	}
	return r.syntaxError(r.i, "unexpected byte 0x"+strconv.FormatUint(uint64(c), 16))
}

func (r *jsonReader) ws() { r.i = skipSpace(r.s, r.i) }

// kind skips white space and tells the type of the next value without
// consuming it.
func (r *jsonReader) kind() jsonKind {
	r.ws()
	if r.i >= len(r.s) {
		return kindInvalid
	}
	switch c := r.s[r.i]; {
	case c == '{':
		return kindObject
	case c == '[':
		return kindArray
	case c == '"':
		return kindString
	case c == 't':
		return kindTrue
	case c == 'f':
		return kindFalse
	case c == 'n':
		return kindNull
	case c == '-' || ('0' <= c && c <= '9'):
		return kindNumber
	}
	return kindInvalid
}

// rootKind checks that the body is a JSON object.
func (r *jsonReader) rootKind() error {
	switch k := r.kind(); k {
	case kindObject:
		return nil
	case kindInvalid:
		if r.i >= len(r.s) {
			return malformed("", "empty body")
		}
		return r.unexpected()
	default:
		return malformed("", "want a JSON object, got %s", k)
	}
}

// root reads the top-level object, handing each key to field without
// adding the key to error paths (the wrapper key would only be noise), and
// checks that nothing follows it.
func (r *jsonReader) root(field func(key string) error) error {
	if err := r.rootKind(); err != nil {
		return err
	}
	if err := r.object(field, false); err != nil {
		return err
	}
	return r.end()
}

// end checks that only white space is left.
func (r *jsonReader) end() error {
	r.ws()
	if r.i < len(r.s) {
		return r.syntaxError(r.i, "unexpected data after the top-level value")
	}
	return nil
}

// object reads an object with the cursor on '{'. field is called for each
// key with the cursor on its value and must consume it. With keyed, field
// errors get the key in their path.
func (r *jsonReader) object(field func(key string) error, keyed bool) error {
	if r.depth++; r.depth > maxJSONDepth {
		return r.syntaxError(r.i, "nested too deeply")
	}
	r.i++ // '{'
	r.ws()
	if r.i < len(r.s) && r.s[r.i] == '}' {
		r.i++
		r.depth--
		return nil
	}
	for {
		r.ws()
		if r.i >= len(r.s) || r.s[r.i] != '"' {
			return r.unexpected()
		}
		key, err := r.str()
		if err != nil {
			return err
		}
		r.ws()
		if r.i >= len(r.s) || r.s[r.i] != ':' {
			return r.unexpected()
		}
		r.i++
		if err := field(key); err != nil {
			if keyed {
				return addPath(err, key)
			}
			return err
		}
		r.ws()
		if r.i >= len(r.s) {
			return r.unexpected()
		}
		switch r.s[r.i] {
		case ',':
			r.i++
		case '}':
			r.i++
			r.depth--
			return nil
		default:
			return r.unexpected()
		}
	}
}

// array reads an array with the cursor on '['; elem must consume each
// element. Field errors get the index in their path.
func (r *jsonReader) array(elem func(i int) error) error {
	if r.depth++; r.depth > maxJSONDepth {
		return r.syntaxError(r.i, "nested too deeply")
	}
	r.i++ // '['
	r.ws()
	if r.i < len(r.s) && r.s[r.i] == ']' {
		r.i++
		r.depth--
		return nil
	}
	for n := 0; ; n++ {
		if err := elem(n); err != nil {
			return addPath(err, "["+strconv.Itoa(n)+"]")
		}
		r.ws()
		if r.i >= len(r.s) {
			return r.unexpected()
		}
		switch r.s[r.i] {
		case ',':
			r.i++
		case ']':
			r.i++
			r.depth--
			return nil
		default:
			return r.unexpected()
		}
	}
}

// oneOrMany reads an array of objects, or a single object, which Eureka's
// decoders accept for application and instance; null means none.
func (r *jsonReader) oneOrMany(elem func() error) error {
	switch k := r.kind(); k {
	case kindArray:
		return r.array(func(int) error {
			if k := r.kind(); k != kindObject {
				if k == kindInvalid {
					return r.unexpected()
				}
				return fieldError("want an object, got %s", k)
			}
			return elem()
		})
	case kindObject:
		return elem()
	case kindNull:
		return r.literal("null")
	case kindInvalid:
		return r.unexpected()
	default:
		return fieldError("want an object or an array, got %s", k)
	}
}

// skip checks and skips any value.
func (r *jsonReader) skip() error {
	switch r.kind() {
	case kindObject:
		return r.object(func(string) error { return r.skip() }, false)
	case kindArray:
		return r.array(func(int) error { return r.skip() })
	case kindString:
		_, err := r.str()
		return err
	case kindNumber:
		_, err := r.number()
		return err
	case kindTrue:
		return r.literal("true")
	case kindFalse:
		return r.literal("false")
	case kindNull:
		return r.literal("null")
	}
	return r.unexpected()
}

func (r *jsonReader) literal(word string) error {
	if len(r.s)-r.i >= len(word) && r.s[r.i:r.i+len(word)] == word {
		r.i += len(word)
		return nil
	}
	for j := 0; j < len(word); j++ {
		if r.i+j >= len(r.s) || r.s[r.i+j] != word[j] {
			r.i += j
			return r.unexpected()
		}
	}
	return r.unexpected()
}

// number reads a number and returns its text.
func (r *jsonReader) number() (string, error) {
	start := r.i
	if r.i < len(r.s) && r.s[r.i] == '-' {
		r.i++
	}
	switch {
	case r.i < len(r.s) && r.s[r.i] == '0':
		r.i++
	case r.i < len(r.s) && '1' <= r.s[r.i] && r.s[r.i] <= '9':
		r.digits()
	default:
		return "", r.unexpected()
	}
	if r.i < len(r.s) && r.s[r.i] == '.' {
		r.i++
		if r.digits() == 0 {
			return "", r.unexpected()
		}
	}
	if r.i < len(r.s) && (r.s[r.i] == 'e' || r.s[r.i] == 'E') {
		r.i++
		if r.i < len(r.s) && (r.s[r.i] == '+' || r.s[r.i] == '-') {
			r.i++
		}
		if r.digits() == 0 {
			return "", r.unexpected()
		}
	}
	return r.s[start:r.i], nil
}

func (r *jsonReader) digits() int {
	start := r.i
	for r.i < len(r.s) && '0' <= r.s[r.i] && r.s[r.i] <= '9' {
		r.i++
	}
	return r.i - start
}

// str reads a string with the cursor on its opening quote. Without escapes
// the result is a substring of the body. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does it.
func (r *jsonReader) str() (string, error) {
	start := r.i + 1
	ascii := true
	for i := start; i < len(r.s); i++ {
		c := r.s[i]
		switch {
		case c == '"':
			r.i = i + 1
			s := r.s[start:i]
			if !ascii && !utf8.ValidString(s) {
				s = sanitizeUTF8(s)
			}
			return s, nil
		case c == '\\':
			return r.strEscaped(start)
		case c < 0x20:
			r.i = i
			return "", r.syntaxError(i, "control character in string")
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	r.i = len(r.s)
	return "", r.syntaxError(len(r.s), "unexpected end of input in a string")
}

// strEscaped reads a string that has escapes, from its first byte.
func (r *jsonReader) strEscaped(start int) (string, error) {
	// Size the buffer by the string's raw length, which bounds the result.
	end := start
	for end < len(r.s) && r.s[end] != '"' {
		if r.s[end] == '\\' {
			end++
		}
		end++
	}
	buf := make([]byte, 0, min(end, len(r.s))-start)
	i := start
	for i < len(r.s) {
		c := r.s[i]
		switch {
		case c == '"':
			r.i = i + 1
			if !utf8.Valid(buf) {
				return sanitizeUTF8(string(buf)), nil
			}
			return string(buf), nil
		case c < 0x20:
			r.i = i
			return "", r.syntaxError(i, "control character in string")
		case c != '\\':
			buf = append(buf, c)
			i++
			continue
		}
		if i+1 >= len(r.s) {
			break
		}
		switch e := r.s[i+1]; e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			u, ok := parseHex4(r.s, i+2)
			if !ok {
				r.i = i
				return "", r.syntaxError(i, `invalid \u escape`)
			}
			i += 6
			rn := rune(u)
			if utf16.IsSurrogate(rn) {
				// A high surrogate pairs with a following \u low surrogate;
				// a lone one becomes U+FFFD.
				rn = utf8.RuneError
				if i+6 <= len(r.s) && r.s[i] == '\\' && r.s[i+1] == 'u' {
					if u2, ok := parseHex4(r.s, i+2); ok {
						if d := utf16.DecodeRune(rune(u), rune(u2)); d != utf8.RuneError {
							rn = d
							i += 6
						}
					}
				}
			}
			buf = utf8.AppendRune(buf, rn)
			continue
		default:
			r.i = i
			return "", r.syntaxError(i, "invalid escape "+strconv.Quote(r.s[i:i+2]))
		}
		i += 2
	}
	r.i = len(r.s)
	return "", r.syntaxError(len(r.s), "unexpected end of input in a string")
}

// sanitizeUTF8 replaces each byte of an invalid UTF-8 sequence with U+FFFD.
func sanitizeUTF8(s string) string {
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b)
}

// scalar reads a string, number, boolean or null and returns its kind and
// text (a string unescaped, the others as written, null as ""). An object
// or array is not consumed; the caller reports it.
func (r *jsonReader) scalar() (jsonKind, string, error) {
	switch k := r.kind(); k {
	case kindString:
		s, err := r.str()
		return k, s, err
	case kindNumber:
		s, err := r.number()
		return k, s, err
	case kindTrue:
		return k, "true", r.literal("true")
	case kindFalse:
		return k, "false", r.literal("false")
	case kindNull:
		return k, "", r.literal("null")
	case kindObject, kindArray:
		return k, "", nil
	}
	return kindInvalid, "", r.unexpected()
}

// stringValue reads a string field. Numbers and booleans are taken as
// their text, as Jackson's asText does; ok is false for null, which Eureka
// skips.
func (r *jsonReader) stringValue() (s string, ok bool, err error) {
	k, s, err := r.scalar()
	switch {
	case err != nil:
		return "", false, err
	case k == kindNull:
		return "", false, nil
	case k == kindObject || k == kindArray:
		return "", false, fieldError("want a string, got %s", k)
	}
	return s, true, nil
}

// intValue reads an integer field that fits in bits, sent as a number or a
// numeric string; ok is false for null and for an empty string.
func (r *jsonReader) intValue(bits int) (n int64, ok bool, err error) {
	k, s, err := r.scalar()
	switch {
	case err != nil:
		return 0, false, err
	case k == kindNull, k == kindString && isBlank(s):
		return 0, false, nil
	case k == kindString || k == kindNumber:
		if n, ok := parseInt(s, bits); ok {
			return n, true, nil
		}
	}
	return 0, false, fieldError("want a number, got %s", describe(k, s))
}

// boolText reads a boolean field, sent as a boolean, a string or a number,
// and returns it as text for parseBool and the port rules: a number is
// "true" unless it is 0. ok is false for null.
func (r *jsonReader) boolText() (text string, ok bool, err error) {
	k, s, err := r.scalar()
	switch {
	case err != nil:
		return "", false, err
	case k == kindNull:
		return "", false, nil
	case k == kindObject || k == kindArray:
		return "", false, fieldError("want a boolean, got %s", k)
	case k == kindNumber:
		if f, err := strconv.ParseFloat(s, 64); err == nil && f == 0 {
			return "false", true, nil
		}
		return "true", true, nil
	}
	return s, true, nil
}

// setString stores a string field unless it is null.
func (r *jsonReader) setString(dst *string) error {
	s, ok, err := r.stringValue()
	if ok {
		*dst = s
	}
	return err
}

func (r *jsonReader) setInt32(dst *int) error {
	n, ok, err := r.intValue(32)
	if ok {
		*dst = int(n)
	}
	return err
}
