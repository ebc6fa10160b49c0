package settings

import (
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/muster-registry/muster/auth"
	"github.com/muster-registry/muster/cluster"
	"github.com/muster-registry/muster/dns"
	"github.com/muster-registry/muster/drain"
	"github.com/muster-registry/muster/healthcheck"
	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/regions"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/persist"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/tlsconfig"
	"github.com/muster-registry/muster/xds"
)

// Settings is the whole configuration of a node, after defaults, the
// config file, the environment and --set flags, in that order.
//
// A key that sets a knob of a package sets the field of that package's
// Config directly, and the Config starts as the package's DefaultConfig:
// the packages own their defaults and limits (Validate), and a package's
// validation error is reported under the key that set the field (blame).
// The fields below the configs are the node's own settings,
// whose defaults are in defaultSettings.
type Settings struct {
	Registry    registry.Config
	Replication replication.Config
	Transport   replication.HTTPTransportConfig
	Sync        replication.SyncConfig
	AntiEntropy replication.AntiEntropyConfig
	HTTP        httpapi.Config
	Cluster     cluster.Config
	DNS         dns.Config
	XDS         xds.Config
	HealthCheck healthcheck.Config
	// Regions are the remote regions (regions.go, docs/regions.md).
	Regions regions.Config
	// Drain is the drain with a receipt's knobs (docs/traffic.md).
	Drain drain.Knobs

	ServerPort    int
	ServerAddress string
	AppName       string

	WaitWhenSyncEmpty time.Duration
	// DefaultOpenForTrafficCount is Spring's
	// eureka.instance.registry.default-open-for-traffic-count: read only
	// when set (coldstart.go).
	DefaultOpenForTrafficCount int

	RegisterWithEureka bool
	ServiceURLs        map[string][]string // zone → Eureka base URLs of static peers
	// ClientEnabled false turns the node's own Eureka client off: no
	// self-registration and no static peers (eureka.client.enabled).
	ClientEnabled bool
	// DashboardEnabled false leaves the dashboard out (eureka.dashboard.enabled).
	DashboardEnabled bool
	// UnknownKeys is what an unknown key of Muster's namespaces is: an
	// error, or a warning (muster.config.unknown-keys).
	UnknownKeys string

	InstanceHostname        string
	InstanceIPAddress       string
	InstancePreferIP        bool
	InstanceID              string
	InstanceRenewalInterval int // seconds
	InstanceLeaseDuration   int // seconds
	InstanceMetadata        map[string]string
	// The URLs the node's self-registration advertises: a full URL wins
	// over a path on the node's own base URL, as in Spring.
	InstanceStatusPagePath  string
	InstanceHealthCheckPath string
	InstanceHomePagePath    string
	InstanceStatusPageURL   string
	InstanceHealthCheckURL  string
	InstanceHomePageURL     string

	LogLevel        string
	LogFormat       string
	ShutdownTimeout time.Duration

	DataDir          string
	SnapshotInterval time.Duration
	ClusterName      string
	ColdStartWait    time.Duration
	// ClockOffset shifts the registry's clock (muster.testing.clock-offset-ms):
	// the chaos checker's node whose clock is ahead or behind.
	ClockOffset time.Duration

	ClusterEnabled   bool
	ClusterNodeName  string // "" means derived from the host name (Node.Start)
	ClusterSecretKey string

	// TLS and the gossip keyring (tls.go). explicit lists the keys the
	// file, the environment or --set gave, so that server.ssl.enabled=true
	// alone is noticed.
	SSLEnabled        bool
	SSLCertificate    string
	SSLKey            string
	SSLTrust          string
	SSLClientAuth     tlsconfig.ClientAuth
	ClusterSecretKeys []string
	explicit          map[string]bool
	// raw holds the value of each key as the user wrote it, for errors;
	// origin says where it was written (file:line, environment NAME,
	// command line), for muster config --check.
	raw    map[string]string
	origin map[string]string
	// Security (security.go): users, roles, peer signatures.
	SpringUserName     string
	SpringUserPassword string
	AuthUsers          map[string]*userSettings // muster.auth.users.<name>
	PeerSecret         string
	PeerMaxClockSkew   time.Duration

	// Java keystores instead of the PEM files (tls.go).
	SSLKeyStore           string
	SSLKeyStorePassword   string
	SSLKeyStoreType       string
	SSLKeyAlias           string
	SSLKeyPassword        string
	SSLTrustStore         string
	SSLTrustStorePassword string
	SSLTrustStoreType     string

	// Classpath lists the directories classpath: resources are searched
	// in first (muster.classpath; resources.go).
	Classpath []string
}

// defaultServerPort is Eureka's port, server.port's default.
const DefaultServerPort = 8761

// defaultSettings is where every default lives: the packages' own
// DefaultConfig, and the node's settings.
func defaultSettings() Settings {
	reg := registry.DefaultConfig()
	s := Settings{
		Registry:    reg,
		Replication: replication.DefaultConfig(),
		Transport:   replication.DefaultHTTPTransportConfig(),
		Sync:        replication.DefaultSyncConfig(),
		AntiEntropy: replication.DefaultAntiEntropyConfig(),
		HTTP:        httpapi.DefaultConfig(),
		Cluster:     cluster.DefaultConfig(),
		DNS:         dns.DefaultConfig(),
		XDS:         xds.DefaultConfig(),
		HealthCheck: healthcheck.DefaultConfig(),
		Regions:     regions.DefaultConfig(),
		Drain:       drain.DefaultKnobs(),

		ServerPort:    DefaultServerPort,
		ClientEnabled: true,
		// Spring's EurekaClientConfigBean: a Spring Eureka server
		// registers itself unless its file says not to.
		RegisterWithEureka: true,
		DashboardEnabled:   true,
		UnknownKeys:        unknownKeysSpring,
		// Spring Cloud's EurekaInstanceConfigBean: the actuator's info and
		// health (under management.endpoints.web.base-path, see Load).
		InstanceStatusPagePath:  "/actuator/info",
		InstanceHealthCheckPath: "/actuator/health",
		InstanceHomePagePath:    "/",
		AppName:                 "muster",
		WaitWhenSyncEmpty:       5 * time.Minute, // Eureka's wait-time-in-ms-when-sync-empty
		// The node's own lease is what the registry assumes of a client
		// that says nothing, as Eureka's client defaults are.
		InstanceRenewalInterval: int(reg.ExpectedRenewalInterval / time.Second),
		InstanceLeaseDuration:   int(reg.DefaultLeaseDuration / time.Second),
		LogLevel:                "info",
		LogFormat:               "auto",
		ShutdownTimeout:         10 * time.Second,
		SnapshotInterval:        30 * time.Second,
		ClusterName:             "muster",
		// One client renewal interval plus 5 s: live clients re-register
		// before reads are served.
		ColdStartWait:    reg.ExpectedRenewalInterval + 5*time.Second,
		ClusterEnabled:   true,
		SSLEnabled:       true, // Spring's: TLS is on once a server.ssl.* key is set
		PeerMaxClockSkew: auth.DefaultMaxSkew,
		ServiceURLs:      map[string][]string{},
		InstanceMetadata: map[string]string{},
		AuthUsers:        map[string]*userSettings{},
		explicit:         map[string]bool{},
		raw:              map[string]string{},
		origin:           map[string]string{},
	}
	s.DefaultOpenForTrafficCount = 1 // Spring's InstanceRegistryProperties; read only when set (coldstart.go)
	s.derive()
	return s
}

