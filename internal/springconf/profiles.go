package springconf

import "strings"

// MatchProfiles tells whether a document's profile condition holds for the
// active profiles. The condition is Spring's: a comma list (any element
// may hold), each element a profile expression with ! (not), & (and),
// | (or) and parentheses: "prod", "!dev", "prod & eu", "(a | b) & !c".
// An expression that does not parse holds for no profiles.
func MatchProfiles(condition string, active []string) bool {
	set := map[string]bool{}
	for _, p := range active {
		set[p] = true
	}
	for _, expr := range strings.Split(condition, ",") {
		expr = strings.TrimSpace(expr)
		if expr == "" {
			continue
		}
		p := &profileParser{src: expr, active: set}
		v, ok := p.or()
		p.space()
		if ok && p.pos == len(p.src) && v {
			return true
		}
	}
	return false
}

type profileParser struct {
	src    string
	pos    int
	active map[string]bool
}

func (p *profileParser) space() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
}

func (p *profileParser) peek(c byte) bool {
	p.space()
	return p.pos < len(p.src) && p.src[p.pos] == c
}

func (p *profileParser) or() (bool, bool) {
	v, ok := p.and()
	for ok && p.peek('|') {
		p.pos++
		var w bool
		w, ok = p.and()
		v = v || w
	}
	return v, ok
}

func (p *profileParser) and() (bool, bool) {
	v, ok := p.unary()
	for ok && p.peek('&') {
		p.pos++
		var w bool
		w, ok = p.unary()
		v = v && w
	}
	return v, ok
}

func (p *profileParser) unary() (bool, bool) {
	switch {
	case p.peek('!'):
		p.pos++
		v, ok := p.unary()
		return !v, ok
	case p.peek('('):
		p.pos++
		v, ok := p.or()
		if !ok || !p.peek(')') {
			return false, false
		}
		p.pos++
		return v, true
	}
	start := p.pos
	for p.pos < len(p.src) && !strings.ContainsRune(" \t!&|()", rune(p.src[p.pos])) {
		p.pos++
	}
	if p.pos == start {
		return false, false
	}
	return p.active[p.src[start:p.pos]], true
}
