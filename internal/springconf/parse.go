package springconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// parseYAML reads every document of a YAML stream, flattened.
func parseYAML(file string, b []byte) ([]*document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []*document
	for {
		var root yaml.Node
		err := dec.Decode(&root)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			if tok, line := mavenToken(b); tok != "" {
				return nil, fmt.Errorf("config file %s:%d: %s is an unfiltered Maven token: the file needs Maven resource filtering (mvn process-resources writes the value in) before it is read; Spring Boot cannot read it either", file, line, tok)
			}
			return nil, fmt.Errorf("config file %s: %w", file, err)
		}
		d := &document{file: file}
		if len(root.Content) > 0 {
			if err := flatten(d, "", root.Content[0]); err != nil {
				return nil, fmt.Errorf("config file %s: %w", file, err)
			}
		}
		docs = append(docs, d)
	}
}

func join(prefix, key string) string {
	// Spring's [a.b] keeps dots inside a map key; Muster's map keys are
	// what follows the prefix, so the brackets go.
	if strings.HasPrefix(key, "[") && strings.HasSuffix(key, "]") {
		key = key[1 : len(key)-1]
	}
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func flatten(d *document, prefix string, n *yaml.Node) error {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		if len(n.Content) == 0 && prefix != "" {
			return nil
		}
		// Merge keys (<<) first, so that the mapping's own keys win.
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "<<" && n.Content[i].Tag == "!!merge" {
				v := n.Content[i+1]
				for v.Kind == yaml.AliasNode {
					v = v.Alias
				}
				if v.Kind == yaml.SequenceNode {
					for _, m := range v.Content {
						if err := flatten(d, prefix, m); err != nil {
							return err
						}
					}
				} else if err := flatten(d, prefix, v); err != nil {
					return err
				}
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Value == "<<" && k.Tag == "!!merge" {
				continue
			}
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a key must be a plain value", k.Line)
			}
			if err := flatten(d, join(prefix, k.Value), n.Content[i+1]); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		scalars := true
		for _, item := range n.Content {
			for item.Kind == yaml.AliasNode {
				item = item.Alias
			}
			if item.Kind != yaml.ScalarNode {
				scalars = false
			}
		}
		if scalars {
			vals := make([]string, len(n.Content))
			for i, item := range n.Content {
				for item.Kind == yaml.AliasNode {
					item = item.Alias
				}
				vals[i] = scalarValue(item)
			}
			d.entries = append(d.entries, entry{prefix, strings.Join(vals, ","), n.Line})
			return nil
		}
		for i, item := range n.Content {
			if err := flatten(d, prefix+"["+strconv.Itoa(i)+"]", item); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if prefix == "" {
			return fmt.Errorf("line %d: want key: value, got a bare value", n.Line)
		}
		d.entries = append(d.entries, entry{prefix, scalarValue(n), n.Line})
	}
	return nil
}

// scalarValue is the text of a scalar; YAML's null is Spring's empty value.
func scalarValue(n *yaml.Node) string {
	if n.Tag == "!!null" {
		return ""
	}
	return n.Value
}

// parseProperties reads a Java properties file: key=value, key: value or
// key value; # and ! comments; a trailing backslash continues the line;
// \t \n \uXXXX escapes. A line #--- (or !---) starts a new document, as in
// Spring Boot 2.4+.
func parseProperties(file, text string) ([]*document, error) {
	text = strings.TrimPrefix(text, "\ufeff")
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	docs := []*document{{file: file}}
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if t := strings.TrimSpace(line); t == "#---" || t == "!---" {
			docs = append(docs, &document{file: file})
			continue
		}
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for continues(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		key, value := splitProperty(line)
		key, err := unescape(key)
		if err == nil {
			value, err = unescape(value)
		}
		if err != nil {
			return nil, fmt.Errorf("config file %s:%d: %w", file, start, err)
		}
		d := docs[len(docs)-1]
		d.entries = append(d.entries, entry{strings.TrimSpace(key), strings.TrimSpace(value), start})
	}
	return docs, nil
}

// continues tells whether a line ends in an odd number of backslashes.
func continues(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty splits at the first unescaped =, : or whitespace.
func splitProperty(line string) (key, value string) {
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case '\\':
			i++
		case '=', ':', ' ', '\t', '\f':
			key, rest := line[:i], strings.TrimLeft(line[i:], " \t\f")
			if c == ' ' || c == '\t' || c == '\f' {
				if rest != "" && (rest[0] == '=' || rest[0] == ':') {
					rest = strings.TrimLeft(rest[1:], " \t\f")
				}
			} else {
				rest = strings.TrimLeft(rest[1:], " \t\f")
			}
			return key, rest
		}
	}
	return line, ""
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("bad \\u escape in %q", s)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 32)
			if err != nil {
				return "", fmt.Errorf("bad \\u escape in %q", s)
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r)
			i += size - 1
		}
	}
	return b.String(), nil
}

// mavenTokenRE is a Maven resource-filtering token as a value: @name@.
var mavenTokenRE = regexp.MustCompile(`(?m)^[^#\n]*?[:=-]\s*(@[A-Za-z0-9_.\-]+@)`)

// mavenToken finds the first unfiltered Maven token of a file (a value
// @project.version@), with its line: YAML cannot start a value with @, so
// such a file fails to parse, and the parser's message names neither.
func mavenToken(b []byte) (string, int) {
	loc := mavenTokenRE.FindSubmatchIndex(b)
	if loc == nil {
		return "", 0
	}
	return string(b[loc[2]:loc[3]]), 1 + bytes.Count(b[:loc[2]], []byte("\n"))
}