// derive copies what one key sets into the other packages that need it.
// On the defaults it changes nothing (TestSettings_defaultsAreThePackages').
func (s *Settings) derive() {
	s.Replication.ExpectedRenewalInterval = s.Registry.ExpectedRenewalInterval
	s.Replication.AdoptNewer = s.Registry.SyncWhenTimestampDiffers
	s.Replication.SendTimeout = s.Transport.RequestTimeout
	// Batches stay below the peers' muster.max-batch-body-bytes.
	s.Replication.MaxBatchBytes = int(s.HTTP.MaxBatchBodyBytes / 4 * 3)
	s.HTTP.Node.Zone = s.Cluster.Zone
	s.HTTP.ConsoleDisabled = !s.DashboardEnabled
	s.Sync.Zone = s.Cluster.Zone
	s.AntiEntropy.RequestTimeout = s.Transport.RequestTimeout
	// The DNS TXT region is the node's region unless named apart.
	if !s.explicit["muster.dns.region"] {
		s.DNS.Region = s.Regions.LocalRegion
	}
	// A cancel's tombstone must outlive one anti-entropy round, so the
	// cancel reaches every peer before the tombstone goes.
	s.Registry.TombstoneGrace = max(registry.DefaultConfig().TombstoneGrace, s.AntiEntropy.Interval)
	s.deriveColdStartWait()
}

// setting is one configuration key: its Spring-style name, its default as
// a user would write it (from defaultSettings), what it does, and how it
// is applied.
type setting struct {
	Key     string
	Default string
	Help    string
	apply   func(s *Settings, raw string) error
	// field points at what the key sets; format writes its value as a
	// user would.
	field  func(s *Settings) any
	format func(s *Settings) string
	// unsetDefault, when set, is the Default shown for a key whose meaning
	// depends on whether it is set at all (read only when set).
	unsetDefault string
}

// readOnlyWhenSet marks a key the node reads only when it is given: its
// default is shown as shown rather than as the field's zero state.
func readOnlyWhenSet(st setting, shown string) setting {
	st.unsetDefault = shown
	return st
}

