package settings

import (
	"net/url"
	"strings"
)

// Spring keys that Muster reads under another name: Spring Boot 1.x's
// security user is Spring Boot 2's spring.security.user.
var springAliases = map[string]string{
	"security.user.name":     "spring.security.user.name",
	"security.user.password": "spring.security.user.password",
	// InstanceRegistryProperties reads its older names too (@Value).
	"eureka.server.default-open-for-traffic-count": "eureka.instance.registry.default-open-for-traffic-count",
}

// springKeys are the properties of Spring Cloud Netflix's
// EurekaServerConfigBean, EurekaClientConfigBean, EurekaInstanceConfigBean
// and EurekaDashboardProperties, and of Spring Boot's server and security,
// that Muster has no use for. Each is accepted, so that a Spring server's
// file starts unchanged, with one warning that says what Muster does
// instead. The keys Muster honours are settings (config.go); a key of
// Muster's namespaces in neither list is a typo and an error.
var springKeys = map[string]string{
	// EurekaServerConfigBean
	"eureka.server.a-w-s-access-id":                                       "no AWS integration: Muster does not bind EIPs or read ASGs",
	"eureka.server.a-w-s-secret-key":                                      "no AWS integration",
	"eureka.server.e-i-p-bind-rebind-retries":                             "no AWS EIP binding",
	"eureka.server.e-i-p-binding-retry-interval-ms":                       "no AWS EIP binding",
	"eureka.server.e-i-p-binding-retry-interval-ms-when-unbound":          "no AWS EIP binding",
	"eureka.server.binding-strategy":                                      "no AWS EIP or Route 53 binding",
	"eureka.server.route53-bind-rebind-retries":                           "no Route 53 binding",
	"eureka.server.route53-binding-retry-interval-ms":                     "no Route 53 binding",
	"eureka.server.route53-domain-t-t-l":                                  "no Route 53 binding; DNS answers use muster.dns.ttl-seconds",
	"eureka.server.a-s-g-query-timeout-ms":                                "no AWS auto-scaling groups",
	"eureka.server.a-s-g-update-interval-ms":                              "no AWS auto-scaling groups",
	"eureka.server.a-s-g-cache-expiry-timeout-ms":                         "no AWS auto-scaling groups",
	"eureka.server.list-auto-scaling-groups-role-name":                    "no AWS auto-scaling groups",
	"eureka.server.prime-aws-replica-connections":                         "no AWS integration",
	"eureka.server.peer-eureka-nodes-update-interval-ms":                  "peers come from memberlist as they join and leave, and the static service-url peers",
	"eureka.server.peer-eureka-status-refresh-time-interval-ms":           "peer state comes from memberlist's failure detector",
	"eureka.server.number-of-replication-retries":                         "a failed batch is retried by the peer's sender until the task ages out (max-time-for-replication); anti-entropy repairs the rest",
	"eureka.server.peer-node-total-connections":                           "one keep-alive connection pool per peer, sized by Go's HTTP client",
	"eureka.server.peer-node-total-connections-per-host":                  "one keep-alive connection pool per peer, sized by Go's HTTP client",
	"eureka.server.peer-node-connection-idle-timeout-seconds":             "idle peer connections are closed by Go's HTTP client",
	"eureka.server.response-cache-auto-expiration-in-seconds":             "payloads are re-encoded on change, not on a timer",
	"eureka.server.response-cache-update-interval-ms":                     "Muster has no read-only cache: reads see writes at once",
	"eureka.server.use-read-only-response-cache":                          "Muster has no read-only cache: reads see writes at once",
	"eureka.server.initial-capacity-of-response-cache":                    "sizing of Eureka's cache, which Muster does not have",
	"eureka.server.max-idle-thread-in-minutes-age-for-status-replication": "status changes replicate in the per-peer batches",
	"eureka.server.min-threads-for-status-replication":                    "status changes replicate in the per-peer batches",
	"eureka.server.max-threads-for-status-replication":                    "status changes replicate in the per-peer batches",
	"eureka.server.max-elements-in-status-replication-pool":               "status changes share the peer queue (max-elements-in-peer-replication-pool)",
	"eureka.server.max-idle-thread-age-in-minutes-for-peer-replication":   "one sender goroutine per peer, no thread pool",
	"eureka.server.min-threads-for-peer-replication":                      "one sender per peer sends batches by back-pressure",
	"eureka.server.max-threads-for-peer-replication":                      "one sender per peer sends batches by back-pressure",
	"eureka.server.batch-replication":                                     "replication is always batched",
	"eureka.server.enable-replicated-request-compression":                 "batches are sent uncompressed",
	"eureka.server.remote-region-total-connections":                       "one connection pool per remote region, sized by Go's HTTP client",
	"eureka.server.remote-region-total-connections-per-host":              "one connection pool per remote region, sized by Go's HTTP client",
	"eureka.server.remote-region-connection-idle-timeout-seconds":         "idle remote region connections are closed by Go's HTTP client",
	"eureka.server.g-zip-content-from-remote-region":                      "remote region fetches always accept gzip",
	"eureka.server.remote-region-urls":                                    "a remote region needs a name: use eureka.server.remote-region-urls-with-name (Eureka's registry reads only that)",
	"eureka.server.remote-region-fetch-thread-pool-size":                  "one fetch goroutine per remote region",
	"eureka.server.rate-limiter-enabled":                                  "no rate limiter on the Eureka API; muster.max-connections and muster.watch.max-watchers bound what clients hold",
	"eureka.server.rate-limiter-throttle-standard-clients":                "no rate limiter on the Eureka API",
	"eureka.server.rate-limiter-privileged-clients":                       "no rate limiter on the Eureka API",
	"eureka.server.rate-limiter-burst-size":                               "no rate limiter on the Eureka API",
	"eureka.server.rate-limiter-registry-fetch-average-rate":              "no rate limiter on the Eureka API",
	"eureka.server.rate-limiter-full-fetch-average-rate":                  "no rate limiter on the Eureka API",
	"eureka.server.log-identity-headers":                                  "the access log records every request's client",
	"eureka.server.json-codec-name":                                       "Muster has its own JSON and XML codecs",
	"eureka.server.xml-codec-name":                                        "Muster has its own JSON and XML codecs",
	"eureka.server.min-available-instances-for-peer-replication":          "readiness is /readyz (syncUp done)",
	"eureka.server.health-status-min-number-of-available-peers":           "readiness is /readyz (syncUp done)",
	"eureka.server.my-url":                                                "peers are told apart by node identity; the node's own URL comes from eureka.instance.hostname and server.port",
	"eureka.server.wait-time-in-ms-when-sync-empty-dashboard":             "",
	"eureka.server.expected-number-of-renews-per-min":                     "the older name of eureka.instance.registry.expected-number-of-clients-sending-renews: self-preservation's expected renewals are counted from the leases the node holds",
	"eureka.instance.registry.expected-number-of-clients-sending-renews":  "self-preservation's expected renewals are counted from the leases the node holds (each instance's own interval), never seeded with a fixed count, so a fresh node does not start in self-preservation",
	"eureka.server.metrics.enabled":                                       "metrics are always on at /metrics and /actuator/prometheus",
	"eureka.server.experimental":                                          "no experimental Eureka switches",
	// EurekaClientConfigBean: the node's own client. Muster holds the
	// registry itself, so fetching and its tuning have no meaning.
	"eureka.client.fetch-registry":                                     "the node holds the whole registry itself",
	"eureka.client.registry-fetch-interval-seconds":                    "the node holds the whole registry itself",
	"eureka.client.instance-info-replication-interval-seconds":         "the node's own instance is written to its registry directly",
	"eureka.client.initial-instance-info-replication-interval-seconds": "the node's own instance is written to its registry directly",
	"eureka.client.eureka-service-url-poll-interval-seconds":           "service-url is read at start",
	"eureka.client.proxy-host":                                         "peers are called directly, without a proxy",
	"eureka.client.proxy-port":                                         "peers are called directly, without a proxy",
	"eureka.client.proxy-user-name":                                    "peers are called directly, without a proxy",
	"eureka.client.proxy-password":                                     "peers are called directly, without a proxy",
	"eureka.client.eureka-server-read-timeout-seconds":                 "peer calls use eureka.server.peer-node-read-timeout-ms",
	"eureka.client.eureka-server-connect-timeout-seconds":              "peer calls use eureka.server.peer-node-connect-timeout-ms",
	"eureka.client.backup-registry-impl":                               "the backup at start is a peer's registry or muster.data-dir's snapshot",
	"eureka.client.eureka-server-total-connections":                    "one connection pool per peer",
	"eureka.client.eureka-server-total-connections-per-host":           "one connection pool per peer",
	"eureka.client.eureka-server-u-r-l-context":                        "no DNS-based discovery of peers; memberlist finds them",
	"eureka.client.eureka-server-port":                                 "no DNS-based discovery of peers; memberlist finds them",
	"eureka.client.eureka-server-d-n-s-name":                           "no DNS-based discovery of peers; memberlist finds them",
	"eureka.client.use-dns-for-fetching-service-urls":                  "no DNS-based discovery of peers; memberlist finds them",
	"eureka.client.eureka-connection-idle-timeout-seconds":             "idle peer connections are closed by Go's HTTP client",
	"eureka.client.registry-refresh-single-vip-address":                "the node holds the whole registry itself",
	"eureka.client.heartbeat-executor-thread-pool-size":                "the node's own heartbeat is one goroutine",
	"eureka.client.heartbeat-executor-exponential-back-off-bound":      "the node's own heartbeat cannot fail: it is local",
	"eureka.client.cache-refresh-executor-thread-pool-size":            "the node holds the whole registry itself",
	"eureka.client.cache-refresh-executor-exponential-back-off-bound":  "the node holds the whole registry itself",
	"eureka.client.g-zip-content":                                      "peer syncUp always accepts gzip",
	"eureka.client.prefer-same-zone-eureka":                            "syncUp always prefers peers of the same zone",
	"eureka.client.log-delta-diff":                                     "the node holds the whole registry itself",
	"eureka.client.disable-delta":                                      "the node's own client does not fetch (eureka.server.disable-delta is the server's switch)",
	"eureka.client.fetch-remote-regions-registry":                      "the node's own client does not fetch; the node serves remote regions itself (eureka.server.remote-region-urls-with-name)",
	"eureka.client.availability-zones":                                 "the node's zone is cluster.zone",
	"eureka.client.filter-only-up-instances":                           "the node holds the whole registry itself",
	"eureka.client.dollar-replacement":                                 "the XML codec escapes $ as Eureka's default does",
	"eureka.client.escape-char-replacement":                            "the XML codec escapes _ as Eureka's default does",
	"eureka.client.allow-redirects":                                    "Muster never redirects a client",
	"eureka.client.on-demand-update-status-change":                     "the node's own status is written to its registry directly",
	"eureka.client.encoder-name":                                       "Muster has its own codecs",
	"eureka.client.decoder-name":                                       "Muster has its own codecs",
	"eureka.client.client-data-accept":                                 "Muster has its own codecs",
	"eureka.client.should-unregister-on-shutdown":                      "the node always cancels its own registration on shutdown",
	"eureka.client.should-enforce-registration-at-init":                "the node registers itself at start when eureka.client.register-with-eureka is true",
	"eureka.client.order":                                              "no Spring DiscoveryClient ordering",
	"eureka.client.healthcheck.enabled":                                "the node's own instance is UP while it serves; its health is /actuator/health",
	"eureka.client.refresh.enable":                                     "no Spring Cloud refresh scope",
	"eureka.client.jersey.enabled":                                     "no Jersey: Muster's HTTP client is Go's",
	"eureka.client.webclient.enabled":                                  "no WebClient: Muster's HTTP client is Go's",
	"eureka.client.restclient.enabled":                                 "no RestClient: Muster's HTTP client is Go's",
	"eureka.client.rest-template-timeout":                              "peer calls use eureka.server.peer-node-*-timeout-ms",
	"eureka.client.transport":                                          "the peer transport is Muster's own (eureka.server.peer-node-*)",
	"eureka.client.tls":                                                "peers are called with server.ssl.* (the node's certificate and trust bundle)",
	"eureka.client.experimental":                                       "no experimental Eureka switches",
	// EurekaInstanceConfigBean: the node's own registration.
	"eureka.instance.appname":                          "the app name is spring.application.name",
	"eureka.instance.app-group-name":                   "the node registers without an app group",
	"eureka.instance.instance-enabled-onit":            "the node's own instance is UP from the start",
	"eureka.instance.non-secure-port":                  "the node registers server.port",
	"eureka.instance.secure-port":                      "the node registers server.port as its secure port when server.ssl is on",
	"eureka.instance.non-secure-port-enabled":          "the plain port is enabled unless server.ssl is on",
	"eureka.instance.secure-port-enabled":              "the secure port is enabled when server.ssl is on",
	"eureka.instance.virtual-host-name":                "the VIP address is spring.application.name",
	"eureka.instance.secure-virtual-host-name":         "the secure VIP address is spring.application.name",
	"eureka.instance.a-s-g-name":                       "no AWS auto-scaling groups",
	"eureka.instance.data-center-info":                 "the node registers as MyOwn",
	"eureka.instance.secure-health-check-url":          "the health check URL follows server.ssl (eureka.instance.health-check-url)",
	"eureka.instance.namespace":                        "no Archaius namespace",
	"eureka.instance.initial-status":                   "the node's own instance is UP from the start",
	"eureka.instance.default-address-resolution-order": "the address is eureka.instance.ip-address or the one memberlist advertises",
	"eureka.instance.environment":                      "the label on the dashboard is eureka.environment",
	"eureka.instance.async-client-initialization":      "the node's own registration needs no client",
	// EurekaDashboardProperties (path and enabled are settings).
	// Spring Boot's security user beyond name and password.
	"spring.security.user.roles": "the user of spring.security.user is Muster's admin; more users and roles: muster.auth.users",
	"security.user.role":         "the user of security.user is Muster's admin; more users and roles: muster.auth.users",
	"security.basic.enabled":     "authentication is on when a user password is set; leave the password out for an open registry",
	"security.basic.realm":       "the realm is Muster's own",
	"security.basic.path":        "authentication covers every path but the probes",
	// Spring Boot's server: Muster's HTTP server is its own.
	"server.ssl.protocol":                 "TLS 1.2 or later, negotiated by Go",
	"server.ssl.enabled-protocols":        "TLS 1.2 or later, negotiated by Go",
	"server.ssl.ciphers":                  "Go's cipher suites",
	"server.ssl.key-store-provider":       "",
	"server.ssl.trust-store-provider":     "",
	"server.ssl.bundle":                   "use the server.ssl key and certificate keys",
	"server.servlet":                      "Muster is not a servlet container (server.servlet.context-path is read)",
	"server.tomcat":                       "Muster's HTTP server is its own (limits: muster.max-connections, muster.body-read-timeout-ms)",
	"server.jetty":                        "Muster's HTTP server is its own",
	"server.undertow":                     "Muster's HTTP server is its own",
	"server.netty":                        "Muster's HTTP server is its own",
	"server.compression":                  "registry reads are gzip-compressed when the client accepts it",
	"server.http2":                        "HTTP/2 is negotiated over TLS",
	"server.error":                        "errors are Muster's own JSON bodies",
	"server.shutdown":                     "shutdown is always graceful (muster.shutdown-timeout-ms)",
	"server.forward-headers-strategy":     "forwarded headers are not read",
	"server.use-forward-headers":          "forwarded headers are not read",
	"server.max-http-header-size":         "Go's limit of 1 MiB of headers",
	"server.max-http-request-header-size": "Go's limit of 1 MiB of headers",
	"server.connection-timeout":           "muster.body-read-timeout-ms bounds a slow request",
	"server.session":                      "Muster keeps no HTTP session",
	"server.reactive":                     "Muster's HTTP server is its own",
	"server.display-name":                 "",
}

