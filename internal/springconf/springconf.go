package springconf

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Origin is where a value was written.
type Origin struct {
	File string
	Line int
}

func (o Origin) String() string {
	if o.Line <= 0 {
		return o.File
	}
	return o.File + ":" + strconv.Itoa(o.Line)
}

// Value is one effective key of the merged configuration.
type Value struct {
	// Key is the dotted key as the winning document wrote it. A list of
	// scalars is one key whose value is the items joined by commas (what
	// Spring binds to a list or an array); items that are maps are
	// key[0].field, as Spring names them.
	Key string
	// Value has its placeholders resolved; Raw is as written.
	Value, Raw string
	Origin     Origin
	// Resolved says, for people, where each placeholder of Raw got its
	// value: "${PORT:8761} = 9000 from the environment (PORT)".
	Resolved []string
}

// Options are what the caller knows besides the file.
type Options struct {
	// Env is the process environment (os.Environ's form).
	Env []string
	// Profiles are the caller's active profiles (comma lists allowed);
	// like Spring's command line they win over SPRING_PROFILES_ACTIVE and
	// the files' spring.profiles.active.
	Profiles []string
	// Overrides are properties set on the command line: placeholders see
	// them first, and their spring.profiles.active counts as the caller's.
	Overrides map[string]string
	// AdditionalLocations are Spring's spring.config.additional-location:
	// more files and folders, read after the locations (and winning).
	AdditionalLocations string
	// HTTPClient fetches configserver: imports (nil: one with
	// spring.cloud.config.request-*-timeout).
	HTTPClient *http.Client
	// Sleep waits between Config Server retries (nil: time.Sleep); tests
	// pass a clock of their own.
	Sleep func(time.Duration)
}

// Config is a file and its profile files, merged.
type Config struct {
	// Values in key order.
	Values []Value
	// Profiles are the active profiles, in order ("default" when none).
	Profiles []string
	// Files are the files read, in the order they were applied.
	Files []string
	// Notes are warnings of the load: an optional import that could not
	// be read, a Config Server that answered nothing.
	Notes []string
	// Referenced are the keys (in Fold form) that a placeholder reads: an
	// application's own key used only as ${eureka.password} is meant.
	Referenced map[string]bool
	index      map[string]int
}

// Get returns the value of a key, in any of Spring's relaxed spellings.
func (c *Config) Get(key string) (Value, bool) {
	i, ok := c.index[Fold(key)]
	if !ok {
		return Value{}, false
	}
	return c.Values[i], true
}

// Errors are all the problems of one load, each naming the key, where it
// was written and what is wrong.
type Errors []error

func (e Errors) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "\n")
}

// Fold is the form in which two spellings of a key are the same key under
// Spring's relaxed binding: case, dashes and underscores do not count
// (enableSelfPreservation, enable-self-preservation).
func Fold(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == '-' || c == '_':
		case 'A' <= c && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// readDocuments reads a file's documents: YAML (.yml, .yaml, and JSON,
// which is YAML) or Java properties (.properties).
func readDocuments(path string) ([]*document, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if strings.EqualFold(filepath.Ext(path), ".properties") {
		return parseProperties(path, string(b))
	}
	return parseYAML(path, b)
}

// profileFiles are the files of one profile beside path, in the order they
// are applied: application-{p} before NAME-{p} (the more specific wins),
// and for each, .properties after YAML, as Spring gives .properties the
// higher precedence in one location.
func profileFiles(path, profile string) []string {
	dir := filepath.Dir(path)
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	names := []string{"application"}
	if base != "application" {
		names = append(names, base)
	}
	var out []string
	for _, n := range names {
		for _, ext := range []string{".yml", ".yaml", ".properties"} {
			out = append(out, filepath.Join(dir, n+"-"+profile+ext))
		}
	}
	return out
}

// document is one YAML or properties document, flattened.
type document struct {
	file    string
	entries []entry
	// parent is the document whose spring.config.import brought this one
	// in: an imported document applies only where its parent does.
	parent *document
}

type entry struct {
	key, value string
	line       int
}

// condition keys of a document
const (
	onProfileKey       = "spring.config.activate.on-profile"
	legacyProfilesKey  = "spring.profiles"
	onCloudPlatformKey = "spring.config.activate.on-cloud-platform"
	activeProfilesKey  = "spring.profiles.active"
	includeProfilesKey = "spring.profiles.include"
	defaultProfilesKey = "spring.profiles.default"
)

func (d *document) get(key string) (string, bool) {
	f := Fold(key)
	v, found := "", false
	for _, e := range d.entries {
		if Fold(e.key) == f {
			v, found = e.value, true
		}
	}
	return v, found
}

// unconditional tells whether the document applies whatever the profiles.
func (d *document) unconditional() bool {
	for x := d; x != nil; x = x.parent {
		_, p := x.get(onProfileKey)
		_, l := x.get(legacyProfilesKey)
		_, c := x.get(onCloudPlatformKey)
		if p || l || c {
			return false
		}
	}
	return true
}

// active tells whether the document applies with these profiles (and on
// this machine's cloud platform).
func (d *document) active(profiles []string, env map[string]string) bool {
	if d.parent != nil && !d.parent.active(profiles, env) {
		return false
	}
	if cp, ok := d.get(onCloudPlatformKey); ok && !strings.EqualFold(strings.TrimSpace(cp), cloudPlatform(env)) {
		return false
	}
	for _, key := range []string{onProfileKey, legacyProfilesKey} {
		if expr, ok := d.get(key); ok && !MatchProfiles(expr, profiles) {
			return false
		}
	}
	return true
}

// cloudPlatform is what Spring Boot detects from the environment.
func cloudPlatform(env map[string]string) string {
	switch {
	case env["KUBERNETES_SERVICE_HOST"] != "" && env["KUBERNETES_SERVICE_PORT"] != "":
		return "kubernetes"
	case env["VCAP_APPLICATION"] != "" || env["VCAP_SERVICES"] != "":
		return "cloud_foundry"
	case env["DYNO"] != "":
		return "heroku"
	}
	return "none"
}

// activeProfiles follows Spring: the most specific source of
// spring.profiles.active wins whole (the caller, its overrides,
// SPRING_PROFILES_ACTIVE, then the file's unconditional documents, the
// last one winning); spring.profiles.include adds to it; with none,
// spring.profiles.default (default "default").
func activeProfiles(docs []*document, opt Options, env map[string]string) []string {
	fileActive, fileInclude, fileDefault := "", "", ""
	for _, d := range docs {
		if !d.unconditional() {
			continue
		}
		if v, ok := d.get(activeProfilesKey); ok {
			fileActive = v
		}
		if v, ok := d.get(includeProfilesKey); ok {
			fileInclude = v
		}
		if v, ok := d.get(defaultProfilesKey); ok {
			fileDefault = v
		}
	}
	pre := func(v string) string { return expandEarly(v, env, opt.Overrides) }
	var active []string
	for _, src := range []string{
		strings.Join(opt.Profiles, ","),
		opt.Overrides[activeProfilesKey],
		env["SPRING_PROFILES_ACTIVE"],
		pre(fileActive),
	} {
		if active = splitProfiles(src); len(active) > 0 {
			break
		}
	}
	include := append(splitProfiles(env["SPRING_PROFILES_INCLUDE"]), splitProfiles(pre(fileInclude))...)
	out := []string{}
	seen := map[string]bool{}
	for _, p := range append(include, active...) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		out = splitProfiles(pre(fileDefault))
		if len(out) == 0 {
			out = []string{"default"}
		}
	}
	return expandGroups(out, profileGroups(docs))
}

