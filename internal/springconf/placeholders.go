package springconf

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// resolver expands ${name} and ${name:default} as Spring's environment
// does: the command line first, then the environment, then the merged
// keys (whose own placeholders are expanded in turn).
type resolver struct {
	cfg       *Config // nil: the environment and the overrides only
	env       map[string]string
	overrides map[string]string // by Fold
	// done memoises the keys expanded so far; resolving is the stack of
	// keys being expanded, the cycle guard.
	done      map[string]string
	resolving []string
	// referenced are the names placeholders asked for (Fold form).
	referenced map[string]bool
}

func newResolver(cfg *Config, env, overrides map[string]string) *resolver {
	r := &resolver{cfg: cfg, env: env, overrides: map[string]string{}, done: map[string]string{}, referenced: map[string]bool{}}
	for k, v := range overrides {
		r.overrides[Fold(k)] = v
	}
	return r
}

// resolveAll expands every value of c in place and returns one error for
// each value that cannot be.
func (r *resolver) resolveAll(c *Config) Errors {
	var errs Errors
	for i := range c.Values {
		v := &c.Values[i]
		if !strings.Contains(v.Raw, "${") {
			continue
		}
		out, notes, err := r.expand(v.Raw, true)
		if err != nil {
			errs = append(errs, &PlaceholderError{Key: v.Key, Origin: v.Origin, Err: err})
			continue
		}
		v.Value, v.Resolved = out, notes
	}
	return errs
}

// PlaceholderError is a value whose placeholders cannot be resolved; the
// value is left as written, as Spring's binder leaves it.
type PlaceholderError struct {
	Key    string
	Origin Origin
	Err    error
}

func (e *PlaceholderError) Error() string { return fmt.Sprintf("%s: %s: %v", e.Origin, e.Key, e.Err) }
func (e *PlaceholderError) Unwrap() error { return e.Err }

// expandEarly expands a value before the files are merged (the active
// profiles), from the environment and the overrides; what cannot be
// expanded is left as written.
func expandEarly(s string, env, overrides map[string]string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	out, _, err := newResolver(nil, env, overrides).expand(s, false)
	if err != nil {
		return s
	}
	return out
}

// expand replaces the placeholders of s. With notes it also says where
// each top-level placeholder got its value.
func (r *resolver) expand(s string, withNotes bool) (string, []string, error) {
	var b strings.Builder
	var notes []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), notes, nil
		}
		if i > 0 && s[i-1] == '\\' {
			// \${ is a literal ${.
			b.WriteString(s[:i-1] + "${")
			s = s[i+2:]
			continue
		}
		end := matchingBrace(s, i+2)
		if end < 0 {
			// An unclosed ${ is text, as Spring leaves it.
			b.WriteString(s)
			return b.String(), notes, nil
		}
		b.WriteString(s[:i])
		inner := s[i+2 : end]
		val, from, err := r.placeholder(inner)
		if err != nil {
			return "", nil, err
		}
		if withNotes {
			notes = append(notes, fmt.Sprintf("${%s} = %q %s", inner, val, from))
		}
		b.WriteString(val)
		s = s[end+1:]
	}
}

// matchingBrace finds the } that closes a placeholder whose name starts at
// from, skipping nested placeholders.
func matchingBrace(s string, from int) int {
	depth := 0
	for i := from; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "${"):
			depth++
			i++
		case s[i] == '{':
			depth++
		case s[i] == '}':
			if depth == 0 {
				return i
			}
			depth--
		}
	}
	return -1
}

// placeholder resolves the inside of one ${…}: a name, and a default after
// the first : that is not inside a nested placeholder.
func (r *resolver) placeholder(inner string) (value, from string, err error) {
	name, def, hasDef := inner, "", false
	depth := 0
	for i := 0; i < len(inner); i++ {
		switch {
		case strings.HasPrefix(inner[i:], "${"):
			depth++
			i++
		case inner[i] == '}':
			depth--
		case inner[i] == ':' && depth == 0:
			name, def, hasDef = inner[:i], inner[i+1:], true
			i = len(inner)
		}
	}
	name, _, err = r.expand(name, false)
	if err != nil {
		return "", "", err
	}
	name = strings.TrimSpace(name)
	r.referenced[Fold(name)] = true
	if v, src, ok, err := r.lookup(name); err != nil {
		return "", "", err
	} else if ok {
		return v, src, nil
	}
	if hasDef {
		v, _, err := r.expand(def, false)
		return v, "(the default)", err
	}
	return "", "", fmt.Errorf("unresolved placeholder ${%s}: no key %s in the files, no environment variable %s, and no default (write ${%s:value})",
		inner, name, RelaxedEnvName(name), inner)
}

