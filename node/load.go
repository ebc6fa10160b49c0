package node

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/muster-registry/muster/internal/springconf"
)

// Notice is something about the configuration worth logging once the
// logger exists.
type Notice struct {
	Warn bool
	Msg  string
}

const (
	unknownKeysError = "error"
	unknownKeysWarn  = "warn"
)

const (
	serviceURLPrefix = "eureka.client.service-url."
	metadataPrefix   = "eureka.instance.metadata-map."
	authUsersPrefix  = "muster.auth.users."
	// The remote regions' maps (regions.go).
	regionURLsPrefix      = "eureka.server.remote-region-urls-with-name."
	regionWhitelistPrefix = "eureka.server.remote-region-app-whitelist."
)

// mapPrefixes are the keys whose entries are a map's: what follows the
// prefix is the map key, kept as written.
var mapPrefixes = []string{serviceURLPrefix, metadataPrefix, authUsersPrefix, regionURLsPrefix, regionWhitelistPrefix}

// LoadRequest is what a command knows of the configuration: the file, the
// environment, key=value pairs from the command line, and profiles.
type LoadRequest struct {
	File     string
	Env      []string
	Sets     []string
	Profiles []string
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
	if req.File != "" {
		cfg, err := springconf.Load(req.File, springconf.Options{Env: req.Env, Profiles: req.Profiles, Overrides: setValues})
		var perrs springconf.Errors
		switch {
		case errors.As(err, &perrs):
			for _, e := range perrs {
				rep.Errors = append(rep.Errors, e.Error())
			}
		case err != nil:
			rep.Errors = append(rep.Errors, err.Error())
			return nil, rep, err
		}
		rep.Files, rep.Profiles = cfg.Files, cfg.Profiles
		for _, v := range cfg.Values {
			entries = append(entries, layerEntry{key: v.Key, value: v.Value, origin: v.Origin.String(), strict: true, resolved: v.Resolved})
		}
	}
	entries = append(entries, envLayer(req.Env)...)
	entries = append(entries, setEntries...)

	mode := unknownKeysError
	for _, e := range entries {
		if CanonicalKey(e.key) == CanonicalKey("muster.config.unknown-keys") && strings.EqualFold(strings.TrimSpace(e.value), unknownKeysWarn) {
			mode = unknownKeysWarn
		} else if CanonicalKey(e.key) == CanonicalKey("muster.config.unknown-keys") {
			mode = unknownKeysError
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
			err = fmt.Errorf("unknown setting %q", e.key)
		}
		switch {
		case err == nil && target != "":
			merged[target] = chosen{e.value, e.origin}
			explicit[target] = true
			rep.resolved[target] = e.resolved
		case !e.strict:
		case err != nil && mode == unknownKeysWarn:
			rep.Notices = append(rep.Notices, Notice{Warn: true, Msg: e.origin + ": " + err.Error() + " (ignored: muster.config.unknown-keys is warn)"})
			rep.Ignored = append(rep.Ignored, ignoredKey{e.key, maskSecret(e.key, e.value), e.origin, "unknown (muster.config.unknown-keys: warn)"})
		case err != nil:
			rep.Errors = append(rep.Errors, e.origin+": "+err.Error())
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
			rep.Errors = append(rep.Errors, ch.origin+": "+err.Error())
		}
	}
	s.derive()
	if !s.ClientEnabled {
		if len(s.ServiceURLs) > 0 {
			rep.Notices = append(rep.Notices, Notice{Warn: true, Msg: "eureka.client.enabled is false: the static peers of eureka.client.service-url.* are not used"})
		}
		s.ServiceURLs = map[string][]string{}
		s.RegisterWithEureka = false
	}
	if s.authOn() && s.ClusterEnabled && s.PeerSecret == "" && !explicit["cluster.enabled"] {
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
	msg := fmt.Sprintf("unknown setting %q", key)
	if s := suggest(c); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return "", errors.New(msg)
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