func splitProfiles(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// merger applies documents in order; a later value of a key wins.
type merger struct {
	values map[string]Value // by Fold(key)
	env    map[string]string
}

func newMerger(env map[string]string) *merger { return &merger{values: map[string]Value{}, env: env} }

func (m *merger) apply(docs []*document, profiles []string) {
	for _, d := range docs {
		if !d.active(profiles, m.env) {
			continue
		}
		for _, e := range collapseLists(d.entries) {
			f := Fold(e.key)
			// A list replaces the whole list below it, as in Spring.
			for k := range m.values {
				if strings.HasPrefix(k, f+"[") {
					delete(m.values, k)
				}
			}
			if i := strings.IndexByte(f, '['); i > 0 {
				delete(m.values, f[:i])
			}
			m.values[f] = Value{Key: e.key, Raw: e.value, Value: e.value, Origin: Origin{d.file, e.line}}
		}
	}
}

// collapseLists turns key[0]=a, key[1]=b (a .properties list) into the
// comma list key=a,b that a YAML list of scalars gives.
func collapseLists(entries []entry) []entry {
	type item struct {
		idx int
		e   entry
	}
	lists := map[string][]item{}
	var order []string
	var out []entry
	nested := map[string]bool{}
	for _, e := range entries {
		open := strings.LastIndexByte(e.key, '[')
		if open > 0 && strings.HasSuffix(e.key, "]") {
			if idx, err := strconv.Atoi(e.key[open+1 : len(e.key)-1]); err == nil && idx >= 0 {
				base := e.key[:open]
				if _, ok := lists[base]; !ok {
					order = append(order, base)
				}
				lists[base] = append(lists[base], item{idx, e})
				continue
			}
		}
		if i := strings.IndexByte(e.key, '['); i > 0 {
			nested[Fold(e.key[:i])] = true
		}
		out = append(out, e)
	}
	for _, base := range order {
		items := lists[base]
		if nested[Fold(base)] {
			for _, it := range items {
				out = append(out, it.e)
			}
			continue
		}
		sort.SliceStable(items, func(i, j int) bool { return items[i].idx < items[j].idx })
		vals := make([]string, len(items))
		for i, it := range items {
			vals[i] = it.e.value
		}
		out = append(out, entry{key: base, value: strings.Join(vals, ","), line: items[0].e.line})
	}
	return out
}

func (m *merger) config() *Config {
	c := &Config{index: map[string]int{}}
	for _, v := range m.values {
		c.Values = append(c.Values, v)
	}
	sort.Slice(c.Values, func(i, j int) bool { return c.Values[i].Key < c.Values[j].Key })
	for i, v := range c.Values {
		c.index[Fold(v.Key)] = i
	}
	return c
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
