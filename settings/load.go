package settings

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/muster-registry/muster/internal/springconf"
)

// Notice is something about the configuration worth logging once the
// logger exists.
type Notice struct {
	Warn bool
	Msg  string
}

// What an unknown key is (muster.config.unknown-keys): spring, the
// default, does as Spring does: a key under eureka.* or server.* that no
// bean reads is ignored (Spring's property beans ignore fields they do not
// have), with a warning; a key under muster.* or cluster.* is an error.
// error and warn make every unknown key of those namespaces one or the
// other.
const (
	unknownKeysSpring = "spring"
	unknownKeysError  = "error"
	unknownKeysWarn   = "warn"
)

const (
	serviceURLPrefix = "eureka.client.service-url."
	metadataPrefix   = "eureka.instance.metadata-map."
	authUsersPrefix  = "muster.auth.users."
	// trafficAppsPrefix holds the per-app traffic settings (traffic.go).
	trafficAppsPrefix = "muster.traffic.apps."
	// The remote regions' maps (regions.go).
	regionURLsPrefix      = "eureka.server.remote-region-urls-with-name."
	regionWhitelistPrefix = "eureka.server.remote-region-app-whitelist."
)

// mapPrefixes are the keys whose entries are a map's: what follows the
// prefix is the map key, kept as written.
var mapPrefixes = []string{serviceURLPrefix, metadataPrefix, authUsersPrefix, regionURLsPrefix, regionWhitelistPrefix, trafficAppsPrefix}

// LoadRequest is what a command knows of the configuration: the file, the
// environment, key=value pairs from the command line, and profiles.
type LoadRequest struct {
	// File is Spring's spring.config.location: a file, or a comma list of
	// files and folders (optional:, file:). Empty: SPRING_CONFIG_LOCATION
	// of Env, else no file.
	File string
	// AdditionalLocations is spring.config.additional-location (empty:
	// SPRING_CONFIG_ADDITIONAL_LOCATION of Env).
	AdditionalLocations string
	Env                 []string
	Sets                []string
	Profiles            []string
	// HTTPClient and Sleep are for configserver: imports (nil: the
	// loader's own); tests set them.
	HTTPClient *http.Client
	Sleep      func(time.Duration)
}

// Report is everything a load found, for muster config --check:
// the problems (errors and warnings, every one), the keys ignored, and
// the files and profiles read.
type Report struct {
	Errors   []string
	Notices  []Notice
	Ignored  []ignoredKey
	Files    []string
	Profiles []string
	// resolved notes of placeholders, by setting key.
	resolved map[string][]string
}

type ignoredKey struct {
	Key, Value, Origin, Why string
}

// layerEntry is one key as a source gave it.
type layerEntry struct {
	key, value, origin string
	// strict: an unknown key of Muster's namespaces is a problem. The
	// environment's Spring-style names are not strict: the environment
	// holds much that is not for Muster.
	strict bool
	// forMuster: the source names Muster (MUSTER_*), so any key it gives
	// must be known, whatever its namespace.
	forMuster bool
	resolved  []string
}

// LoadSettings builds Settings from the file, the environment and --set;
// its error lists every problem at once, one a line.
func LoadSettings(configFile string, env []string, sets []string) (*Settings, []Notice, error) {
	s, rep, err := Load(LoadRequest{File: configFile, Env: env, Sets: sets})
	if rep == nil {
		return s, nil, err
	}
	return s, rep.Notices, err
}

