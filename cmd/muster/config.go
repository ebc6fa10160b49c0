package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"github.com/muster-registry/muster/registry/persist"
)

// Settings is the whole configuration of a node, after defaults, the
// config file, the environment and --set flags, in that order.
type Settings struct {
	ServerPort    int
	ServerAddress string
	AppName       string
	Environment   string
	Datacenter    string

	SelfPreservation               bool
	RenewalPercentThreshold        float64
	ExpectedClientRenewalInterval  time.Duration
	RenewalThresholdUpdateInterval time.Duration
	EvictionInterval               time.Duration
	DeltaRetention                 time.Duration
	DeltaRetentionInterval         time.Duration
	DisableDelta                   bool
	SyncWhenTimestampDiffers       bool
	MeasuredRateWindow             time.Duration

	RegistrySyncRetries   int
	RegistrySyncRetryWait time.Duration
	WaitWhenSyncEmpty     time.Duration

	MaxReplicationQueue int
	MaxTimeReplication  time.Duration
	AntiEntropyInterval time.Duration
	PeerConnectTimeout  time.Duration
	PeerReadTimeout     time.Duration

	RegisterWithEureka bool
	ServiceURLs        map[string][]string // zone → Eureka base URLs of static peers

	InstanceHostname        string
	InstanceIPAddress       string
	InstancePreferIP        bool
	InstanceID              string
	InstanceRenewalInterval int // seconds
	InstanceLeaseDuration   int // seconds
	InstanceMetadata        map[string]string

	MaxBodyBytes      int64
	MaxBatchBodyBytes int64
	LogLevel          string
	LogFormat         string
	ShutdownTimeout   time.Duration
	DashboardActions  string // muster.dashboard.actions-without-auth

	DataDir          string
	SnapshotInterval time.Duration
	ClusterName      string
	ColdStartWait    time.Duration

	ClusterEnabled       bool
	ClusterNodeName      string
	ClusterBindAddr      string
	ClusterBindPort      int
	ClusterAdvertiseAddr string
	ClusterAdvertisePort int
	ClusterJoin          []string
	ClusterSecretKey     string
	ClusterZone          string

	// TLS and the gossip keyring (tlsnode.go). explicit lists the keys the
	// file, the environment or --set gave, so that server.ssl.enabled=true
	// alone is noticed.
	SSLEnabled        bool
	SSLCertificate    string
	SSLKey            string
	SSLTrust          string
	SSLClientAuth     string
	ClusterSecretKeys []string
	explicit          map[string]bool
	// Limits (issue 10): see README "Limits".
	BodyReadTimeout    time.Duration
	WriteChunkTimeout  time.Duration
	MaxConnections     int
	MaxInstances       int
	MaxInstancesPerApp int
	MaxMetadataEntries int
	MaxMetadataBytes   int
	MaxNameLength      int
	MaxClockSkew       time.Duration
	MaxSyncBodyBytes   int64
	// Watches (issue 13): blocking fetches and the watch stream.
	WatchMaxWait     time.Duration
	WatchMaxWatchers int
	// Security (security.go): users, roles, peer signatures.
	SpringUserName     string
	SpringUserPassword string
	AuthUsers          map[string]*userSettings // muster.auth.users.<name>
	PeerSecret         string
	PeerMaxClockSkew   time.Duration
}

// setting is one configuration key: its Spring-style name, its default as
// a user would write it, what it does, and how it is applied.
type setting struct {
	Key     string
	Default string
	Help    string
	apply   func(s *Settings, raw string) error
}