// lookup finds a property: the overrides, the environment (exact, then
// Spring's relaxed forms), Spring's random.*, then the merged keys.
func (r *resolver) lookup(name string) (value, from string, found bool, err error) {
	if v, ok := r.overrides[Fold(name)]; ok {
		return v, "from the command line", true, nil
	}
	for _, n := range envCandidates(name) {
		if v, ok := r.env[n]; ok {
			return v, "from the environment (" + n + ")", true, nil
		}
	}
	if v, ok := random(name); ok {
		return v, "(random)", true, nil
	}
	if r.cfg == nil {
		return "", "", false, nil
	}
	val, ok := r.cfg.Get(name)
	if !ok {
		return "", "", false, nil
	}
	f := Fold(val.Key)
	if v, ok := r.done[f]; ok {
		return v, "from " + val.Key + " (" + val.Origin.String() + ")", true, nil
	}
	for i, k := range r.resolving {
		if Fold(k) == f {
			chain := append(append([]string{}, r.resolving[i:]...), val.Key)
			return "", "", false, fmt.Errorf("placeholder cycle: %s", strings.Join(chain, " → "))
		}
	}
	r.resolving = append(r.resolving, val.Key)
	v, _, err := r.expand(val.Raw, false)
	r.resolving = r.resolving[:len(r.resolving)-1]
	if err != nil {
		return "", "", false, err
	}
	r.done[f] = v
	return v, "from " + val.Key + " (" + val.Origin.String() + ")", true, nil
}

// envCandidates are the variable names Spring's environment tries for a
// property: as written, dots and dashes as underscores, each upper-cased
// too, and Spring Boot's binding form (dashes dropped: SERVER_PORT,
// EUREKA_INSTANCE_HOSTNAME).
func envCandidates(name string) []string {
	dots := strings.ReplaceAll(name, ".", "_")
	dashes := strings.ReplaceAll(name, "-", "_")
	both := strings.ReplaceAll(dots, "-", "_")
	list := []string{name, dots, dashes, both, RelaxedEnvName(name)}
	out := make([]string, 0, 2*len(list))
	seen := map[string]bool{}
	for _, n := range list {
		for _, c := range []string{n, strings.ToUpper(n)} {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// RelaxedEnvName is the environment variable Spring Boot binds to a key:
// server.port → SERVER_PORT, eureka.server.enable-self-preservation →
// EUREKA_SERVER_ENABLESELFPRESERVATION, list[0] → LIST_0.
func RelaxedEnvName(key string) string {
	r := strings.NewReplacer(".", "_", "-", "", "[", "_", "]", "")
	return strings.ToUpper(r.Replace(key))
}

// random is Spring's RandomValuePropertySource: random.value, random.uuid,
// random.int, random.long, random.int(max), random.int[min,max].
func random(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "random.")
	if !ok {
		return "", false
	}
	switch rest {
	case "value":
		return fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()), true
	case "uuid":
		a, b := rand.Uint64(), rand.Uint64()
		a = a&^0xf000 | 0x4000
		b = b&^(3<<62) | 2<<62
		return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", a>>32, a>>16&0xffff, a&0xffff, b>>48, b&0xffffffffffff), true
	case "int":
		return strconv.Itoa(int(rand.Int32())), true
	case "long":
		return strconv.FormatInt(rand.Int64(), 10), true
	}
	for _, kind := range []string{"int", "long"} {
		args, ok := strings.CutPrefix(rest, kind)
		if !ok || len(args) < 3 {
			continue
		}
		args = args[1 : len(args)-1]
		lo, hi := int64(0), int64(0)
		var err error
		if a, b, two := strings.Cut(args, ","); two {
			lo, err = strconv.ParseInt(strings.TrimSpace(a), 10, 64)
			if err == nil {
				hi, err = strconv.ParseInt(strings.TrimSpace(b), 10, 64)
			}
		} else {
			hi, err = strconv.ParseInt(strings.TrimSpace(args), 10, 64)
		}
		if err != nil || hi <= lo {
			return "", false
		}
		return strconv.FormatInt(lo+rand.Int64N(hi-lo), 10), true
	}
	return "", false
}