// Load builds Settings from the layers: built-in defaults, the config
// file as Spring Boot reads it (springconf: documents, profiles, profile
// files, placeholders), the environment (MUSTER_*, and Spring's
// SERVER_*/EUREKA_*/… names when they match a setting), then the command
// line. Every problem is collected; the error, when there is one, lists
// them all, each with where the key was written. The report comes back
// even then (nil only when the command line itself is malformed).
func Load(req LoadRequest) (*Settings, *Report, error) {
	rep := &Report{resolved: map[string][]string{}}
	setValues := map[string]string{}
	var setEntries []layerEntry
	for _, kv := range req.Sets {
		key, value, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(key) == "" {
			return nil, nil, fmt.Errorf("--set %q: want key=value", kv)
		}
		key = strings.TrimSpace(key)
		setValues[key] = value
		setEntries = append(setEntries, layerEntry{key: key, value: value, origin: "command line", strict: true})
	}

	var entries []layerEntry
	referenced := map[string]bool{}
	locations, additional := req.File, req.AdditionalLocations
	for _, kv := range req.Env {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case name == "SPRING_CONFIG_LOCATION" && locations == "":
			locations = value
		case name == "SPRING_CONFIG_ADDITIONALLOCATION" && additional == "", name == "SPRING_CONFIG_ADDITIONAL_LOCATION" && additional == "":
			additional = value
		}
	}
	if locations != "" || additional != "" {
		cfg, err := springconf.Load(locations, springconf.Options{Env: req.Env, Profiles: req.Profiles, Overrides: setValues,
			AdditionalLocations: additional, HTTPClient: req.HTTPClient, Sleep: req.Sleep})
		var perrs springconf.Errors
		switch {
		case errors.As(err, &perrs):
			for _, e := range perrs {
				var pe *springconf.PlaceholderError
				if errors.As(e, &pe) && !placeholderMatters(pe.Key) {
					// Spring's binder leaves an unresolvable placeholder as
					// written; a key Muster does not read cannot hurt.
					rep.Notices = append(rep.Notices, Notice{Warn: true, Msg: e.Error() + "; left as written, as Spring's binder does (Muster does not read " + pe.Key + ")"})
					continue
				}
				rep.Errors = append(rep.Errors, e.Error())
			}
		case err != nil:
			rep.Errors = append(rep.Errors, err.Error())
			return nil, rep, err
		}
		rep.Files, rep.Profiles = cfg.Files, cfg.Profiles
		for _, n := range cfg.Notes {
			rep.Notices = append(rep.Notices, Notice{Warn: true, Msg: n})
		}
		for k := range cfg.Referenced {
			referenced[CanonicalKey(k)] = true
		}
		for _, v := range cfg.Values {
			entries = append(entries, layerEntry{key: v.Key, value: v.Value, origin: v.Origin.String(), strict: true, resolved: v.Resolved})
		}
	}
	entries = append(entries, envLayer(req.Env)...)
	entries = append(entries, setEntries...)

	mode := unknownKeysSpring
	for _, e := range entries {
		if CanonicalKey(e.key) == CanonicalKey("muster.config.unknown-keys") {
			switch v := strings.ToLower(strings.TrimSpace(e.value)); v {
			case unknownKeysError, unknownKeysWarn, unknownKeysSpring:
				mode = v
			}
		}
	}

	type chosen struct{ value, origin string }
	merged := map[string]chosen{}
	explicit := map[string]bool{}
	warned := map[string]bool{}
	for _, e := range entries {
		c := CanonicalKey(e.key)
		target, err := resolveKey(e.key)
		if _, spring := springKeyOf(c); e.forMuster && err == nil && target == "" && !spring {
			err = unknownKeyError(e.key, c)
		}
		switch {
		case err == nil && target != "":
			merged[target] = chosen{e.value, e.origin}
			explicit[target] = true
			rep.resolved[target] = e.resolved
		case !e.strict:
		case err != nil && referenced[c] && !e.forMuster:
			// An application's own key, read through ${…} elsewhere in
			// the file: meant, not a typo.
			rep.Ignored = append(rep.Ignored, ignoredKey{e.key, maskSecret(e.key, e.value), e.origin, "read only by placeholders"})
			rep.Notices = append(rep.Notices, Notice{Msg: e.origin + ": " + e.key + ": not a Muster key; read by a ${" + e.key + "} placeholder"})
		case err != nil && unknownKeyWarns(mode, c, e.forMuster):
			rep.Notices = append(rep.Notices, Notice{Warn: true, Msg: e.origin + ": " + err.Error() + ": ignored, " + unknownKeyHint(mode, c, e.forMuster)})
			rep.Ignored = append(rep.Ignored, ignoredKey{e.key, maskSecret(e.key, e.value), e.origin, "unknown (muster.config.unknown-keys: " + mode + ")"})
		case err != nil:
			rep.Errors = append(rep.Errors, e.origin+": "+err.Error()+"; "+unknownKeyHint(mode, c, e.forMuster))
		default:
			why, warn := whyIgnored(c)
			rep.Ignored = append(rep.Ignored, ignoredKey{e.key, maskSecret(e.key, e.value), e.origin, why})
			if warn && !warned[c] {
				warned[c] = true
				rep.Notices = append(rep.Notices, Notice{Warn: true, Msg: e.origin + ": " + e.key + " is accepted but not used: " + why})
			} else if !warn {
				rep.Notices = append(rep.Notices, Notice{Msg: e.origin + ": " + e.key + ": " + why})
			}
		}
	}

	d := defaultSettings()
	s := &d
	s.explicit = explicit
	targets := make([]string, 0, len(merged))
	for k := range merged {
		targets = append(targets, k)
	}
	sort.Strings(targets)
	for _, key := range targets {
		ch := merged[key]
		s.origin[key] = ch.origin
		if err := applyValue(s, key, ch.value); err != nil {
			msg := ch.origin + ": " + err.Error()
			if tok := mavenTokenRE.FindString(ch.value); tok != "" {
				msg += fmt.Sprintf(" (%s is an unfiltered Maven token: the file needs Maven resource filtering)", tok)
			}
			rep.Errors = append(rep.Errors, msg)
		}
	}
	s.derive()
	// Spring Cloud's instance URLs follow the actuator's base path.
	if base := strings.TrimSuffix(s.HTTP.Actuator.BasePath, "/"); explicit["management.endpoints.web.base-path"] {
		if !explicit["eureka.instance.status-page-url-path"] {
			s.InstanceStatusPagePath = base + "/info"
		}
		if !explicit["eureka.instance.health-check-url-path"] {
			s.InstanceHealthCheckPath = base + "/health"
		}
	}
	if s.SpringUserPassword != "" && s.SpringUserName == "" && !explicit["spring.security.user.name"] {
		// Spring Boot's SecurityProperties: the user is "user" unless named.
		s.SpringUserName = "user"
		s.origin["spring.security.user.name"] = "default (Spring Boot's user name, as a password is set)"
	}
	if !s.ClientEnabled {
		if len(s.ServiceURLs) > 0 {
			rep.Notices = append(rep.Notices, Notice{Warn: true, Msg: "eureka.client.enabled is false: the static peers of eureka.client.service-url.* are not used"})
		}
		s.ServiceURLs = map[string][]string{}
		s.RegisterWithEureka = false
	}
	if s.AuthOn() && s.ClusterEnabled && s.PeerSecret == "" && !explicit["cluster.enabled"] {
		// A Spring file with a password names its peers in
		// eureka.client.service-url (with credentials in the URLs); gossip
		// without a peer secret would let any host that reaches the port
		// replicate into this node. So gossip stays off unless asked for.
		s.ClusterEnabled = false
		s.origin["cluster.enabled"] = "turned off: users configured, no cluster.peer-secret"
		rep.Notices = append(rep.Notices, Notice{Warn: true, Msg: "gossip clustering is off: users are configured (spring.security.user.* or muster.auth.users.*) and cluster.peer-secret is not; " +
			"static peers of eureka.client.service-url.* still replicate with the credentials in their URLs. For gossip, set the same cluster.peer-secret on every node"})
	}
	resolveResources(s, rep, req.File) // classpath: and file: (resources.go)
	if len(rep.Errors) == 0 {
		if err := s.validate(); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
	}
	if len(rep.Errors) > 0 {
		return s, rep, errors.New(strings.Join(rep.Errors, "\n"))
	}
	return s, rep, nil
}