// settings lists every key Muster reads. README's configuration table is
// checked against it by a test.
var settings = []setting{
	intKey("server.port", 8761, 0, 65535, "HTTP port of the Eureka API, the dashboard and /metrics (0 picks a free port).", func(s *Settings) *int { return &s.ServerPort }),
	strKey("server.address", "", "Address the HTTP server binds; empty means every interface.", func(s *Settings) *string { return &s.ServerAddress }),
	// TLS with Spring Boot's PEM keys (tlsnode.go): as in Spring, TLS is on
	// once any server.ssl.* key is given, unless enabled is false.
	boolKey("server.ssl.enabled", true, "TLS on the API port (Spring's default true: TLS is on once any server.ssl.* key is set; false turns it off). The advertised URL becomes https and peers are called over TLS.", func(s *Settings) *bool { return &s.SSLEnabled }),
	strKey("server.ssl.certificate", "", "PEM certificate (chain) of the node, served to clients and presented to peers; re-read when it changes on disk.", func(s *Settings) *string { return &s.SSLCertificate }),
	strKey("server.ssl.certificate-private-key", "", "PEM private key of server.ssl.certificate (PKCS#8, EC or RSA).", func(s *Settings) *string { return &s.SSLKey }),
	strKey("server.ssl.trust-certificate", "", "PEM CA bundle: client certificates and peers' certificates are verified against it (empty: peers against the system roots). Required for client-auth want and need.", func(s *Settings) *string { return &s.SSLTrust }),
	enumKey("server.ssl.client-auth", "none", []string{"none", "want", "need"}, "Client certificates: none asks for none; want verifies one when sent; need refuses the handshake without a certificate from the trust bundle (mutual TLS, between peers too).", func(s *Settings) *string { return &s.SSLClientAuth }),
	strKey("spring.application.name", "muster", "Application name the node registers itself under (see eureka.client.register-with-eureka).", func(s *Settings) *string { return &s.AppName }),
	strKey("eureka.environment", "test", "Environment label shown on the dashboard.", func(s *Settings) *string { return &s.Environment }),
	strKey("eureka.datacenter", "default", "Data center label shown on the dashboard.", func(s *Settings) *string { return &s.Datacenter }),

	boolKey("eureka.server.enable-self-preservation", true, "Keep expired leases while renewals are below the threshold (the network, not the instances, is assumed to have failed).", func(s *Settings) *bool { return &s.SelfPreservation }),
	floatKey("eureka.server.renewal-percent-threshold", 0.85, "Share of the expected renewals below which self-preservation stops eviction; also caps an eviction run at size − ⌊size × this⌋.", func(s *Settings) *float64 { return &s.RenewalPercentThreshold }),
	secondsKey("eureka.server.expected-client-renewal-interval-seconds", 30, "Heartbeat interval assumed for instances that send no leaseInfo.renewalIntervalInSecs.", func(s *Settings) *time.Duration { return &s.ExpectedClientRenewalInterval }),
	msKey("eureka.server.renewal-threshold-update-interval-ms", 900000, "How often the expected renewals are recounted from the live leases (never lowered by more than the threshold share at once).", func(s *Settings) *time.Duration { return &s.RenewalThresholdUpdateInterval }),
	msKey("eureka.server.eviction-interval-timer-in-ms", 60000, "How often expired leases are evicted.", func(s *Settings) *time.Duration { return &s.EvictionInterval }),
	msKey("eureka.server.retention-time-in-m-s-in-delta-queue", 180000, "How long a change stays in GET /apps/delta.", func(s *Settings) *time.Duration { return &s.DeltaRetention }),
	msKey("eureka.server.delta-retention-timer-interval-in-ms", 30000, "How often old changes are pruned from the delta.", func(s *Settings) *time.Duration { return &s.DeltaRetentionInterval }),
	boolKey("eureka.server.disable-delta", false, "Answer GET /apps/delta with 403, so clients always fetch the full registry.", func(s *Settings) *bool { return &s.DisableDelta }),
	boolKey("eureka.server.sync-when-timestamp-differs", true, "Compare lastDirtyTimestamp on heartbeats: 404 asks a client with newer data to register again, 409 hands a peer our newer copy.", func(s *Settings) *bool { return &s.SyncWhenTimestampDiffers }),
	intKey("eureka.server.registry-sync-retries", 5, 0, 1000, "Attempts to copy the registry from a peer at start-up (syncUp) before opening for traffic.", func(s *Settings) *int { return &s.RegistrySyncRetries }),
	msKey("eureka.server.registry-sync-retry-wait-ms", 2000, "Wait between syncUp attempts (Eureka's 30 s makes start-up slow).", func(s *Settings) *time.Duration { return &s.RegistrySyncRetryWait }),
	msKey("eureka.server.wait-time-in-ms-when-sync-empty", 300000, "When peers are known but none could be reached at start-up, refuse registry reads (403) this long so clients use a peer that knows.", func(s *Settings) *time.Duration { return &s.WaitWhenSyncEmpty }),
	intKey("eureka.server.max-elements-in-peer-replication-pool", 10000, 1, 10_000_000, "Replication tasks queued per peer; beyond it the oldest heartbeats are dropped first (counted in metrics).", func(s *Settings) *int { return &s.MaxReplicationQueue }),
	msKey("eureka.server.max-time-for-replication", 30000, "Age after which a queued cancel or status replication task is dropped.", func(s *Settings) *time.Duration { return &s.MaxTimeReplication }),
	msKey("eureka.server.peer-node-connect-timeout-ms", 1000, "Connect timeout of replication requests to peers.", func(s *Settings) *time.Duration { return &s.PeerConnectTimeout }),
	msKey("eureka.server.peer-node-read-timeout-ms", 5000, "Timeout of a replication batch request to a peer.", func(s *Settings) *time.Duration { return &s.PeerReadTimeout }),

	boolKey("eureka.client.register-with-eureka", false, "Register the node itself as an instance of spring.application.name and renew like any client.", func(s *Settings) *bool { return &s.RegisterWithEureka }),
	{Key: "eureka.client.service-url.<zone>", Default: "", Help: "Comma-separated Eureka base URLs of static peers (e.g. a Java Eureka server during a migration), by zone; added to the memberlist members."},

	strKey("eureka.instance.hostname", "", "Host name the node advertises (self-registration and its Eureka URL for peers); empty means the machine's host name.", func(s *Settings) *string { return &s.InstanceHostname }),
	strKey("eureka.instance.ip-address", "", "IP address the node advertises; empty means the address memberlist advertises, or the first non-loopback address.", func(s *Settings) *string { return &s.InstanceIPAddress }),
	boolKey("eureka.instance.prefer-ip-address", false, "Advertise the IP address instead of the host name in the node's Eureka URL.", func(s *Settings) *bool { return &s.InstancePreferIP }),
	strKey("eureka.instance.instance-id", "", "Instance id of the node's self-registration; empty means host:app:port, as Spring does.", func(s *Settings) *string { return &s.InstanceID }),
	intKey("eureka.instance.lease-renewal-interval-in-seconds", 30, 1, 3600, "Heartbeat interval of the node's self-registration.", func(s *Settings) *int { return &s.InstanceRenewalInterval }),
	intKey("eureka.instance.lease-expiration-duration-in-seconds", 90, 1, 86400, "Lease duration of the node's self-registration.", func(s *Settings) *int { return &s.InstanceLeaseDuration }),
	{Key: "eureka.instance.metadata-map.<key>", Default: "", Help: "Metadata of the node's self-registration."},

	msKey("muster.measured-rate-window-ms", 60000, "Length of the window that counts renewals for self-preservation; figures are still reported per minute. Short windows suit tests.", func(s *Settings) *time.Duration { return &s.MeasuredRateWindow }),
	int64Key("muster.max-body-bytes", 1<<20, "Largest request body a client may send (413 beyond).", func(s *Settings) *int64 { return &s.MaxBodyBytes }),
	int64Key("muster.max-batch-body-bytes", 16<<20, "Largest peer replication batch accepted.", func(s *Settings) *int64 { return &s.MaxBatchBodyBytes }),
	enumKey("muster.log.level", "info", []string{"trace", "debug", "info", "warn", "error"}, "Log level.", func(s *Settings) *string { return &s.LogLevel }),
	enumKey("muster.log.format", "auto", []string{"auto", "console", "json"}, "Log format: auto is console on a terminal and JSON otherwise.", func(s *Settings) *string { return &s.LogFormat }),
	enumKey("muster.dashboard.actions-without-auth", "loopback", []string{"loopback", "any", "none"}, "Who may use the dashboard's actions (out of service, up, remove override, cancel) while authentication is off: loopback clients only, any client (like the open API), or nobody. With authentication on, admin users may, whatever this says.", func(s *Settings) *string { return &s.DashboardActions }),
	msKey("muster.shutdown-timeout-ms", 10000, "How long a graceful shutdown may take (finishing requests, cancelling the self-registration, leaving the cluster).", func(s *Settings) *time.Duration { return &s.ShutdownTimeout }),
	strKey("muster.data-dir", "", "Directory where the node keeps a snapshot of its registry (registry.snapshot), written periodically and on shutdown, and loaded at start when no peer has the registry. Empty: no snapshot.", func(s *Settings) *string { return &s.DataDir }),
	msOrZeroKey("muster.anti-entropy-interval-ms", 10000, "How often the node compares its registry with each Muster peer's (digests, then only what differs) and repairs what it lacks or holds older, ±20 % jitter; a peer that joins or comes back gets a round at once. 0 turns anti-entropy off. Cancels' tombstones are kept lease + max(30 s, this).", func(s *Settings) *time.Duration { return &s.AntiEntropyInterval }),
	msKey("muster.snapshot-interval-ms", 30000, "How often the registry snapshot is written to muster.data-dir (skipped when nothing changed).", func(s *Settings) *time.Duration { return &s.SnapshotInterval }),
	strKey("muster.cluster-name", "muster", "Name of the cluster, written into registry snapshots: a snapshot written by another cluster is refused.", func(s *Settings) *string { return &s.ClusterName }),
	msOrZeroKey("muster.cold-start-wait-ms", 35000, "After a full cluster restart (peers known, none with the registry, no snapshot), refuse registry reads (403) and /readyz this long, so live clients re-register first: one client renewal interval (30 s) plus 5 s. 0 serves the empty registry at once.", func(s *Settings) *time.Duration { return &s.ColdStartWait }),

	boolKey("cluster.enabled", true, "Run memberlist to find peers. Off: a standalone node (static peers from eureka.client.service-url.* still replicate).", func(s *Settings) *bool { return &s.ClusterEnabled }),
	strKey("cluster.node-name", "", "Unique node name in the cluster; empty means the host name.", func(s *Settings) *string { return &s.ClusterNodeName }),
	strKey("cluster.bind-addr", "0.0.0.0", "Address memberlist binds (TCP and UDP).", func(s *Settings) *string { return &s.ClusterBindAddr }),
	intKey("cluster.bind-port", 7946, 0, 65535, "Port memberlist binds.", func(s *Settings) *int { return &s.ClusterBindPort }),
	strKey("cluster.advertise-addr", "", "Address other nodes use to reach this one; empty lets memberlist pick.", func(s *Settings) *string { return &s.ClusterAdvertiseAddr }),
	intKey("cluster.advertise-port", 0, 0, 65535, "Port other nodes use to reach this one; 0 means the bind port.", func(s *Settings) *int { return &s.ClusterAdvertisePort }),
	listKey("cluster.join", "Seed nodes (host:port, comma-separated or a list); retried in the background until one answers, so nodes may start in any order.", func(s *Settings) *[]string { return &s.ClusterJoin }),
	strKey("cluster.secret-key", "", "Base64 key (16, 24 or 32 bytes) encrypting gossip; nodes with different keys do not join.", func(s *Settings) *string { return &s.ClusterSecretKey }),
	listKey("cluster.secret-keys", "More base64 gossip keys accepted besides cluster.secret-key, which alone is used for sending: for rotating the key without a cluster restart (README, Securing a cluster).", func(s *Settings) *[]string { return &s.ClusterSecretKeys }),
	// Limits: what one client, connection or peer can make a node hold.
	msKey("muster.body-read-timeout-ms", 30000, "Time a request body has to arrive, after its headers; slower bodies get 408 and their connection is closed.", func(s *Settings) *time.Duration { return &s.BodyReadTimeout }),
	msKey("muster.write-chunk-timeout-ms", 30000, "Time a client has to take each 128 KiB of a response; the deadline moves with progress, so a slow but reading client gets any payload, a stalled one is dropped.", func(s *Settings) *time.Duration { return &s.WriteChunkTimeout }),
	intKey("muster.max-connections", 100000, 1, 10_000_000, "Open HTTP connections at most; further ones wait until one closes (open ones keep working).", func(s *Settings) *int { return &s.MaxConnections }),
	intKey("muster.max-instances", 1_000_000, 1, 1_000_000_000, "Instances the node holds at most; a new instance beyond it gets 503.", func(s *Settings) *int { return &s.MaxInstances }),
	intKey("muster.max-instances-per-app", 100_000, 1, 1_000_000_000, "Instances of one app at most; a new instance beyond it gets 403.", func(s *Settings) *int { return &s.MaxInstancesPerApp }),
	intKey("muster.max-metadata-entries", 512, 1, 1_000_000, "Metadata entries of one instance at most (metadata and dataCenterInfo metadata each); beyond it 400.", func(s *Settings) *int { return &s.MaxMetadataEntries }),
	intKey("muster.max-metadata-bytes", 64<<10, 1, 1<<30, "Bytes of one instance's metadata keys and values at most; beyond it 400.", func(s *Settings) *int { return &s.MaxMetadataBytes }),
	intKey("muster.max-name-length", 1024, 1, 1<<20, "Bytes of an app name, instance id, host name, VIP address or any other single-valued instance field at most; beyond it 400.", func(s *Settings) *int { return &s.MaxNameLength }),
	msKey("muster.max-clock-skew-ms", 300000, "How far in the future a lastDirtyTimestamp may be; beyond it 400 (a far-future one would pin the record against its owner).", func(s *Settings) *time.Duration { return &s.MaxClockSkew }),
	msKey("muster.watch.max-wait-ms", 60000, "Longest wait a blocking fetch may ask for (index and wait on GET apps, apps/delta, apps/{app}, vips, svips); a longer wait is clamped to it.", func(s *Settings) *time.Duration { return &s.WatchMaxWait }),
	intKey("muster.watch.max-watchers", 50_000, 0, 10_000_000, "Blocking fetches held and watch streams open at once, at most; beyond it a blocking fetch is answered at once as if it had no wait, and a watch stream gets 503. 0: no limit.", func(s *Settings) *int { return &s.WatchMaxWatchers }),
	int64Key("muster.max-sync-body-bytes", 2<<30, "Largest registry read from a peer at start-up (syncUp); a larger one fails the attempt.", func(s *Settings) *int64 { return &s.MaxSyncBodyBytes }),

	strKey("spring.security.user.name", "", "User name of the admin; with spring.security.user.password it turns HTTP Basic authentication on (see Securing a cluster).", func(s *Settings) *string { return &s.SpringUserName }),
	strKey("spring.security.user.password", "", "Password of the admin: plain, {noop}plain or {bcrypt}$2a$… (Spring's encoder prefixes).", func(s *Settings) *string { return &s.SpringUserPassword }),
	{Key: "muster.auth.users.<name>.password", Default: "", Help: "Password of a further user (same encodings); also turns authentication on."},
	{Key: "muster.auth.users.<name>.role", Default: "", Help: "Role of that user, required: read (GET on the Eureka API, dashboard, /metrics), write (read + register, renew, cancel, status, metadata) or admin (everything, /admin/* and peer batches without a peer secret)."},
	{Key: "muster.auth.users.<name>.apps", Default: "", Help: "Apps a write user may change (comma-separated or a list); empty means every app. Others get 403."},
	strKey("cluster.peer-secret", "", "Shared secret (16+ characters) with which nodes sign replication batches and syncUp fetches (HMAC-SHA256); it never travels. Required when authentication is on and cluster.enabled is true.", func(s *Settings) *string { return &s.PeerSecret }),
	msKey("cluster.peer-max-clock-skew-ms", 30000, "How far a peer signature's timestamp may be from this node's clock; older or newer ones are refused, and accepted ones are remembered this long so they cannot be replayed.", func(s *Settings) *time.Duration { return &s.PeerMaxClockSkew }),
	strKey("cluster.zone", "default", "Availability zone of the node: gossiped to peers, shown on the dashboard; syncUp prefers peers of the same zone.", func(s *Settings) *string { return &s.ClusterZone }),
}

