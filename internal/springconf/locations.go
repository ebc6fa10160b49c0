package springconf

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Keys the loader reads to find more files.
const (
	importKey             = "spring.config.import"
	profileGroupPrefix    = "spring.profiles.group."
	configLocationKey     = "spring.config.location"
	additionalLocationKey = "spring.config.additional-location"
	configNameKey         = "spring.config.name"
)

// Load reads the configuration at locations, as Spring Boot reads
// spring.config.location: a comma list of files and directories (a
// directory ends in / or is one on disk), each may be optional: (absent is
// fine) and file: prefixed; later locations win. A directory holds
// application.{properties,yml,yaml} (spring.config.name), and Spring Cloud's
// bootstrap.{properties,yml,yaml}, which is read first (it loses to
// application.*); bootstrap.* beside a named application.* file is read
// first likewise. Options.AdditionalLocations come after (and win). Each
// document's spring.config.import (file:, optional:file:, configserver:)
// is read right after it, winning over it; then the profile files of each
// file. Unresolved placeholders come as Errors together with the Config
// (their values left as written), so that a check can show everything at
// once; any other problem is an error with no Config.
func Load(locations string, opt Options) (*Config, error) {
	env := envMap(opt.Env)
	l := &loader{env: env, opt: opt, read: map[string]bool{}}
	var docs []*document
	var bases []string
	for _, loc := range append(splitList(locations), splitList(opt.AdditionalLocations)...) {
		files, err := l.locate(loc, "")
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			fd, err := l.readWithImports(f, nil)
			if err != nil {
				return nil, err
			}
			docs = append(docs, fd...)
			bases = append(bases, f)
		}
	}
	profiles := activeProfiles(docs, opt, env)
	var profileDocs []*document
	for _, p := range profiles {
		for _, base := range bases {
			for _, f := range profileFiles(base, p) {
				if l.read[f] {
					continue
				}
				if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
					continue
				}
				fd, err := l.readWithImports(f, nil)
				if err != nil {
					return nil, err
				}
				profileDocs = append(profileDocs, fd...)
			}
		}
	}
	docs = append(docs, profileDocs...)
	// Includes of profile documents and profile files (Spring's legacy
	// processing) can activate more profiles.
	profiles = includeFromProfileDocuments(docs, profiles, env)
	docs, err := l.configServerImports(docs, profiles)
	if err != nil {
		return nil, err
	}
	m := newMerger(env)
	m.apply(docs, profiles)
	c := m.config()
	c.Profiles, c.Files, c.Notes = profiles, l.files, l.notes
	r := newResolver(c, env, opt.Overrides)
	errs := r.resolveAll(c)
	c.Referenced = r.referenced
	if len(errs) > 0 {
		return c, errs
	}
	return c, nil
}

// loader reads files once each, in the order Spring applies them.
type loader struct {
	env   map[string]string
	opt   Options
	read  map[string]bool
	files []string
	notes []string
	// imported: a configserver: import was read.
	imported bool
}

// splitList splits a comma list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// locate turns one location (file or directory, optional:, file:) into
// the files to read, relative to dir when not absolute.
func (l *loader) locate(loc, dir string) ([]string, error) {
	raw := loc
	optional := false
	if rest, ok := strings.CutPrefix(loc, "optional:"); ok {
		optional, loc = true, rest
	}
	if rest, ok := strings.CutPrefix(loc, "classpath:"); ok {
		if optional {
			l.notes = append(l.notes, fmt.Sprintf("%s: classpath: locations are not read by Muster (name the file with file:)", raw))
			return nil, nil
		}
		return nil, fmt.Errorf("config location %s: a binary has no classpath: name the file itself (file:%s, relative to the importing file's folder)", raw, strings.TrimPrefix(rest, "/"))
	}
	loc = strings.TrimPrefix(loc, "file:")
	if kind, _, ok := strings.Cut(loc, ":"); ok && len(kind) > 1 && !strings.ContainsAny(kind, `/\.`) {
		// configtree:, vault:, consul:, aws-secretsmanager:… are other
		// Spring Cloud loaders.
		if optional {
			l.notes = append(l.notes, fmt.Sprintf("%s: Muster does not read %s: locations; skipped as the location is optional", raw, kind))
			return nil, nil
		}
		return nil, fmt.Errorf("config location %s: Muster does not read %s: locations (it reads files, folders and configserver:); write optional:%s to start without it", raw, kind, raw)
	}
	if dir != "" && !filepath.IsAbs(loc) {
		loc = filepath.Join(dir, loc)
	}
	st, err := os.Stat(loc)
	isDir := strings.HasSuffix(loc, "/") || (err == nil && st.IsDir())
	if isDir {
		var files []string
		for _, name := range []string{"bootstrap", l.configName()} {
			for _, ext := range []string{".yml", ".yaml", ".properties"} {
				f := filepath.Join(loc, name+ext)
				if _, err := os.Stat(f); err == nil {
					files = append(files, f)
				}
			}
		}
		if len(files) == 0 && !optional {
			if err != nil {
				return nil, fmt.Errorf("config location %s: %w (write optional:%s if it may be absent)", raw, err, raw)
			}
			return nil, fmt.Errorf("config location %s: no application.yml, .yaml or .properties in the folder (write optional:%s if it may be empty)", raw, raw)
		}
		return files, nil
	}
	if err != nil {
		if optional && errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("config file: %w", err)
	}
	var files []string
	if base := strings.TrimSuffix(filepath.Base(loc), filepath.Ext(loc)); base == l.configName() {
		// Spring Cloud's bootstrap context is read before application.*.
		for _, ext := range []string{".yml", ".yaml", ".properties"} {
			if f := filepath.Join(filepath.Dir(loc), "bootstrap"+ext); fileExists(f) {
				files = append(files, f)
			}
		}
	}
	return append(files, loc), nil
}