// mavenTokenRE is a Maven resource-filtering token (@project.version@)
// left in a value: a .properties file or a quoted YAML value reads it as
// text, which no setting takes.
var mavenTokenRE = regexp.MustCompile(`@[A-Za-z0-9_.\-]+@`)

// placeholderMatters tells whether an unresolved placeholder in key stops
// the start: it does in a setting Muster reads (a peer URL of
// ${EUREKA_PEERS} would be a broken peer), but not in a metadata entry
// (registered as written, as Spring does) or a key Muster does not read.
func placeholderMatters(key string) bool {
	target, err := resolveKey(key)
	return err == nil && target != "" && !strings.HasPrefix(target, metadataPrefix)
}

// resolveKey maps a key as written by the user to the key of a setting
// (or of a map entry: a zone, a metadata key, a user); to "" without error
// for a key Muster accepts and does not read (whyIgnored says why); and to
// an error, with a did-you-mean, for an unknown key of Muster's
// namespaces.
func resolveKey(key string) (string, error) {
	c := CanonicalKey(key)
	if st, ok := settingByCanonical[c]; ok && st.apply != nil {
		return st.Key, nil
	}
	for alias, target := range springAliases {
		if c == CanonicalKey(alias) {
			return target, nil
		}
	}
	for _, prefix := range mapPrefixes {
		if cp := CanonicalKey(prefix); strings.HasPrefix(c, cp) && len(c) > len(cp) {
			// Keep the map key as written: zone names and metadata keys are
			// case-sensitive.
			return prefix + mapKeySuffix(key, strings.Count(prefix, ".")), nil
		}
	}
	if _, ok := springKeyOf(c); ok || isLoaderKey(c) || !inMusterNamespace(c) {
		return "", nil
	}
	return "", unknownKeyError(key, c)
}