// musterNamespaces are where a key must be known: a key there that is no
// setting and no Spring key is a typo. Keys elsewhere belong to the
// application or to other libraries (jhipster.*, zuul.*, logging.*) and
// are ignored, at debug level.
var musterNamespaces = []string{"eureka.", "server.", "muster.", "cluster."}

// loaderKeys are read by the loader itself (profiles, documents, more
// files, and the Config Server client).
var loaderKeys = []string{"spring.profiles", "spring.config.activate.", "spring.profiles.active", "spring.profiles.include", "spring.profiles.default",
	"spring.profiles.group.", "spring.config.location", "spring.config.name", "spring.config.additional-location", "spring.config.import",
	"spring.cloud.config.uri", "spring.cloud.config.name", "spring.cloud.config.profile", "spring.cloud.config.label",
	"spring.cloud.config.username", "spring.cloud.config.password", "spring.cloud.config.token", "spring.cloud.config.fail-fast",
	"spring.cloud.config.retry.", "spring.cloud.config.request-connect-timeout", "spring.cloud.config.request-read-timeout", "spring.cloud.config.enabled"}

var springKeysByCanonical = func() map[string]string {
	m := map[string]string{}
	for k := range springKeys {
		m[CanonicalKey(k)] = k
	}
	for alias := range springAliases {
		m[CanonicalKey(alias)] = alias
	}
	return m
}()