// settings lists every key Muster reads. docs/configuration.md's table is
// checked against it by a test.
//
// A key for a package's knob points at the field of that package's Config
// in Settings (intKey, msKey… only parse; the default and the limits are
// the package's DefaultConfig and Validate). A setting of the node itself
// points at a field of Settings whose default is in defaultSettings;
// rangeKey and cmdMsKey bound it.
var settings = []setting{
	rangeKey("server.port", 0, 65535, "HTTP port of the Eureka API, the dashboard and /metrics (0 picks a free port).", func(s *Settings) *int { return &s.ServerPort }),
	strKey("server.address", "Address the HTTP server binds; empty means every interface.", func(s *Settings) *string { return &s.ServerAddress }),
	// Context path (contextpath.go).
	contextPathKey("server.servlet.context-path", "Path everything the node serves moves under, as in a Spring server: the Eureka API at <path>/eureka/ (and <path>/eureka/v2/), the dashboard at <path>/, /lastn, /admin/status, /metrics and the actuator; /readyz and /livez answer at the root too. The node's own URLs (peers, self-registration) carry it. A trailing / is dropped; empty: the root."),
	contextPathKey("server.context-path", "Spring Boot 1.x name of server.servlet.context-path."),
	// TLS with Spring Boot's PEM keys (tls.go): as in Spring, TLS is on
	// once any server.ssl.* key is given, unless enabled is false.
	boolKey("server.ssl.enabled", "TLS on the API port (Spring's default true: TLS is on once any server.ssl.* key is set; false turns it off). The advertised URL becomes https and peers are called over TLS.", func(s *Settings) *bool { return &s.SSLEnabled }),
	strKey("server.ssl.certificate", "PEM certificate (chain) of the node, served to clients and presented to peers; re-read when it changes on disk.", func(s *Settings) *string { return &s.SSLCertificate }),
	strKey("server.ssl.certificate-private-key", "PEM private key of server.ssl.certificate (PKCS#8, EC or RSA).", func(s *Settings) *string { return &s.SSLKey }),
	strKey("server.ssl.trust-certificate", "PEM CA bundle: client certificates and peers' certificates are verified against it (empty: peers against the system roots). Required for client-auth want and need, unless server.ssl.trust-store is set.", func(s *Settings) *string { return &s.SSLTrust }),
	strKey("server.ssl.key-store", "PKCS12 or JKS keystore holding the node's key and certificate chain, instead of server.ssl.certificate and certificate-private-key; re-read when it changes on disk.", func(s *Settings) *string { return &s.SSLKeyStore }),
	strKey("server.ssl.key-store-password", "Password of server.ssl.key-store; a wrong one stops start-up.", func(s *Settings) *string { return &s.SSLKeyStorePassword }),
	storeTypeKey("server.ssl.key-store-type", "Type of server.ssl.key-store: PKCS12 or JKS. Empty: Java's default; either way the file's content decides how it is read, as Java's keystore.type.compat does.", func(s *Settings) *string { return &s.SSLKeyStoreType }),
	strKey("server.ssl.key-alias", "Alias of the key entry in server.ssl.key-store; empty takes its only key entry. An alias the store lacks stops start-up with the aliases it has.", func(s *Settings) *string { return &s.SSLKeyAlias }),
	strKey("server.ssl.key-password", "Password of that key entry (JKS keys may have their own); empty means server.ssl.key-store-password.", func(s *Settings) *string { return &s.SSLKeyPassword }),
	strKey("server.ssl.trust-store", "PKCS12 or JKS keystore whose trusted certificates (and key entries' certificates) clients and peers are verified against, instead of server.ssl.trust-certificate.", func(s *Settings) *string { return &s.SSLTrustStore }),
	strKey("server.ssl.trust-store-password", "Password of server.ssl.trust-store (a JKS trust store may be read without one, unchecked, as Java does).", func(s *Settings) *string { return &s.SSLTrustStorePassword }),
	storeTypeKey("server.ssl.trust-store-type", "Type of server.ssl.trust-store: PKCS12 or JKS; as server.ssl.key-store-type.", func(s *Settings) *string { return &s.SSLTrustStoreType }),
	listKey(ClasspathKey, "Directories where a classpath: resource (server.ssl.key-store: classpath:server.jks, any server.ssl file) is looked for first, in order; relative ones are from the config file's directory. After them: the config file's directory, then resources/ and config/ beside it. See spring-config.md, Resources.", func(s *Settings) *[]string { return &s.Classpath }),
	clientAuthKey("server.ssl.client-auth", "Client certificates: none asks for none; want verifies one when sent; need refuses the handshake without a certificate from the trust bundle (mutual TLS, between peers too).", func(s *Settings) *tlsconfig.ClientAuth { return &s.SSLClientAuth }),
	strKey("spring.application.name", "Application name the node registers itself under (see eureka.client.register-with-eureka).", func(s *Settings) *string { return &s.AppName }),
	strKey("eureka.environment", "Environment label shown on the dashboard.", func(s *Settings) *string { return &s.HTTP.Node.Environment }),
	strKey("eureka.datacenter", "Data center label shown on the dashboard.", func(s *Settings) *string { return &s.HTTP.Node.Datacenter }),

	boolKey("eureka.server.enable-self-preservation", "Keep expired leases while renewals are below the threshold (the network, not the instances, is assumed to have failed).", func(s *Settings) *bool { return &s.Registry.SelfPreservation }),
	floatKey("eureka.server.renewal-percent-threshold", "Share of the expected renewals below which self-preservation stops eviction; also caps an eviction run at size − ⌊size × this⌋.", func(s *Settings) *float64 { return &s.Registry.RenewalPercentThreshold }),
	secondsKey("eureka.server.expected-client-renewal-interval-seconds", "Heartbeat interval assumed for instances that send no leaseInfo.renewalIntervalInSecs; plus 5 s, the default cold-start wait (muster.cold-start-wait-ms).", func(s *Settings) *time.Duration { return &s.Registry.ExpectedRenewalInterval }),
	msKey("eureka.server.renewal-threshold-update-interval-ms", "How often the expected renewals are recounted from the live leases (never lowered by more than the threshold share at once).", func(s *Settings) *time.Duration { return &s.Registry.RenewThresholdUpdateInterval }),
	msKey("eureka.server.eviction-interval-timer-in-ms", "How often expired leases are evicted.", func(s *Settings) *time.Duration { return &s.Registry.EvictionInterval }),
	msKey("eureka.server.retention-time-in-m-s-in-delta-queue", "How long a change stays in GET /apps/delta.", func(s *Settings) *time.Duration { return &s.Registry.DeltaRetention }),
	msKey("eureka.server.delta-retention-timer-interval-in-ms", "How often old changes are pruned from the delta.", func(s *Settings) *time.Duration { return &s.Registry.DeltaRetentionInterval }),
	boolKey("eureka.server.disable-delta", "Answer GET /apps/delta with 403, so clients always fetch the full registry.", func(s *Settings) *bool { return &s.HTTP.DisableDelta }),
	boolKey("eureka.server.sync-when-timestamp-differs", "Compare lastDirtyTimestamp on heartbeats: 404 asks a client with newer data to register again, 409 hands a peer our newer copy.", func(s *Settings) *bool { return &s.Registry.SyncWhenTimestampDiffers }),
	intKey("eureka.server.registry-sync-retries", "Attempts to copy the registry from a peer at start-up (syncUp) before opening for traffic.", func(s *Settings) *int { return &s.Sync.Attempts }),
	msKey("eureka.server.registry-sync-retry-wait-ms", "Wait between syncUp attempts (Eureka's 30 s makes start-up slow).", func(s *Settings) *time.Duration { return &s.Sync.RetryWait }),
	cmdMsKey("eureka.server.wait-time-in-ms-when-sync-empty", 0, "Longest a start-up that found no registry refuses registry reads (403), when set: it caps the cold-start wait (muster.cold-start-wait-ms's default), so 0 (as Spring guides set for a standalone server) serves at once, without waiting for syncUp either: when no peer answers its first round, syncUp's other rounds run in the background; unset, it only bounds how far clients declaring long renewal intervals stretch that wait. Peers known but unreachable at start hold reads no longer than a cold start. With default-open-for-traffic-count 0, Eureka's own wait.", func(s *Settings) *time.Duration { return &s.WaitWhenSyncEmpty }),
	readOnlyWhenSet(rangeKey("eureka.instance.registry.default-open-for-traffic-count", 0, math.MaxInt32, "Spring's count of instances openForTraffic assumes after a sync that found nothing (Spring's default 1 is not assumed: the key counts only when set). Set above 0: the node serves at once after an empty start, as Spring does (no cold-start wait); set to 0: reads are refused for wait-time-in-ms-when-sync-empty, as Eureka does. Unset: Muster's cold-start rule (muster.cold-start-wait-ms).", func(s *Settings) *int { return &s.DefaultOpenForTrafficCount }), "unset"),
	intKey("eureka.server.max-elements-in-peer-replication-pool", "Replication tasks queued per peer; beyond it the oldest heartbeats are dropped first (counted in metrics).", func(s *Settings) *int { return &s.Replication.MaxQueueSize }),
	msKey("eureka.server.max-time-for-replication", "Age after which a queued cancel or status replication task is dropped.", func(s *Settings) *time.Duration { return &s.Replication.TaskMaxAge }),
	msKey("eureka.server.peer-node-connect-timeout-ms", "Connect timeout of replication requests to peers.", func(s *Settings) *time.Duration { return &s.Transport.ConnectTimeout }),
	msKey("eureka.server.peer-node-read-timeout-ms", "Timeout of a replication batch request to a peer.", func(s *Settings) *time.Duration { return &s.Transport.RequestTimeout }),

	boolKey("eureka.client.register-with-eureka", "Register the node itself as an instance of spring.application.name and renew like any client.", func(s *Settings) *bool { return &s.RegisterWithEureka }),
	{Key: "eureka.client.service-url.<zone>", Default: "", Help: "Comma-separated Eureka base URLs of static peers (e.g. a Java Eureka server during a migration), by zone; added to the memberlist members."},
	boolKey("eureka.client.enabled", "The node's own Eureka client: false means no self-registration (whatever register-with-eureka says) and no static peers from eureka.client.service-url.*, which are then ignored with a warning; memberlist peers still replicate.", func(s *Settings) *bool { return &s.ClientEnabled }),
	boolKey("eureka.dashboard.enabled", "Serve the dashboard (/, /dashboard, /console…); false: its pages answer 404, the API and probes are unchanged.", func(s *Settings) *bool { return &s.DashboardEnabled }),
	strKey("eureka.dashboard.path", "One more path of the dashboard's overview besides /, /dashboard and /console (Spring's dashboard path); the dashboard's links stay under /console.", func(s *Settings) *string { return &s.HTTP.ConsolePath }),

	strKey("eureka.instance.hostname", "Host name the node advertises (self-registration and its Eureka URL for peers); empty means the machine's host name.", func(s *Settings) *string { return &s.InstanceHostname }),
	strKey("eureka.instance.ip-address", "IP address the node advertises; empty means the address memberlist advertises, or the first non-loopback address.", func(s *Settings) *string { return &s.InstanceIPAddress }),
	boolKey("eureka.instance.prefer-ip-address", "Advertise the IP address instead of the host name in the node's Eureka URL.", func(s *Settings) *bool { return &s.InstancePreferIP }),
	strKey("eureka.instance.instance-id", "Instance id of the node's self-registration; empty means host:app:port, as Spring does.", func(s *Settings) *string { return &s.InstanceID }),
	rangeKey("eureka.instance.lease-renewal-interval-in-seconds", 1, registry.MaxRenewalIntervalSecs, "Heartbeat interval of the node's self-registration.", func(s *Settings) *int { return &s.InstanceRenewalInterval }),
	rangeKey("eureka.instance.lease-expiration-duration-in-seconds", 1, registry.MaxLeaseDurationSecs, "Lease duration of the node's self-registration.", func(s *Settings) *int { return &s.InstanceLeaseDuration }),
	{Key: "eureka.instance.metadata-map.<key>", Default: "", Help: "Metadata of the node's self-registration."},
	strKey("eureka.instance.status-page-url-path", "Path of the status page URL the node's self-registration advertises, on its own base URL; by default the actuator's info under management.endpoints.web.base-path, as Spring Cloud's.", func(s *Settings) *string { return &s.InstanceStatusPagePath }),
	strKey("eureka.instance.health-check-url-path", "Path of the health check URL the node's self-registration advertises; by default the actuator's health under management.endpoints.web.base-path, as Spring Cloud's.", func(s *Settings) *string { return &s.InstanceHealthCheckPath }),
	strKey("eureka.instance.home-page-url-path", "Path of the home page URL the node's self-registration advertises.", func(s *Settings) *string { return &s.InstanceHomePagePath }),
	strKey("eureka.instance.status-page-url", "Full status page URL of the self-registration; wins over the path.", func(s *Settings) *string { return &s.InstanceStatusPageURL }),
	strKey("eureka.instance.health-check-url", "Full health check URL of the self-registration; wins over the path.", func(s *Settings) *string { return &s.InstanceHealthCheckURL }),
	strKey("eureka.instance.home-page-url", "Full home page URL of the self-registration; wins over the path.", func(s *Settings) *string { return &s.InstanceHomePageURL }),

	msKey("muster.measured-rate-window-ms", "Length of the window that counts renewals for self-preservation; figures are still reported per minute. Short windows suit tests.", func(s *Settings) *time.Duration { return &s.Registry.RenewalRateWindow }),
	int64Key("muster.max-body-bytes", "Largest request body a client may send (413 beyond).", func(s *Settings) *int64 { return &s.HTTP.MaxBodyBytes }),
	int64Key("muster.max-batch-body-bytes", "Largest peer replication batch accepted.", func(s *Settings) *int64 { return &s.HTTP.MaxBatchBodyBytes }),
	enumKey("muster.config.unknown-keys", []string{unknownKeysSpring, unknownKeysError, unknownKeysWarn}, "What an unknown key under eureka.*, server.*, muster.* or cluster.* is (keys elsewhere are ignored; a key a ${…} placeholder reads is never unknown). spring: as Spring, a warning with a did-you-mean under eureka.* and server.* (Spring's beans ignore fields they lack) and an error under muster.* and cluster.*; error: every one stops start-up, each listed with its file:line and a did-you-mean; warn: every one is logged and the node starts.", func(s *Settings) *string { return &s.UnknownKeys }),
	enumKey("muster.log.level", []string{"trace", "debug", "info", "warn", "error"}, "Log level.", func(s *Settings) *string { return &s.LogLevel }),
	enumKey("muster.log.format", []string{"auto", "console", "json"}, "Log format: auto is console on a terminal and JSON otherwise.", func(s *Settings) *string { return &s.LogFormat }),
	enumKey("muster.dashboard.actions-without-auth", httpapi.ConsoleActionsPolicies, "Who may use the dashboard's actions (out of service, up, remove override, cancel) while authentication is off: loopback clients only, any client (like the open API), or nobody. With authentication on, admin users may, whatever this says.", func(s *Settings) *httpapi.ConsoleActionsPolicy { return &s.HTTP.ConsoleActions }),
	cmdMsKey("muster.shutdown-timeout-ms", 1, "How long a graceful shutdown may take (finishing requests, cancelling the self-registration, leaving the cluster).", func(s *Settings) *time.Duration { return &s.ShutdownTimeout }),
	strKey("muster.data-dir", "Directory where the node keeps a snapshot of its registry (registry.snapshot), written periodically and on shutdown, and loaded at start when no peer has the registry. Empty: no snapshot.", func(s *Settings) *string { return &s.DataDir }),
	msKey("muster.anti-entropy-interval-ms", "How often the node compares its registry with each Muster peer's (digests, then only what differs) and repairs what it lacks or holds older, ±20 % jitter; a peer that joins or comes back gets a round at once. 0 turns anti-entropy off. Cancels' tombstones are kept lease + max(30 s, this), and beyond that until every peer has been in sync since the cancel (at most muster.tombstone-max-age-ms).", func(s *Settings) *time.Duration { return &s.AntiEntropy.Interval }),
	msKey("muster.testing.clock-offset-ms", "For chaos tests only: moves this node's clock for the registry, replication and anti-entropy (write versions, leases, eviction, tombstones, task ages) this far ahead (or behind, negative) of the machine's, as a node with a wrong clock would be. Never set it in production.", func(s *Settings) *time.Duration { return &s.ClockOffset }),
	msKey("muster.eviction-hold-max-ms", "Longest evictions are held back in a row while a Muster peer is unreachable (its replication batches or anti-entropy rounds failing): in a ring or one-way partition its clients' renewals may reach that peer and not this node, so an expired lease here does not prove a dead instance. Past this, evictions resume although the peer is still unreachable.", func(s *Settings) *time.Duration { return &s.Registry.MaxEvictionHold }),
	msKey("muster.tombstone-max-age-ms", "Longest a cancel's tombstone is kept past its lifetime while some peer (or one that left within a day) has not been in sync with this node since the cancel. A peer cut off for longer than this may bring back, for at most one lease, an instance cancelled meanwhile whose stale copy it still renews.", func(s *Settings) *time.Duration { return &s.Registry.TombstoneMaxAge }),
	cmdMsKey("muster.snapshot-interval-ms", 1, "How often the registry snapshot is written to muster.data-dir (skipped when nothing changed).", func(s *Settings) *time.Duration { return &s.SnapshotInterval }),
	strKey("muster.cluster-name", "Name of the cluster, written into registry snapshots: a snapshot written by another cluster is refused.", func(s *Settings) *string { return &s.ClusterName }),
	cmdMsKey("muster.cold-start-wait-ms", 0, "After a start that found no registry (a full cluster restart, or peers known but unreachable; no snapshot), or on a node without peers whose snapshot was refused (corrupt, another cluster's), refuse registry reads (403) and /readyz this long, so live clients re-register first. Default: the clients' renewal interval plus 5 s, that is eureka.server.expected-client-renewal-interval-seconds, stretched while the wait runs to the longest leaseInfo.renewalIntervalInSecs a registering client declares (the nodes' own self-registrations do not count; at most eureka.server.wait-time-in-ms-when-sync-empty). A value set here is a fixed wait; 0 serves the empty registry at once.", func(s *Settings) *time.Duration { return &s.ColdStartWait }),

	boolKey("cluster.enabled", "Run memberlist to find peers. Off: a standalone node (static peers from eureka.client.service-url.* still replicate).", func(s *Settings) *bool { return &s.ClusterEnabled }),
	strKey("cluster.node-name", "Unique node name in the cluster; empty means the host name.", func(s *Settings) *string { return &s.ClusterNodeName }),
	strKey("cluster.bind-addr", "Address memberlist binds (TCP and UDP).", func(s *Settings) *string { return &s.Cluster.BindAddr }),
	intKey("cluster.bind-port", "Port memberlist binds.", func(s *Settings) *int { return &s.Cluster.BindPort }),
	strKey("cluster.advertise-addr", "Address other nodes use to reach this one; empty lets memberlist pick a private IPv4 address. A host without one advertises its first public IPv4, else IPv6, else loopback address, with a warning; when nothing asks for gossip (no cluster.join, cluster.enabled not set) gossip is off there instead.", func(s *Settings) *string { return &s.Cluster.AdvertiseAddr }),
	intKey("cluster.advertise-port", "Port other nodes use to reach this one; 0 means the bind port.", func(s *Settings) *int { return &s.Cluster.AdvertisePort }),
	listKey("cluster.join", "Seed nodes (host:port, or a host alone for this node's cluster.bind-port; comma-separated or a list); retried in the background until one answers, so nodes may start in any order.", func(s *Settings) *[]string { return &s.Cluster.Join }),
	strKey("cluster.secret-key", "Base64 key (16, 24 or 32 bytes) encrypting gossip; nodes with different keys do not join.", func(s *Settings) *string { return &s.ClusterSecretKey }),
	listKey("cluster.secret-keys", "More base64 gossip keys accepted besides cluster.secret-key, which alone is used for sending: for rotating the key without a cluster restart (README, Securing a cluster).", func(s *Settings) *[]string { return &s.ClusterSecretKeys }),
	// Limits: what one client, connection or peer can make a node hold.
	msKey("muster.body-read-timeout-ms", "Time a request body has to arrive, after its headers; slower bodies get 408 and their connection is closed. 0: no limit.", func(s *Settings) *time.Duration { return &s.HTTP.BodyReadTimeout }),
	msKey("muster.write-chunk-timeout-ms", "Time a client has to take each 128 KiB of a response; the deadline moves with progress, so a slow but reading client gets any payload, a stalled one is dropped. 0: no limit.", func(s *Settings) *time.Duration { return &s.HTTP.WriteChunkTimeout }),
	intKey("muster.max-connections", "Open HTTP connections at most; further ones wait until one closes (open ones keep working). 0: no limit.", func(s *Settings) *int { return &s.HTTP.MaxConnections }),
	intKey("muster.max-instances", "Instances the node holds at most; a new instance beyond it gets 503.", func(s *Settings) *int { return &s.Registry.Limits.MaxInstances }),
	intKey("muster.max-instances-per-app", "Instances of one app at most; a new instance beyond it gets 403.", func(s *Settings) *int { return &s.Registry.Limits.MaxInstancesPerApp }),
	intKey("muster.max-metadata-entries", "Metadata entries of one instance at most (metadata and dataCenterInfo metadata each); beyond it 400.", func(s *Settings) *int { return &s.Registry.Limits.MaxMetadataEntries }),
	intKey("muster.max-metadata-bytes", "Bytes of one instance's metadata keys and values at most; beyond it 400.", func(s *Settings) *int { return &s.Registry.Limits.MaxMetadataBytes }),
	intKey("muster.max-name-length", "Bytes of an app name, instance id, host name, VIP address or any other single-valued instance field at most; beyond it 400.", func(s *Settings) *int { return &s.Registry.Limits.MaxNameLength }),
	msKey("muster.max-clock-skew-ms", "How far in the future a lastDirtyTimestamp may be; beyond it 400 (a far-future one would pin the record against its owner).", func(s *Settings) *time.Duration { return &s.Registry.Limits.MaxClockSkew }),
	msKey("muster.drain.reader-window-ms", "A drain waits for the readers that read the drained instance's app within this long before it (three 30 s fetch intervals by default): a client that read longer ago is taken for gone.", func(s *Settings) *time.Duration { return &s.Drain.ReaderWindow }),
	msKey("muster.drain.max-wait-ms", "Longest wait POST /admin/drain/{app}/{id}?wait= may ask for; a longer one is refused (400).", func(s *Settings) *time.Duration { return &s.Drain.MaxWait }),
	msKey("muster.drain.poll-interval-ms", "How often a waiting drain asks every node again for its readers.", func(s *Settings) *time.Duration { return &s.Drain.PollInterval }),
	intKey("muster.drain.max-readers", "Readers (client identity and address) each node tracks for drains; past it, readers idle for the reader window go, and if none is, a new reader is not tracked (the receipt counts its reads as untracked).", func(s *Settings) *int { return &s.Drain.MaxReaders }),
	msKey("muster.watch.max-wait-ms", "Longest wait a blocking fetch may ask for (index and wait on GET apps, apps/delta, apps/{app}, vips, svips); a longer wait is clamped to it.", func(s *Settings) *time.Duration { return &s.HTTP.WatchMaxWait }),
	intKey("muster.watch.max-watchers", "Blocking fetches held and watch streams open at once, at most; beyond it a blocking fetch is answered at once as if it had no wait, and a watch stream gets 503. 0: no limit.", func(s *Settings) *int { return &s.HTTP.WatchMaxWatchers }),
	int64Key("muster.max-sync-body-bytes", "Largest registry read from a peer at start-up (syncUp); a larger one fails the attempt.", func(s *Settings) *int64 { return &s.Transport.MaxSyncBodyBytes }),

	strKey("spring.security.user.name", "User name of the admin; with spring.security.user.password it turns HTTP Basic authentication on (see Securing a cluster). Empty with a password set: user, Spring Boot's default.", func(s *Settings) *string { return &s.SpringUserName }),
	strKey("spring.security.user.password", "Password of the admin: plain, {noop}plain or {bcrypt}$2a$… (Spring's encoder prefixes).", func(s *Settings) *string { return &s.SpringUserPassword }),
	{Key: "muster.auth.users.<name>.password", Default: "", Help: "Password of a further user (same encodings); also turns authentication on."},
	{Key: "muster.auth.users.<name>.role", Default: "", Help: "Role of that user, required: read (GET on the Eureka API, dashboard, /metrics), write (read + register, renew, cancel, status, metadata) or admin (everything, /admin/* and peer batches without a peer secret)."},
	{Key: "muster.auth.users.<name>.apps", Default: "", Help: "Apps a write user may change (comma-separated or a list); empty means every app. Others get 403."},
	strKey("cluster.peer-secret", "Shared secret (16+ characters) with which nodes sign replication batches and syncUp fetches (HMAC-SHA256); it never travels. Required when authentication is on and cluster.enabled is true.", func(s *Settings) *string { return &s.PeerSecret }),
	cmdMsKey("cluster.peer-max-clock-skew-ms", 1, "How far a peer signature's timestamp may be from this node's clock; older or newer ones are refused, and accepted ones are remembered this long so they cannot be replayed.", func(s *Settings) *time.Duration { return &s.PeerMaxClockSkew }),
	strKey("cluster.zone", "Availability zone of the node: gossiped to peers, shown on the dashboard; syncUp prefers peers of the same zone.", func(s *Settings) *string { return &s.Cluster.Zone }),

	strKey("management.endpoints.web.base-path", "Path of Spring Boot's actuator endpoints (health, info, prometheus); see docs/actuator.md.", func(s *Settings) *string { return &s.HTTP.Actuator.BasePath }),
	rangeKey("management.server.port", 0, 65535, "Port the actuator endpoints are served on instead of server.port, by a second listener (same address and TLS); 0 or server.port: beside the API.", func(s *Settings) *int { return &s.HTTP.Actuator.Port }),
	enumKey("management.endpoint.health.show-details", ops.ActuatorShowDetailsValues, "Who sees the components of /actuator/health and their details: nobody, everybody, or requests with credentials good for the read role.", func(s *Settings) *ops.ActuatorShowDetails { return &s.HTTP.Actuator.ShowDetails }),
	boolKey("muster.dns.enabled", "Serve DNS (UDP and TCP) on muster.dns.addr: apps, VIPs, nodes and Eureka's TXT server discovery (docs/dns.md).", func(s *Settings) *bool { return &s.DNS.Enabled }),
	strKey("muster.dns.addr", "Listen address of the DNS interface.", func(s *Settings) *string { return &s.DNS.Addr }),
	strKey("muster.dns.domain", "Domain the DNS interface answers for (names outside it are REFUSED).", func(s *Settings) *string { return &s.DNS.Domain }),
	strKey("muster.dns.region", "Region of the txt.<region>.<domain> record Eureka clients read; default: eureka.client.region.", func(s *Settings) *string { return &s.DNS.Region }),
	// Remote regions (docs/regions.md).
	strKey("eureka.client.region", "The node's own region: remote Muster regions are asked for theirs by name, and a client's regions= naming this one adds nothing.", func(s *Settings) *string { return &s.Regions.LocalRegion }),
	{Key: regionURLsPrefix + "<region>", Default: "", Help: "Comma-separated Eureka base URLs of a remote region (http[s]://[user:password@]host:port/eureka), tried in order; every node fetches it. See regions.md."},
	regionURLsKey("eureka.server.remote-region-urls-with-name", "Netflix's string form of the same map: region;url,region;url."),
	{Key: regionWhitelistPrefix + "<region>", Default: "", Help: "Comma-separated apps of a remote region that are served (<region> global: of every region without its own list); a region under neither serves every app."},
	secondsKey("eureka.server.remote-region-registry-fetch-interval", "Seconds between fetches of each remote region (a delta, or a full fetch when the hashcode disagrees); failures back off up to 8 times this.", func(s *Settings) *time.Duration { return &s.Regions.FetchInterval }),
	boolKey("eureka.server.disable-transparent-fallback-to-other-region", "Serve plain requests (no regions=) local apps only; by default, as in Eureka, a client is also served the remote apps unknown locally.", func(s *Settings) *bool { return &s.Regions.DisableTransparentFallback }),
	boolKey("eureka.server.disable-delta-for-remote-regions", "Fetch remote regions in full every time instead of by delta.", func(s *Settings) *bool { return &s.Regions.DisableDelta }),
	msKey("eureka.server.remote-region-connect-timeout-ms", "Connect timeout of a remote region fetch.", func(s *Settings) *time.Duration { return &s.Regions.ConnectTimeout }),
	msKey("eureka.server.remote-region-read-timeout-ms", "Time a remote region has to start answering a fetch.", func(s *Settings) *time.Duration { return &s.Regions.ReadTimeout }),
	strKey("eureka.server.remote-region-trust-store", "PKCS12 or JKS trust store, or PEM CA bundle, that HTTPS remote regions are verified against (the file's first bytes tell which; a path, file: or classpath: as server.ssl.trust-store); empty: the system roots.", func(s *Settings) *string { return &s.Regions.TrustStore }),
	strKey("eureka.server.remote-region-trust-store-password", "Password of eureka.server.remote-region-trust-store (a PEM bundle needs none; a JKS store may be read without one, unchecked, as Java does).", func(s *Settings) *string { return &s.Regions.TrustStorePassword }),
	boolKey("muster.regions.require-all", "Answer a regions= request naming a remote region that has no data (never reached, or dropped) with 403, as Eureka does; false serves the rest and names the missing ones in X-Muster-Regions-Missing.", func(s *Settings) *bool { return &s.Regions.RequireAll }),
	cmdMsKey("muster.regions.max-staleness-ms", 0, "Drop a remote region's data not refreshed for this long (its instances leave every answer until it is reached again); 0 keeps it forever, as Eureka does.", func(s *Settings) *time.Duration { return &s.Regions.MaxStaleness }),
	intKey("muster.dns.ttl-seconds", "TTL of every DNS answer and of negative answers (SOA minimum).", func(s *Settings) *int { return &s.DNS.TTL }),
	listKey("muster.dns.allowed-cidrs", "Who may query DNS; empty: everyone while the registry is open, loopback only once authentication is on (DNS carries no credentials).", func(s *Settings) *[]string { return &s.DNS.AllowedCIDRs }),
	intKey("muster.dns.max-answers", "Most address or SRV records in one DNS answer (a random subset of the UP instances).", func(s *Settings) *int { return &s.DNS.MaxAnswers }),
	intKey("muster.dns.udp-max-size", "Cap on the EDNS0 UDP size a client offers; larger answers are truncated (TC) and complete over TCP.", func(s *Settings) *int { return &s.DNS.UDPMaxSize }),
	intKey("muster.dns.rate-limit", "UDP DNS responses per second per source (/32, /64); over it queries are dropped. 0: no limit.", func(s *Settings) *int { return &s.DNS.RateLimit }),
	intKey("muster.dns.rate-burst", "Burst of the per-source DNS rate limit.", func(s *Settings) *int { return &s.DNS.RateBurst }),
	boolKey("muster.xds.enabled", "Serve xDS (gRPC) on muster.xds.addr: every app to Envoy (CDS, EDS over ADS) and to proxyless gRPC (xds:///name) (docs/xds.md).", func(s *Settings) *bool { return &s.XDS.Enabled }),
	strKey("muster.xds.addr", "Listen address of the xDS server (TLS and client certificates as server.ssl.*).", func(s *Settings) *string { return &s.XDS.Addr }),
	intKey("muster.xds.max-streams", "Most xDS streams open on this node at once; one more is refused with RESOURCE_EXHAUSTED.", func(s *Settings) *int { return &s.XDS.MaxStreams }),
	boolKey("muster.health-check.enabled", "Probe opted-in instances from the server and serve those that keep failing as DOWN (docs/health-checks.md).", func(s *Settings) *bool { return &s.HealthCheck.Enabled }),
	listKey("muster.health-check.apps", "Apps whose instances are probed (names, or * for all); an instance opts in or out with metadata muster.health-check: http, tcp or off.", func(s *Settings) *[]string { return &s.HealthCheck.Apps }),
	msKey("muster.health-check.interval-ms", "Time between two probe rounds (jittered by ±10 %).", func(s *Settings) *time.Duration { return &s.HealthCheck.Interval }),
	msKey("muster.health-check.timeout-ms", "Time one probe may take: connect, TLS, request and answer's headers; a 2xx within it passes.", func(s *Settings) *time.Duration { return &s.HealthCheck.Timeout }),
	intKey("muster.health-check.failures-before-down", "Failed rounds in a row that mark an instance DOWN.", func(s *Settings) *int { return &s.HealthCheck.FailuresBeforeDown }),
	intKey("muster.health-check.successes-before-up", "Passed rounds in a row that lift the mark.", func(s *Settings) *int { return &s.HealthCheck.SuccessesBeforeUp }),
	intKey("muster.health-check.max-concurrent", "Probes (connections) a node runs at once at most.", func(s *Settings) *int { return &s.HealthCheck.MaxConcurrent }),
	intKey("muster.health-check.max-down-percent", "The guard: when more than this share of an app's probed instances fail in one round, none is marked DOWN (100: no guard).", func(s *Settings) *int { return &s.HealthCheck.MaxDownPercent }),
	bind("muster.health-check.allowed-cidrs", "Networks probes may reach; lifts the loopback, link-local and own-address rules inside them, and once set nothing outside them is probed. Empty: every address but those.", func(s *Settings) *[]netip.Prefix { return &s.HealthCheck.AllowedCIDRs },
		func(raw string) ([]netip.Prefix, error) { return healthcheck.ParseCIDRs(splitList(raw)) }, formatPrefixes),
}

