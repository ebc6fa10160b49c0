package wire

import (
	"errors"
	"io"

	"github.com/muster-registry/muster/registry"
)

// ReadApplicationsJSON reads an applications document ({"applications":
// {…,"application":[…]}}) from r as it arrives and hands each application
// to each, in document order. It holds one application's bytes at a time
// rather than the whole document: a peer's registry of 1M instances is
// ~1.2 GB of JSON, which DecodeApplicationsJSON needs in memory twice (the
// body and its string copy) before it decodes anything. Each application
// and every value it skips is checked by the same strict reader as
// DecodeApplicationsJSON, so both accept and refuse the same documents
// with an "applications" wrapper; errors wrap ErrMalformed, or are r's
// own. The AppView does not refer to r's bytes.
func ReadApplicationsJSON(r io.Reader, each func(registry.AppView) error) error {
	s := &jsonStream{r: r, buf: make([]byte, 0, streamReadSize)}
	found := false
	err := s.object("", func(key string) error {
		if key != "applications" {
			return s.skip()
		}
		found = true
		if c, _ := s.peek(); c != '{' {
			return s.check("applications", func(jr *jsonReader) error { return jr.wantObject("applications") })
		}
		return s.object("applications", func(key string) error {
			if key != "application" {
				return s.skip()
			}
			c, _ := s.peek()
			switch c {
			case '[':
				return s.array("applications.application", func() error { return s.application(each) })
			case '{':
				return s.application(each)
			}
			// null, or what oneOrMany refuses: its answer.
			return s.check("applications.application", func(jr *jsonReader) error {
				return jr.oneOrMany(func() error { return nil })
			})
		})
	})
	if err != nil {
		return err
	}
	if c, ok := s.peek(); ok {
		return malformed("", "unexpected data after the top-level value (%q)", c)
	}
	if s.err != nil {
		return s.err
	}
	if !found {
		return malformed("", `missing the "applications" wrapper (want {"applications":{…}})`)
	}
	return nil
}

// streamReadSize is how much jsonStream asks its reader for at a time.
const streamReadSize = 256 << 10

// jsonStream is a window onto a JSON document read from an io.Reader: it
// finds the structure of the top levels and the extent of each value, and
// leaves the checking and decoding of values to jsonReader.
type jsonStream struct {
	r   io.Reader
	buf []byte
	pos int // next unread byte of buf
	eof bool
	err error // r's error other than io.EOF
}

// fill moves the unread bytes to the front of buf and reads more after
// them; false when r has nothing more.
func (s *jsonStream) fill() bool {
	if s.pos > 0 {
		n := copy(s.buf, s.buf[s.pos:])
		s.buf, s.pos = s.buf[:n], 0
	}
	for !s.eof && s.err == nil {
		if cap(s.buf)-len(s.buf) < streamReadSize/2 {
			nb := make([]byte, len(s.buf), 2*cap(s.buf))
			copy(nb, s.buf)
			s.buf = nb
		}
		n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+n]
		if errors.Is(err, io.EOF) {
			s.eof = true
		} else if err != nil {
			s.err = err
		}
		if n > 0 {
			return true
		}
	}
	return false
}

// peek skips white space and returns the next byte; false at the end.
func (s *jsonStream) peek() (byte, bool) {
	for {
		if s.pos = skipSpace(s.buf, s.pos); s.pos < len(s.buf) {
			return s.buf[s.pos], true
		}
		if !s.fill() {
			return 0, false
		}
	}
}

// unexpected is the error for what is at the cursor.
func (s *jsonStream) unexpected(path string) error {
	if s.err != nil {
		return s.err
	}
	c, ok := s.peek()
	if !ok {
		return malformed(path, "unexpected end of input")
	}
	return malformed(path, "unexpected %q", c)
}

func (s *jsonStream) want(path string, c byte) error {
	if got, ok := s.peek(); !ok || got != c {
		return s.unexpected(path)
	}
	s.pos++
	return nil
}

// value returns the bytes of the next value, valid until the next read,
// and moves past it. It only finds where the value ends (extent); the
// caller checks it.
func (s *jsonStream) value(path string) ([]byte, error) {
	if _, ok := s.peek(); !ok {
		return nil, s.unexpected(path)
	}
	var e extent
	for {
		if n, done := e.scan(s.buf[s.pos:], true); done {
			return s.take(n), nil
		}
		if !s.fill() {
			// The input ends here, and so does a number or a literal.
			if n, done := e.scan(s.buf[s.pos:], false); done && s.err == nil {
				return s.take(n), nil
			}
			return nil, s.unexpected(path)
		}
	}
}

func (s *jsonStream) take(k int) []byte {
	b := s.buf[s.pos : s.pos+k]
	s.pos += k
	return b
}

// check runs read on the next value with a strict reader and requires it
// to consume exactly that value.
func (s *jsonStream) check(path string, read func(*jsonReader) error) error {
	b, err := s.value(path)
	if err != nil {
		return err
	}
	jr := newJSONReader(b)
	if err := read(jr); err != nil {
		return addPath(err, path)
	}
	if err := jr.end(); err != nil {
		return addPath(err, path)
	}
	return nil
}

// skip checks and skips the next value.
func (s *jsonStream) skip() error {
	return s.check("", func(jr *jsonReader) error { return jr.skip() })
}

// key reads an object key and the colon after it.
func (s *jsonStream) key(path string) (string, error) {
	if c, _ := s.peek(); c != '"' {
		return "", s.unexpected(path)
	}
	var key string
	if err := s.check(path, func(jr *jsonReader) (err error) {
		key, err = jr.str()
		return err
	}); err != nil {
		return "", err
	}
	return key, s.want(path, ':')
}

// object reads an object, handing each key to field with the cursor on
// its value.
func (s *jsonStream) object(path string, field func(key string) error) error {
	if err := s.want(path, '{'); err != nil {
		return err
	}
	if c, _ := s.peek(); c == '}' {
		s.pos++
		return nil
	}
	for {
		k, err := s.key(path)
		if err != nil {
			return err
		}
		if err := field(k); err != nil {
			return err
		}
		c, ok := s.peek()
		switch {
		case ok && c == ',':
			s.pos++
		case ok && c == '}':
			s.pos++
			return nil
		default:
			return s.unexpected(path)
		}
	}
}

// array reads an array, with elem consuming each element.
func (s *jsonStream) array(path string, elem func() error) error {
	if err := s.want(path, '['); err != nil {
		return err
	}
	if c, _ := s.peek(); c == ']' {
		s.pos++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		c, ok := s.peek()
		switch {
		case ok && c == ',':
			s.pos++
		case ok && c == ']':
			s.pos++
			return nil
		default:
			return s.unexpected(path)
		}
	}
}

// application decodes the next value as an application and hands it on.
func (s *jsonStream) application(each func(registry.AppView) error) error {
	const path = "applications.application"
	var app registry.AppView
	if err := s.check(path, func(jr *jsonReader) (err error) {
		if err := jr.wantObject(path); err != nil {
			return err
		}
		app, err = jr.application()
		return err
	}); err != nil {
		return err
	}
	return each(app)
}