// springKeyOf returns the Spring key (as listed) that a key is, or is
// under (server.tomcat.max-threads is under server.tomcat; a map's
// entries are under the map).
func springKeyOf(c string) (string, bool) {
	for k := c; k != ""; {
		if key, ok := springKeysByCanonical[k]; ok {
			return key, true
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return "", false
}

func inMusterNamespace(c string) bool {
	for _, ns := range musterNamespaces {
		if strings.HasPrefix(c, ns) {
			return true
		}
	}
	return false
}

func isLoaderKey(c string) bool {
	for _, k := range loaderKeys {
		if ck := CanonicalKey(k); c == ck || strings.HasPrefix(c, ck+".") || strings.HasSuffix(ck, ".") && strings.HasPrefix(c, ck) {
			return true
		}
	}
	return false
}

// secretKey tells whether a key's value must never be shown.
func secretKey(key string) bool {
	c := CanonicalKey(key)
	for _, word := range []string{"password", "secret", "token", "credential", "accesskey"} {
		if strings.Contains(c, word) {
			return true
		}
	}
	return false
}

// maskSecret shows a value, or stars for a secret key's; the passwords
// of URLs (a service-url with a Java peer's credentials) are starred too.
func maskSecret(key, value string) string {
	if value != "" && secretKey(key) {
		return "******"
	}
	if !strings.Contains(value, "@") {
		return value
	}
	parts := strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ';' })
	for _, p := range parts {
		p = strings.TrimSpace(p)
		// An import's URL: optional:configserver:http://user:pw@host.
		raw := strings.TrimPrefix(strings.TrimPrefix(p, "optional:"), "configserver:")
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), "******")
				value = strings.Replace(value, raw, strings.Replace(u.String(), url.QueryEscape("******"), "******", 1), 1)
			}
		}
	}
	return value
}

// maskNote stars the value in a placeholder note (${name} = "v" from …)
// when the placeholder or the key names a secret.
func maskNote(key, note string) string {
	inner, rest, ok := strings.Cut(strings.TrimPrefix(note, "${"), "} = ")
	if !ok {
		return note
	}
	name, _, hasDefault := strings.Cut(inner, ":")
	if !secretKey(name) && !secretKey(key) {
		return note
	}
	if inner = name; hasDefault {
		inner += ":******"
	}
	from := ""
	if end := strings.LastIndex(rest, "\" "); end >= 0 {
		from = rest[end+1:]
	}
	return "${" + inner + "} = ******" + from
}