// CanonicalKey folds a key for Spring's relaxed binding: case and dashes do
// not matter, so enableSelfPreservation, enable-self-preservation and
// ENABLE_SELF_PRESERVATION name the same setting.
func CanonicalKey(key string) string {
	key = strings.ToLower(key)
	return strings.NewReplacer("-", "", "_", "").Replace(key)
}

var settingByCanonical = func() map[string]*setting {
	m := map[string]*setting{}
	for i := range settings {
		m[CanonicalKey(settings[i].Key)] = &settings[i]
	}
	return m
}()

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

// suggest returns the known key closest to an unknown one, if any is
// close: a setting, or a Spring key Muster accepts.
func suggest(c string) string {
	if s := suggestByDistance(c); s != "" {
		return s
	}
	// The same last word under another section
	// (eureka.client.enable-self-preservation).
	leaf := c[strings.LastIndex(c, ".")+1:]
	if len(leaf) >= 6 {
		for _, st := range settings {
			if k := CanonicalKey(st.Key); strings.HasSuffix(k, "."+leaf) {
				return st.Key
			}
		}
	}
	return ""
}

// suggestByDistance is the known key within a few edits of c (more for a
// long key), the first in name order on a tie.
func suggestByDistance(c string) string {
	best, bestDist := "", max(4, len(c)/10+1)
	consider := func(key string) {
		if d := editDistance(c, CanonicalKey(key)); d < bestDist || d == bestDist && best != "" && key < best {
			best, bestDist = key, d
		}
	}
	for _, st := range settings {
		consider(st.Key)
	}
	for k := range springKeys {
		consider(k)
	}
	for k := range springAliases {
		consider(k)
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
	if s.raw == nil {
		s.raw = map[string]string{}
	}
	switch {
	case strings.HasPrefix(key, serviceURLPrefix):
		zone := strings.TrimPrefix(key, serviceURLPrefix)
		s.raw[key] = raw
		for _, u := range splitList(raw) {
			s.ServiceURLs[zone] = append(s.ServiceURLs[zone], u)
		}
		return nil
	case strings.HasPrefix(key, metadataPrefix):
		s.raw[key] = raw
		s.InstanceMetadata[strings.TrimPrefix(key, metadataPrefix)] = raw
		return nil
	case strings.HasPrefix(key, authUsersPrefix):
		s.raw[key] = raw
		return s.applyAuthUser(strings.TrimPrefix(key, authUsersPrefix), raw)
	case strings.HasPrefix(key, regionURLsPrefix):
		s.raw[key] = raw
		region := strings.TrimPrefix(key, regionURLsPrefix)
		s.Regions.URLs[region] = append(s.Regions.URLs[region], splitList(raw)...)
		return nil
	case strings.HasPrefix(key, regionWhitelistPrefix):
		s.raw[key] = raw
		s.Regions.Whitelist[strings.TrimPrefix(key, regionWhitelistPrefix)] = splitList(raw)
		return nil
	}
	st, ok := settingByCanonical[CanonicalKey(key)]
	if !ok || st.apply == nil {
		return fmt.Errorf("unknown setting %q", key)
	}
	s.raw[st.Key] = raw
	if err := st.apply(s, raw); err != nil {
		return fmt.Errorf("setting %s = %q: %w", st.Key, maskSecret(st.Key, raw), err)
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
			if st.apply != nil && strings.ReplaceAll(CanonicalKey(st.Key), ".", "") == candidate {
				return st.Key
			}
		}
	}
	for _, prefix := range mapPrefixes {
		want := strings.ReplaceAll(CanonicalKey(prefix), ".", "")
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

// validate checks the node's own settings, then has each package validate
// its Config; a package's error names the key that set the field.
func (s *Settings) validate() error {
	for zone, urls := range s.ServiceURLs {
		for _, u := range urls {
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				return fmt.Errorf("setting eureka.client.service-url.%s = %q: want http:// or https:// URLs", zone, maskSecret("", u))
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
	for _, c := range packageConfigs {
		if err := c.validate(s); err != nil {
			return s.blame(c, err)
		}
	}
	return s.validateSecurity()
}

// packageConfig is one package Config inside Settings.
type packageConfig struct {
	field    string // its field in Settings
	validate func(s *Settings) error
}

// packageConfigs are validated in this order; each error is the package's
// own, for the first field it finds wrong.
var packageConfigs = []packageConfig{
	{"Registry", func(s *Settings) error { return s.Registry.Validate() }},
	{"HTTP", func(s *Settings) error { return s.HTTP.Validate() }},
	{"Transport", func(s *Settings) error { return s.Transport.Validate() }},
	{"Sync", func(s *Settings) error { return s.Sync.Validate() }},
	{"AntiEntropy", func(s *Settings) error { return s.AntiEntropy.Validate() }},
	{"Replication", func(s *Settings) error { return s.Replication.Validate() }},
	{"Cluster", func(s *Settings) error { return s.Cluster.Validate() }},
	{"DNS", func(s *Settings) error { return s.DNS.Validate() }},
	{"XDS", func(s *Settings) error { return s.XDS.Validate() }},
	{"HealthCheck", func(s *Settings) error { return s.HealthCheck.Validate() }},
	{"Regions", func(s *Settings) error { return s.Regions.Validate() }},
	{"Drain", func(s *Settings) error { return s.Drain.Validate() }},
}

// blame names the key behind a package's validation error: the key the
// user set whose return to its default makes that error go away. The
// packages need not know the keys, and their limits stay theirs alone.
func (s *Settings) blame(c packageConfig, err error) error {
	d := defaultSettings()
	for i := range settings {
		st := &settings[i]
		raw, set := s.raw[st.Key]
		if !set || st.field == nil || settingConfig[st.Key] != c.field {
			continue
		}
		probe := *s
		reflect.ValueOf(st.field(&probe)).Elem().Set(reflect.ValueOf(st.field(&d)).Elem())
		probe.derive()
		if perr := c.validate(&probe); perr == nil || perr.Error() != err.Error() {
			return fmt.Errorf("setting %s = %q: %w", st.Key, maskSecret(st.Key, raw), err)
		}
	}
	return err
}

// settingConfig maps a key to the package Config (its field in Settings)
// that it sets, or to "" for the node's own settings.
var settingConfig = func() map[string]string {
	m := map[string]string{}
	d := defaultSettings()
	root := reflect.ValueOf(&d).Elem()
	for _, st := range settings {
		if st.field == nil {
			continue
		}
		addr := reflect.ValueOf(st.field(&d)).Pointer()
		for _, c := range packageConfigs {
			f := root.FieldByName(c.field)
			if start := f.Addr().Pointer(); addr >= start && addr < start+f.Type().Size() {
				m[st.Key] = c.field
			}
		}
	}
	return m
}()

// Defaults as a user writes them, from defaultSettings.
func init() {
	d := defaultSettings()
	for i := range settings {
		switch {
		case settings[i].unsetDefault != "":
			settings[i].Default = settings[i].unsetDefault
		case settings[i].format != nil:
			settings[i].Default = settings[i].format(&d)
		}
	}
}

// Typed setting constructors. Those of the packages' fields only parse:
// the package's Validate owns the limits. rangeKey and cmdMsKey bound the
// node's own settings.

func bind[T any](key, help string, field func(*Settings) *T, parse func(raw string) (T, error), format func(T) string) setting {
	return setting{
		Key: key, Help: help,
		apply: func(s *Settings, raw string) error {
			v, err := parse(strings.TrimSpace(raw))
			if err != nil {
				return err
			}
			*field(s) = v
			return nil
		},
		field:  func(s *Settings) any { return field(s) },
		format: func(s *Settings) string { return format(*field(s)) },
	}
}

func parseInt(raw string) (int, error) {
	v, err := strconv.Atoi(raw)
	if err != nil {
		return 0, fmt.Errorf("want a whole number")
	}
	return v, nil
}

// regionURLsKey reads Netflix's region;url,region;url into the map of
// remote regions' URLs.
func regionURLsKey(key, help string) setting {
	return setting{Key: key, Help: help, apply: func(s *Settings, raw string) error {
		m, err := regions.ParseURLsWithName(raw)
		if err != nil {
			return err
		}
		for region, urls := range m {
			s.Regions.URLs[region] = append(s.Regions.URLs[region], urls...)
		}
		return nil
	}}
}

func intKey(key, help string, field func(*Settings) *int) setting {
	return bind(key, help, field, parseInt, strconv.Itoa)
}

func rangeKey(key string, lo, hi int, help string, field func(*Settings) *int) setting {
	return bind(key, help, field, func(raw string) (int, error) {
		v, err := parseInt(raw)
		if err == nil && (v < lo || v > hi) {
			err = fmt.Errorf("want a number from %d to %d", lo, hi)
		}
		return v, err
	}, strconv.Itoa)
}

func int64Key(key, help string, field func(*Settings) *int64) setting {
	return bind(key, help, field, func(raw string) (int64, error) {
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("want a whole number")
		}
		return v, nil
	}, func(v int64) string { return strconv.FormatInt(v, 10) })
}

func floatKey(key, help string, field func(*Settings) *float64) setting {
	return bind(key, help, field, func(raw string) (float64, error) {
		v, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return 0, fmt.Errorf("want a number")
		}
		return v, nil
	}, func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) })
}