// Eureka settings that are valid in a Spring application.yml but have no
// meaning in Muster. They are accepted with a warning, so an existing file
// works; anything else unknown under eureka.* is a typo and stops start-up.
var ignoredEurekaKeys = map[string]string{
	"eureka.server.use-read-only-response-cache":              "Muster has no read-only cache: reads see writes at once",
	"eureka.server.response-cache-update-interval-ms":         "Muster has no read-only cache: reads see writes at once",
	"eureka.server.response-cache-auto-expiration-in-seconds": "payloads are re-encoded on change, not on a timer",
	"eureka.server.initial-capacity-of-response-cache":        "sizing of Eureka's cache",
	"eureka.server.peer-eureka-nodes-update-interval-ms":      "peers come from memberlist as they join and leave",
	"eureka.server.max-threads-for-peer-replication":          "one sender per peer sends batches by back-pressure",
	"eureka.server.min-threads-for-peer-replication":          "one sender per peer sends batches by back-pressure",
	"eureka.server.batch-replication":                         "replication is always batched",
	"eureka.server.number-of-replication-retries":             "unused in Eureka as well",
	"eureka.server.enable-replicated-request-compression":     "not implemented",
	"eureka.server.my-url":                                    "peers are told apart by node identity",
	"eureka.server.wait-time-in-ms-when-sync-empty-dashboard": "",
	"eureka.client.fetch-registry":                            "the node holds the whole registry itself",
	"eureka.client.registry-fetch-interval-seconds":           "the node holds the whole registry itself",
	"eureka.client.prefer-same-zone-eureka":                   "syncUp always prefers the same zone",
	"eureka.client.region":                                    "no remote regions",
	"eureka.client.availability-zones":                        "the zone is cluster.zone",
	"eureka.instance.appname":                                 "the app name is spring.application.name",
	"eureka.instance.non-secure-port":                         "the port is server.port",
}