// unknownKeyError names an unknown key and the known key closest to it.
func unknownKeyError(key, c string) error {
	msg := fmt.Sprintf("unknown setting %q", key)
	if s := suggest(c); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return errors.New(msg)
}

// springNamespace tells whether a key is under a namespace whose Spring
// beans ignore the fields they do not have (eureka.*, server.*).
func springNamespace(c string) bool {
	return strings.HasPrefix(c, "eureka.") || strings.HasPrefix(c, "server.")
}

// unknownKeyWarns tells whether an unknown key is a warning in this mode:
// forMuster keys (MUSTER_* variables) name Muster itself, so they are
// never Spring's.
func unknownKeyWarns(mode, c string, forMuster bool) bool {
	switch mode {
	case unknownKeysWarn:
		return true
	case unknownKeysError:
		return false
	}
	return springNamespace(c) && !forMuster
}

// unknownKeyHint says why an unknown key is an error or a warning, and
// which value of muster.config.unknown-keys makes it the other.
func unknownKeyHint(mode, c string, forMuster bool) string {
	switch {
	case mode == unknownKeysWarn:
		return "as muster.config.unknown-keys is warn (error or spring refuses it)"
	case mode == unknownKeysError:
		return "every unknown key is an error as muster.config.unknown-keys is error (warn, or spring for Spring's rule, starts anyway)"
	case springNamespace(c) && !forMuster:
		return "as Spring ignores a property its bean does not have (muster.config.unknown-keys: error refuses it)"
	}
	return "keys of Muster's own namespaces (muster.*, cluster.*, MUSTER_*) must be known (muster.config.unknown-keys: warn starts anyway)"
}

// whyIgnored says why an accepted key is not read, and whether that is
// worth a warning: a Spring key Muster has no use for is (its file meant
// something by it), a key of another namespace is not, unless it is close
// to a setting of Muster's (managment.server.port).
func whyIgnored(c string) (why string, warn bool) {
	if key, ok := springKeyOf(c); ok {
		why := springKeys[key]
		if why == "" {
			why = "it has no meaning in Muster"
		}
		return why, true
	}
	if isLoaderKey(c) {
		return "read by the loader (profiles, documents)", false
	}
	if s := suggest(c); s != "" && editDistance(c, CanonicalKey(s)) <= 2 {
		return fmt.Sprintf("not a Muster key, ignored (did you mean %q?)", s), true
	}
	return "not a Muster key, ignored", false
}

// envLayer reads the environment. MUSTER_SERVER_PORT and friends must name
// a setting (unknown ones are errors, so a typo does not go unnoticed);
// muster.* settings may drop their prefix (MUSTER_LOG_LEVEL). The variables
// Kubernetes' service links make for a Service named muster (MUSTER_PORT…,
// MUSTER_SERVICE_…) are not settings and are left alone. Spring-style names
// without the prefix (SERVER_PORT, EUREKA_SERVER_ENABLESELFPRESERVATION,
// EUREKA_CLIENT_SERVICEURL_DEFAULTZONE, CLUSTER_JOIN) are taken when they
// match a setting and ignored otherwise, since the environment holds much
// that is not for Muster. The entries are in name order.
func envLayer(env []string) []layerEntry {
	var lenient, strict []layerEntry
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		origin := "environment " + name
		switch {
		case name == "MUSTER_PORT", strings.HasPrefix(name, "MUSTER_PORT_"), strings.HasPrefix(name, "MUSTER_SERVICE_"):
		case strings.HasPrefix(name, "MUSTER_"):
			strict = append(strict, layerEntry{key: envKey(strings.TrimPrefix(name, "MUSTER_")), value: value, origin: origin, strict: true, forMuster: true})
		case strings.HasPrefix(name, "SERVER_"), strings.HasPrefix(name, "EUREKA_"),
			strings.HasPrefix(name, "CLUSTER_"), name == "SPRING_APPLICATION_NAME",
			name == "SPRING_SECURITY_USER_NAME", name == "SPRING_SECURITY_USER_PASSWORD":
			lenient = append(lenient, layerEntry{key: envKey(name), value: value, origin: origin})
		}
	}
	byName := func(l []layerEntry) {
		sort.Slice(l, func(i, j int) bool { return l[i].origin < l[j].origin })
	}
	byName(lenient)
	byName(strict)
	return append(lenient, strict...)
}