func boolKey(key, help string, field func(*Settings) *bool) setting {
	return bind(key, help, field, func(raw string) (bool, error) {
		v, err := strconv.ParseBool(raw)
		if err != nil {
			return false, fmt.Errorf("want true or false")
		}
		return v, nil
	}, strconv.FormatBool)
}

func strKey(key, help string, field func(*Settings) *string) setting {
	return bind(key, help, field, func(raw string) (string, error) { return raw, nil }, func(v string) string { return v })
}

func enumKey[T ~string](key string, allowed []T, help string, field func(*Settings) *T) setting {
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	list := strings.Join(names, ", ")
	return bind(key, help+" One of: "+list+".", field, func(raw string) (T, error) {
		// Spring binds enums relaxed: WHEN_AUTHORIZED is when-authorized.
		v := T(strings.ToLower(raw))
		for _, a := range allowed {
			if CanonicalKey(string(a)) == CanonicalKey(raw) {
				return a, nil
			}
		}
		return v, fmt.Errorf("want one of %s", list)
	}, func(v T) string { return string(v) })
}

// clientAuthKey reads none, want or need as tlsconfig does.
func clientAuthKey(key, help string, field func(*Settings) *tlsconfig.ClientAuth) setting {
	all := []tlsconfig.ClientAuth{tlsconfig.ClientAuthNone, tlsconfig.ClientAuthWant, tlsconfig.ClientAuthNeed}
	names := make([]string, len(all))
	for i, a := range all {
		names[i] = a.String()
	}
	return bind(key, help+" One of: "+strings.Join(names, ", ")+".", field, tlsconfig.ParseClientAuth, tlsconfig.ClientAuth.String)
}