// configName is spring.config.name (command line or environment only, as
// in Spring): the name of the files a folder location holds.
func (l *loader) configName() string {
	if v := strings.TrimSpace(l.opt.Overrides[configNameKey]); v != "" {
		return v
	}
	for _, n := range []string{"SPRING_CONFIG_NAME", "spring.config.name"} {
		if v := strings.TrimSpace(l.env[n]); v != "" {
			return v
		}
	}
	return "application"
}

func fileExists(f string) bool {
	st, err := os.Stat(f)
	return err == nil && !st.IsDir()
}

// readWithImports reads a file (once) and, after each of its documents,
// the files its spring.config.import names; configserver: imports are
// left for later, when the profiles are known.
func (l *loader) readWithImports(file string, parent *document) ([]*document, error) {
	if l.read[file] {
		return nil, nil
	}
	l.read[file] = true
	docs, err := readDocuments(file)
	if err != nil {
		return nil, err
	}
	l.files = append(l.files, file)
	var out []*document
	for _, d := range docs {
		d.parent = parent
		out = append(out, d)
		v, ok := d.get(importKey)
		if !ok {
			continue
		}
		for _, imp := range splitList(expandEarly(v, l.env, l.opt.Overrides)) {
			if isConfigServer(imp) {
				continue
			}
			files, err := l.locate(imp, filepath.Dir(file))
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", file, importKey, err)
			}
			for _, f := range files {
				fd, err := l.readWithImports(f, d)
				if err != nil {
					return nil, err
				}
				out = append(out, fd...)
			}
		}
	}
	return out, nil
}

// includeFromProfileDocuments adds the spring.profiles.include of the
// active profile documents (and their groups) until nothing changes.
func includeFromProfileDocuments(docs []*document, profiles []string, env map[string]string) []string {
	groups := profileGroups(docs)
	for changed := true; changed; {
		changed = false
		for _, d := range docs {
			if d.unconditional() || !d.active(profiles, env) {
				continue
			}
			v, ok := d.get(includeProfilesKey)
			if !ok {
				continue
			}
			for _, p := range expandGroups(splitProfiles(v), groups) {
				if !contains(profiles, p) {
					profiles = append(profiles, p)
					changed = true
				}
			}
		}
	}
	return profiles
}

// profileGroups reads spring.profiles.group.NAME lists of the
// unconditional documents.
func profileGroups(docs []*document) map[string][]string {
	groups := map[string][]string{}
	for _, d := range docs {
		if !d.unconditional() {
			continue
		}
		for _, e := range collapseLists(d.entries) {
			if len(e.key) > len(profileGroupPrefix) && strings.EqualFold(e.key[:len(profileGroupPrefix)], profileGroupPrefix) {
				groups[e.key[len(profileGroupPrefix):]] = splitProfiles(e.value)
			}
		}
	}
	return groups
}

// expandGroups puts each profile's group members right after it, as
// Spring does, recursively and once each.
func expandGroups(profiles []string, groups map[string][]string) []string {
	var out []string
	var add func(p string)
	add = func(p string) {
		if contains(out, p) {
			return
		}
		out = append(out, p)
		for _, m := range groups[p] {
			add(m)
		}
	}
	for _, p := range profiles {
		add(p)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// httpClient is the client of configserver: imports.
func (l *loader) httpClient(timeout time.Duration) *http.Client {
	if l.opt.HTTPClient != nil {
		return l.opt.HTTPClient
	}
	return &http.Client{Timeout: timeout}
}