// Namespaces of Spring Boot settings a shared application.yml may carry;
// Muster does not read them and says so at debug level.
var foreignPrefixes = []string{"spring.", "management.", "logging.", "info.", "endpoints.", "springdoc.", "hystrix.", "ribbon.", "feign."}

// canonical folds a key for Spring's relaxed binding: case and dashes do
// not matter, so enableSelfPreservation, enable-self-preservation and
// ENABLE_SELF_PRESERVATION name the same setting.
func canonical(key string) string {
	key = strings.ToLower(key)
	return strings.NewReplacer("-", "", "_", "").Replace(key)
}

var settingByCanonical = func() map[string]*setting {
	m := map[string]*setting{}
	for i := range settings {
		m[canonical(settings[i].Key)] = &settings[i]
	}
	return m
}()

var ignoredByCanonical = func() map[string]string {
	m := map[string]string{}
	for k, why := range ignoredEurekaKeys {
		m[canonical(k)] = k + ": " + why
	}
	return m
}()

// Notice is something about the configuration worth logging once the
// logger exists.
type Notice struct {
	Warn bool
	Msg  string
}

// configLayer is one source of settings; in a strict layer unknown keys
// are errors.
type configLayer struct {
	source string
	values map[string]any
	strict bool
}

// loadSettings builds Settings from the layers: built-in defaults, the
// config file (YAML, JSON or Java properties), the environment (MUSTER_*,
// and Spring's SERVER_*/EUREKA_*/SPRING_APPLICATION_NAME/CLUSTER_* names
// when they match a setting), then --set key=value. Unknown keys and bad
// values are errors that name the key and where it came from.
func loadSettings(configFile string, env []string, sets []string) (*Settings, []Notice, error) {
	k := koanf.New(".")
	var notices []Notice

	defaults := map[string]any{}
	for _, st := range settings {
		if st.apply != nil {
			defaults[st.Key] = st.Default
		}
	}
	if err := k.Load(confmap.Provider(defaults, "."), nil); err != nil {
		return nil, nil, err
	}

	explicit := map[string]bool{}
	var layers []configLayer
	if configFile != "" {
		values, err := readConfigFile(configFile)
		if err != nil {
			return nil, nil, err
		}
		layers = append(layers, configLayer{configFile, values, true})
	}
	envLenient, envStrict := envLayer(env)
	layers = append(layers, configLayer{"environment", envLenient, false}, configLayer{"environment", envStrict, true})
	setValues := map[string]any{}
	for _, kv := range sets {
		key, value, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(key) == "" {
			return nil, nil, fmt.Errorf("--set %q: want key=value", kv)
		}
		setValues[strings.TrimSpace(key)] = value
	}
	layers = append(layers, configLayer{"--set", setValues, true})

	for _, layer := range layers {
		resolved := map[string]any{}
		keys := make([]string, 0, len(layer.values))
		for key := range layer.values {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		for _, key := range keys {
			target, note, err := resolveKey(key)
			if err != nil {
				if layer.strict {
					return nil, nil, fmt.Errorf("%s: %w", layer.source, err)
				}
				continue
			}
			if note != nil {
				notices = append(notices, *note)
			}
			if target != "" {
				resolved[target] = layer.values[key]
				explicit[target] = true
			}
		}
		if err := k.Load(confmap.Provider(resolved, "."), nil); err != nil {
			return nil, nil, err
		}
	}

	s := &Settings{ServiceURLs: map[string][]string{}, InstanceMetadata: map[string]string{}, AuthUsers: map[string]*userSettings{}, explicit: explicit}
	for key, value := range k.All() {
		if err := applyValue(s, key, value); err != nil {
			return nil, nil, err
		}
	}
	if err := s.validate(); err != nil {
		return nil, nil, err
	}
	return s, notices, nil
}

const (
	serviceURLPrefix = "eureka.client.service-url."
	metadataPrefix   = "eureka.instance.metadata-map."
	authUsersPrefix  = "muster.auth.users."
)

// resolveKey maps a key as written by the user to the canonical key of a
// setting, or to "" with a notice for keys Muster deliberately ignores.
func resolveKey(key string) (string, *Notice, error) {
	c := canonical(key)
	if st, ok := settingByCanonical[c]; ok && st.apply != nil {
		return st.Key, nil, nil
	}
	for _, prefix := range []string{serviceURLPrefix, metadataPrefix, authUsersPrefix} {
		if cp := canonical(prefix); strings.HasPrefix(c, cp) && len(c) > len(cp) {
			// Keep the map key as written: zone names and metadata keys are
			// case-sensitive.
			return prefix + mapKeySuffix(key, strings.Count(prefix, ".")), nil, nil
		}
	}
	if why, ok := ignoredByCanonical[c]; ok {
		return "", &Notice{Warn: true, Msg: "ignored setting " + why}, nil
	}
	for _, p := range foreignPrefixes {
		if strings.HasPrefix(c, canonical(p)) {
			return "", &Notice{Msg: "not a Muster setting, ignored: " + key}, nil
		}
	}
	msg := fmt.Sprintf("unknown setting %q", key)
	if s := suggest(c); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return "", nil, fmt.Errorf("%s", msg)
}

// mapKeySuffix returns what follows the first n dot-separated segments.
func mapKeySuffix(key string, n int) string {
	for i := 0; i < n; i++ {
		j := strings.IndexByte(key, '.')
		if j < 0 {
			return ""
		}
		key = key[j+1:]
	}
	return key
}

// suggest returns the known key closest to an unknown one, if any is close.
func suggest(c string) string {
	best, bestDist := "", 4
	for _, st := range settings {
		if d := editDistance(c, canonical(st.Key)); d < bestDist {
			best, bestDist = st.Key, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func applyValue(s *Settings, key string, value any) error {
	raw := valueString(value)
	switch {
	case strings.HasPrefix(key, serviceURLPrefix):
		zone := strings.TrimPrefix(key, serviceURLPrefix)
		for _, u := range splitList(raw) {
			s.ServiceURLs[zone] = append(s.ServiceURLs[zone], u)
		}
		return nil
	case strings.HasPrefix(key, metadataPrefix):
		s.InstanceMetadata[strings.TrimPrefix(key, metadataPrefix)] = raw
		return nil
	case strings.HasPrefix(key, authUsersPrefix):
		return s.applyAuthUser(strings.TrimPrefix(key, authUsersPrefix), raw)
	}
	st, ok := settingByCanonical[canonical(key)]
	if !ok || st.apply == nil {
		return fmt.Errorf("unknown setting %q", key)
	}
	if err := st.apply(s, raw); err != nil {
		return fmt.Errorf("setting %s = %q: %w", st.Key, raw, err)
	}
	return nil
}

// valueString turns a config value (YAML may give numbers, booleans or
// lists) into the string form the setters parse.
func valueString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, p := range x {
			parts[i] = valueString(p)
		}
		return strings.Join(parts, ",")
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

func splitList(raw string) []string {
	var out []string
	for _, p := range strings.Split(raw, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// readConfigFile reads YAML (.yml, .yaml, also JSON, which is YAML) or Java
// properties (.properties) into a flat map.
func readConfigFile(path string) (map[string]any, error) {
	if strings.EqualFold(filepath.Ext(path), ".properties") {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		return parseProperties(string(b))
	}
	k := koanf.New(".")
	if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return k.All(), nil
}

// parseProperties reads the key=value (or key: value) lines of a Java
// properties file; # and ! start comments.
func parseProperties(text string) (map[string]any, error) {
	out := map[string]any{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		sep := strings.IndexAny(line, "=:")
		if sep <= 0 {
			return nil, fmt.Errorf("properties line %d: want key=value, got %q", i+1, line)
		}
		out[strings.TrimSpace(line[:sep])] = strings.TrimSpace(line[sep+1:])
	}
	return out, nil
}

// envLayer reads the environment. MUSTER_SERVER_PORT and friends must name
// a setting (unknown ones are errors, so a typo does not go unnoticed);
// muster.* settings may drop their prefix (MUSTER_LOG_LEVEL). The variables
// Kubernetes' service links make for a Service named muster (MUSTER_PORT…,
// MUSTER_SERVICE_…) are not settings and are left alone. Spring-style names
// without the prefix (SERVER_PORT, EUREKA_SERVER_ENABLESELFPRESERVATION,
// EUREKA_CLIENT_SERVICEURL_DEFAULTZONE, CLUSTER_JOIN) are taken when they
// match a setting and ignored otherwise, since the environment holds much
// that is not for Muster.
func envLayer(env []string) (lenient, strict map[string]any) {
	lenient, strict = map[string]any{}, map[string]any{}
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch {
		case name == "MUSTER_PORT", strings.HasPrefix(name, "MUSTER_PORT_"), strings.HasPrefix(name, "MUSTER_SERVICE_"):
		case strings.HasPrefix(name, "MUSTER_"):
			strict[envKey(strings.TrimPrefix(name, "MUSTER_"))] = value
		case strings.HasPrefix(name, "SERVER_"), strings.HasPrefix(name, "EUREKA_"),
			strings.HasPrefix(name, "CLUSTER_"), name == "SPRING_APPLICATION_NAME",
			name == "SPRING_SECURITY_USER_NAME", name == "SPRING_SECURITY_USER_PASSWORD":
			lenient[envKey(name)] = value
		}
	}
	return lenient, strict
}

// envKey turns an environment name (SERVER_PORT) into a setting key
// (server.port). Underscores and dashes do not count, as in Spring's
// relaxed binding, so EUREKA_SERVER_ENABLE_SELF_PRESERVATION and
// EUREKA_SERVER_ENABLESELFPRESERVATION both name
// eureka.server.enable-self-preservation. A map key (the zone of
// eureka.client.service-url.<zone>) is what follows the prefix, lower-cased
// as the environment leaves it; defaultzone is Spring's defaultZone.
func envKey(name string) string {
	lower := strings.ToLower(name)
	flat := strings.ReplaceAll(lower, "_", "")
	for _, candidate := range []string{flat, "muster" + flat} {
		for _, st := range settings {
			if st.apply != nil && strings.ReplaceAll(canonical(st.Key), ".", "") == candidate {
				return st.Key
			}
		}
	}
	for _, prefix := range []string{serviceURLPrefix, metadataPrefix, authUsersPrefix} {
		want := strings.ReplaceAll(canonical(prefix), ".", "")
		tokens := strings.Split(lower, "_")
		if prefix == authUsersPrefix {
			tokens = append([]string{"muster"}, tokens...) // MUSTER_ was cut off
		}
		acc := ""
		for i, tok := range tokens {
			acc += tok
			if acc == want && i+1 < len(tokens) {
				suffix := strings.Join(tokens[i+1:], "_")
				if prefix == serviceURLPrefix && suffix == "defaultzone" {
					suffix = "defaultZone"
				}
				if j := strings.LastIndexByte(suffix, '_'); prefix == authUsersPrefix && j > 0 {
					// MUSTER_AUTH_USERS_ALICE_PASSWORD: the last word is the field.
					suffix = suffix[:j] + "." + suffix[j+1:]
				}
				return prefix + suffix
			}
			if !strings.HasPrefix(want, acc) {
				break
			}
		}
	}
	return strings.ReplaceAll(lower, "_", ".")
}

func (s *Settings) validate() error {
	if s.MeasuredRateWindow < time.Second {
		return fmt.Errorf("setting muster.measured-rate-window-ms = %d: must be at least 1000", s.MeasuredRateWindow.Milliseconds())
	}
	if s.RenewalPercentThreshold <= 0 || s.RenewalPercentThreshold > 1 {
		return fmt.Errorf("setting eureka.server.renewal-percent-threshold = %v: must be in (0, 1]", s.RenewalPercentThreshold)
	}
	for zone, urls := range s.ServiceURLs {
		for _, u := range urls {
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				return fmt.Errorf("setting eureka.client.service-url.%s = %q: want http:// or https:// URLs", zone, u)
			}
		}
	}
	if err := persist.ValidClusterName(s.ClusterName); err != nil {
		return fmt.Errorf("setting muster.cluster-name = %q: %w", s.ClusterName, err)
	}
	if s.DataDir != "" && s.SnapshotInterval < time.Second {
		return fmt.Errorf("setting muster.snapshot-interval-ms = %d: must be at least 1000", s.SnapshotInterval.Milliseconds())
	}
	if err := s.validateSecurityTransport(); err != nil {
		return err
	}
	for _, j := range s.ClusterJoin {
		if !strings.Contains(j, ":") {
			return fmt.Errorf("setting cluster.join = %q: want host:port", j)
		}
	}
	return s.validateSecurity()
}

// Typed setting constructors.

func intKey(key string, def, lo, hi int, help string, field func(*Settings) *int) setting {
	return setting{Key: key, Default: strconv.Itoa(def), Help: help, apply: func(s *Settings, raw string) error {
		v, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil {
			return fmt.Errorf("want a whole number")
		}
		if v < lo || v > hi {
			return fmt.Errorf("want a number from %d to %d", lo, hi)
		}
		*field(s) = v
		return nil
	}}
}

func int64Key(key string, def int64, help string, field func(*Settings) *int64) setting {
	return setting{Key: key, Default: strconv.FormatInt(def, 10), Help: help, apply: func(s *Settings, raw string) error {
		v, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("want a positive whole number")
		}
		*field(s) = v
		return nil
	}}
}

func floatKey(key string, def float64, help string, field func(*Settings) *float64) setting {
	return setting{Key: key, Default: strconv.FormatFloat(def, 'f', -1, 64), Help: help, apply: func(s *Settings, raw string) error {
		v, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil {
			return fmt.Errorf("want a number")
		}
		*field(s) = v
		return nil
	}}
}

func boolKey(key string, def bool, help string, field func(*Settings) *bool) setting {
	return setting{Key: key, Default: strconv.FormatBool(def), Help: help, apply: func(s *Settings, raw string) error {
		v, err := strconv.ParseBool(strings.TrimSpace(raw))
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		*field(s) = v
		return nil
	}}
}

func strKey(key, def, help string, field func(*Settings) *string) setting {
	return setting{Key: key, Default: def, Help: help, apply: func(s *Settings, raw string) error {
		*field(s) = strings.TrimSpace(raw)
		return nil
	}}
}

func enumKey(key, def string, allowed []string, help string, field func(*Settings) *string) setting {
	return setting{Key: key, Default: def, Help: help + " One of: " + strings.Join(allowed, ", ") + ".", apply: func(s *Settings, raw string) error {
		v := strings.ToLower(strings.TrimSpace(raw))
		for _, a := range allowed {
			if v == a {
				*field(s) = v
				return nil
			}
		}
		return fmt.Errorf("want one of %s", strings.Join(allowed, ", "))
	}}
}

func listKey(key, help string, field func(*Settings) *[]string) setting {
	return setting{Key: key, Default: "", Help: help, apply: func(s *Settings, raw string) error {
		*field(s) = splitList(raw)
		return nil
	}}
}

// durationKey reads a whole number of unit and rejects values below 1.
func durationKey(key string, def int64, unit time.Duration, help string, field func(*Settings) *time.Duration) setting {
	return setting{Key: key, Default: strconv.FormatInt(def, 10), Help: help, apply: func(s *Settings, raw string) error {
		v, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("want a positive whole number")
		}
		*field(s) = time.Duration(v) * unit
		return nil
	}}
}

func msKey(key string, def int64, help string, field func(*Settings) *time.Duration) setting {
	return durationKey(key, def, time.Millisecond, help, field)
}

// msOrZeroKey is msKey where 0 is meaningful (it turns the wait off).
func msOrZeroKey(key string, def int64, help string, field func(*Settings) *time.Duration) setting {
	return setting{Key: key, Default: strconv.FormatInt(def, 10), Help: help, apply: func(s *Settings, raw string) error {
		v, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil || v < 0 {
			return fmt.Errorf("want a whole number of milliseconds, 0 or more")
		}
		*field(s) = time.Duration(v) * time.Millisecond
		return nil
	}}
}

func secondsKey(key string, def int64, help string, field func(*Settings) *time.Duration) setting {
	return durationKey(key, def, time.Second, help, field)
}