func formatPrefixes(v []netip.Prefix) string {
	out := make([]string, len(v))
	for i, p := range v {
		out[i] = p.String()
	}
	return strings.Join(out, ",")
}

func listKey(key, help string, field func(*Settings) *[]string) setting {
	return bind(key, help, field, func(raw string) ([]string, error) { return splitList(raw), nil },
		func(v []string) string { return strings.Join(v, ",") })
}

// durationKey reads a whole number of unit.
func durationKey(key string, unit time.Duration, min int64, help string, field func(*Settings) *time.Duration) setting {
	return bind(key, help, field, func(raw string) (time.Duration, error) {
		v, err := strconv.ParseInt(raw, 10, 64)
		switch {
		case err != nil:
			return 0, fmt.Errorf("want a whole number")
		case v < min && min == 1:
			return 0, fmt.Errorf("want a positive whole number")
		case v < min:
			return 0, fmt.Errorf("want a whole number, %d or more", min)
		}
		return time.Duration(v) * unit, nil
	}, func(v time.Duration) string { return strconv.FormatInt(int64(v/unit), 10) })
}

func msKey(key, help string, field func(*Settings) *time.Duration) setting {
	return durationKey(key, time.Millisecond, math.MinInt64, help, field)
}

func secondsKey(key, help string, field func(*Settings) *time.Duration) setting {
	return durationKey(key, time.Second, math.MinInt64, help, field)
}

// cmdMsKey is msKey for the node's own settings, at least min.
func cmdMsKey(key string, min int64, help string, field func(*Settings) *time.Duration) setting {
	return durationKey(key, time.Millisecond, min, help, field)
}
