package springconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Spring Cloud Config's client keys and their defaults.
const (
	defaultConfigServerURI = "http://localhost:8888"
	maxConfigServerBody    = 16 << 20
)

func isConfigServer(imp string) bool {
	return strings.HasPrefix(strings.TrimPrefix(imp, "optional:"), "configserver:")
}

// configServerImports fetches, for each active document that imports
// configserver:, the application's property sources from the Config
// Server and puts them right after that document (they win over it, the
// first property source winning over the later ones), as Spring Cloud
// Config's ConfigData loader does.
func (l *loader) configServerImports(docs []*document, profiles []string) ([]*document, error) {
	var out []*document
	for i, d := range docs {
		out = append(out, d)
		v, ok := d.get(importKey)
		if !ok || !d.active(profiles, l.env) {
			continue
		}
		for _, imp := range splitList(expandEarly(v, l.env, l.opt.Overrides)) {
			if !isConfigServer(imp) {
				continue
			}
			// The client's keys as the files read so far give them.
			m := newMerger(l.env)
			m.apply(docs[:i+1], profiles)
			props := newResolver(m.config(), l.env, l.opt.Overrides)
			fetched, err := l.fetchConfigServer(imp, props, profiles, d)
			if err != nil {
				return nil, err
			}
			out = append(out, fetched...)
			l.imported = true
		}
	}
	return l.bootstrapConfigServer(out, profiles)
}

// bootstrapConfigServer is Spring Cloud's older "config first" bootstrap:
// a bootstrap.yml that names spring.cloud.config.uri, with no
// configserver: import anywhere, has its Config Server read as an
// optional import (fail-fast still stops the start), whose sources win
// over every file, as the bootstrap context's did.
func (l *loader) bootstrapConfigServer(docs []*document, profiles []string) ([]*document, error) {
	if l.imported {
		return docs, nil
	}
	var boot string
	for _, f := range l.files {
		if strings.HasPrefix(filepath.Base(f), "bootstrap.") {
			boot = f
		}
	}
	if boot == "" {
		return docs, nil
	}
	m := newMerger(l.env)
	m.apply(docs, profiles)
	props := newResolver(m.config(), l.env, l.opt.Overrides)
	if prop(props, "spring.cloud.config.uri", "") == "" || strings.EqualFold(prop(props, "spring.cloud.config.enabled", "true"), "false") {
		return docs, nil
	}
	fetched, err := l.fetchConfigServer("optional:configserver:", props, profiles, &document{file: boot})
	if err != nil {
		return nil, err
	}
	return append(docs, fetched...), nil
}

// prop reads a key through the resolver (command line, environment, the
// files), or def.
func prop(r *resolver, key, def string) string {
	v, _, ok, err := r.lookup(key)
	if err != nil || !ok {
		return def
	}
	if out, _, err := r.expand(v, false); err == nil {
		return strings.TrimSpace(out)
	}
	return strings.TrimSpace(v)
}

func propMillis(r *resolver, key string, def int) time.Duration {
	n, err := strconv.Atoi(prop(r, key, strconv.Itoa(def)))
	if err != nil || n < 0 {
		n = def
	}
	return time.Duration(n) * time.Millisecond
}

// fetchConfigServer is one configserver: import: GET
// {uri}/{name}/{profiles}[/{label}] on each URI in turn, with fail-fast
// and retry as spring.cloud.config.* say.
func (l *loader) fetchConfigServer(imp string, r *resolver, profiles []string, parent *document) ([]*document, error) {
	optional := strings.HasPrefix(imp, "optional:")
	uris := strings.TrimPrefix(strings.TrimPrefix(imp, "optional:"), "configserver:")
	if uris == "" {
		uris = prop(r, "spring.cloud.config.uri", defaultConfigServerURI)
	}
	name := prop(r, "spring.cloud.config.name", prop(r, "spring.application.name", "application"))
	profile := strings.Join(profiles, ",")
	if profile == "" {
		profile = prop(r, "spring.cloud.config.profile", "default")
	}
	label := prop(r, "spring.cloud.config.label", "")
	failFast := strings.EqualFold(prop(r, "spring.cloud.config.fail-fast", "false"), "true")
	attempts := 1
	if failFast {
		// Spring retries only with fail-fast (and spring-retry on the
		// classpath, which Muster always has).
		if n, err := strconv.Atoi(prop(r, "spring.cloud.config.retry.max-attempts", "6")); err == nil && n > 0 {
			attempts = n
		}
	}
	interval := propMillis(r, "spring.cloud.config.retry.initial-interval", 1000)
	maxInterval := propMillis(r, "spring.cloud.config.retry.max-interval", 2000)
	multiplier, err := strconv.ParseFloat(prop(r, "spring.cloud.config.retry.multiplier", "1.1"), 64)
	if err != nil || multiplier < 1 {
		multiplier = 1.1
	}
	client := l.httpClient(propMillis(r, "spring.cloud.config.request-connect-timeout", 10000) + propMillis(r, "spring.cloud.config.request-read-timeout", 185000))
	req := configServerRequest{
		name: name, profile: profile,
		user:     prop(r, "spring.cloud.config.username", ""),
		password: prop(r, "spring.cloud.config.password", ""),
		token:    prop(r, "spring.cloud.config.token", ""),
	}
	sleep := l.opt.Sleep
	if sleep == nil {
		sleep = time.Sleep
	}
	var lastErr error
	for attempt := 1; attempt <= attempts; attempt++ {
		if attempt > 1 {
			sleep(interval)
			interval = min(time.Duration(float64(interval)*multiplier), maxInterval)
		}
		// Several servers: ; in the import (its own list is split on
		// commas), commas in spring.cloud.config.uri.
		for _, u := range splitList(strings.ReplaceAll(uris, ";", ",")) {
			// A label list is tried in order, the next one when a label
			// is not found, as Spring Cloud Config's client does.
			for _, lb := range labelsOf(label) {
				q := req
				q.label = lb
				docs, err := q.fetch(client, u)
				if err == nil {
					for _, d := range docs {
						d.parent = parent
					}
					l.files = append(l.files, "configserver:"+redactURL(u)+q.path())
					return docs, nil
				}
				lastErr = err
				if !errors.Is(err, errNotFound) {
					break
				}
			}
		}
	}
	msg := fmt.Sprintf("%s: %s %s: could not read the Config Server: %v", parent.file, importKey, redactImport(imp), lastErr)
	if failFast || !optional {
		why := "the import is not optional"
		if failFast {
			why = fmt.Sprintf("spring.cloud.config.fail-fast is true (%d attempt(s), spring.cloud.config.retry.*)", attempts)
		}
		return nil, fmt.Errorf("%s; %s (write optional:configserver: to start without it)", msg, why)
	}
	l.notes = append(l.notes, msg+"; the import is optional: starting without it")
	return nil, nil
}

