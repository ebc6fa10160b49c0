package wire

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strconv"
)

// xmlReader walks a document with encoding/xml's tokenizer, which checks
// well-formedness and knows only XML's predefined entities (so no entity
// expansion attacks). Elements the decoders do not know are skipped.
type xmlReader struct {
	d *xml.Decoder
}

func newXMLReader(data []byte) *xmlReader {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	return &xmlReader{d: d}
}

// token returns the next token; the end of input is an error here, since
// it is only read through end.
func (x *xmlReader) token() (xml.Token, error) {
	t, err := x.d.Token()
	if err != nil {
		return nil, xmlSyntaxError(err)
	}
	return t, nil
}

func xmlSyntaxError(err error) error {
	var se *xml.SyntaxError
	switch {
	case errors.As(err, &se):
		msg := se.Msg
		if msg == "unexpected EOF" {
			msg = "unexpected end of input"
		}
		return newSyntaxError("invalid XML on line " + strconv.Itoa(se.Line) + ": " + msg)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return newSyntaxError("invalid XML: unexpected end of input")
	}
	return newSyntaxError("invalid XML: " + err.Error())
}

// root reads up to the root element's start tag; a prolog (declaration,
// doctype, comments) may come before it.
func (x *xmlReader) root() (xml.StartElement, error) {
	for {
		t, err := x.d.Token()
		if errors.Is(err, io.EOF) {
			return xml.StartElement{}, malformed("", "empty body")
		}
		if err != nil {
			return xml.StartElement{}, xmlSyntaxError(err)
		}
		switch t := t.(type) {
		case xml.StartElement:
			return t, nil
		case xml.CharData:
			if !isBlank(string(t)) {
				return xml.StartElement{}, newSyntaxError("invalid XML: text before the root element")
			}
		}
	}
}

// end checks that nothing but white space, comments and processing
// instructions follows the root element.
func (x *xmlReader) end() error {
	for {
		t, err := x.d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return xmlSyntaxError(err)
		}
		switch t := t.(type) {
		case xml.StartElement:
			return newSyntaxError("invalid XML: a second root element <" + t.Name.Local + ">")
		case xml.CharData:
			if !isBlank(string(t)) {
				return newSyntaxError("invalid XML: text after the root element")
			}
		}
	}
}

// children reads the current element's content up to its end tag, calling
// child for each child element; child must consume the element. Text
// between children is ignored. Errors get the child's name in their path.
func (x *xmlReader) children(child func(se xml.StartElement) error) error {
	for {
		t, err := x.token()
		if err != nil {
			return err
		}
		switch t := t.(type) {
		case xml.StartElement:
			if err := child(t); err != nil {
				return addPath(err, t.Name.Local)
			}
		case xml.EndElement:
			return nil
		}
	}
}

// skip skips the rest of the current element.
func (x *xmlReader) skip() error {
	if err := x.d.Skip(); err != nil {
		return xmlSyntaxError(err)
	}
	return nil
}

// text reads the current element's text up to its end tag. An element
// inside it is an error: Eureka's fields are text only.
func (x *xmlReader) text() (string, error) {
	var s string
	var buf []byte
	for {
		t, err := x.token()
		if err != nil {
			return "", err
		}
		switch t := t.(type) {
		case xml.CharData:
			switch {
			case buf != nil:
				buf = append(buf, t...)
			case s == "":
				s = string(t)
			default:
				buf = append([]byte(s), t...)
			}
		case xml.StartElement:
			return "", fieldError("want text, got element <%s>", t.Name.Local)
		case xml.EndElement:
			if buf != nil {
				return string(buf), nil
			}
			return s, nil
		}
	}
}

func (x *xmlReader) setText(dst *string) error {
	s, err := x.text()
	if err == nil {
		*dst = s
	}
	return err
}

// intText reads a number element; empty text counts as absent.
func (x *xmlReader) intText(bits int) (int64, bool, error) {
	s, err := x.text()
	if err != nil || isBlank(s) {
		return 0, false, err
	}
	n, ok := parseInt(s, bits)
	if !ok {
		return 0, false, fieldError("want a number, got %s", quoteValue(s))
	}
	return n, true, nil
}

func (x *xmlReader) setInt32(dst *int) error {
	n, ok, err := x.intText(32)
	if ok {
		*dst = int(n)
	}
	return err
}