// labelsOf splits spring.cloud.config.label's comma list; none is the
// server's default label.
func labelsOf(label string) []string {
	if l := splitList(label); len(l) > 0 {
		return l
	}
	return []string{""}
}

// errNotFound is a Config Server's 404: no such label (or application).
var errNotFound = errors.New("not found")

// configServerRequest is what the client asks a Config Server for.
type configServerRequest struct {
	name, profile, label  string
	user, password, token string
}

// path is /{name}/{profiles}[/{label}], a label's / written (_) as the
// server wants.
func (q configServerRequest) path() string {
	p := "/" + url.PathEscape(q.name) + "/" + url.PathEscape(q.profile)
	if q.label != "" {
		p += "/" + url.PathEscape(strings.ReplaceAll(q.label, "/", "(_)"))
	}
	return p
}

// environment is the Config Server's answer.
type environment struct {
	Name            string   `json:"name"`
	Profiles        []string `json:"profiles"`
	Label           string   `json:"label"`
	Version         string   `json:"version"`
	PropertySources []struct {
		Name   string                     `json:"name"`
		Source map[string]json.RawMessage `json:"source"`
	} `json:"propertySources"`
}

func (q configServerRequest) fetch(client *http.Client, base string) ([]*document, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: want http(s)://host:port", redactURL(base))
	}
	user, password := q.user, q.password
	if u.User != nil {
		// Credentials in the URL win, as in Spring Cloud Config.
		user = u.User.Username()
		password, _ = u.User.Password()
		u.User = nil
	}
	target := strings.TrimSuffix(u.String(), "/") + q.path()
	req, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if user != "" || password != "" {
		req.SetBasicAuth(user, password)
	}
	if q.token != "" {
		req.Header.Set("X-Config-Token", q.token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", target, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxConfigServerBody+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		hint := ""
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			hint = " (credentials: the URL's user:password@ or spring.cloud.config.username/password)"
		case http.StatusNotFound:
			hint = " (no such application, profile or label)"
		}
		if resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("GET %s: %s%s: %w", target, resp.Status, hint, errNotFound)
		}
		return nil, fmt.Errorf("GET %s: %s%s", target, resp.Status, hint)
	}
	if len(body) > maxConfigServerBody {
		return nil, fmt.Errorf("GET %s: answer larger than %d bytes", target, maxConfigServerBody)
	}
	var env environment
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("GET %s: not a Config Server environment: %v", target, err)
	}
	origin := "configserver:" + redactURL(base) + q.path()
	// The first property source wins: apply them last to first.
	docs := make([]*document, 0, len(env.PropertySources))
	for i := len(env.PropertySources) - 1; i >= 0; i-- {
		ps := env.PropertySources[i]
		d := &document{file: origin + " [" + ps.Name + "]"}
		keys := make([]string, 0, len(ps.Source))
		for k := range ps.Source {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			d.entries = append(d.entries, entry{key: k, value: jsonScalar(ps.Source[k])})
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// jsonScalar is a property source value as Spring's environment holds it:
// a string as is, a number or boolean as written, null empty.
func jsonScalar(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	t := strings.TrimSpace(string(raw))
	if t == "null" {
		return ""
	}
	return t
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// redactURL drops a URL's password.
func redactURL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "(unparsable URL)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "******")
		return strings.Replace(u.String(), url.QueryEscape("******"), "******", 1)
	}
	return u.String()
}

func redactImport(imp string) string {
	prefix, rest, ok := strings.Cut(imp, "configserver:")
	if !ok || rest == "" {
		return imp
	}
	var parts []string
	for _, u := range splitList(strings.ReplaceAll(rest, ";", ",")) {
		parts = append(parts, redactURL(u))
	}
	return prefix + "configserver:" + strings.Join(parts, ";")
}
