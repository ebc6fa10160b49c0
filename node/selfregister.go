package node

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/settings"
)

// selfRegistration registers the node as an instance of its own
// application and renews it like any client (eureka.client.register-with-eureka).
// It talks to the local registry directly; the writes replicate like a
// client's.
type selfRegistration struct {
	reg      *registry.Registry
	instance *registry.Instance
	interval time.Duration
	log      zerolog.Logger
}

// selfInstance describes the node the way Spring's client would: id
// host:app:port, so that two nodes on one host stay distinct.
func selfInstance(s *settings.Settings, host, ip string, port int, now time.Time) *registry.Instance {
	app := strings.ToLower(s.AppName)
	id := s.InstanceID
	if id == "" {
		id = host + ":" + app + ":" + itoa(port)
	}
	// Paths are on the context path, as Spring's client puts them there.
	base := s.Scheme() + "://" + host + ":" + itoa(port) + s.ContextPath()
	// Spring's instance over TLS: the secure port is the port, the plain
	// one is off (eureka.instance.secure-port-enabled).
	plain, secure := registry.Port{Number: port, Enabled: true}, registry.Port{Number: 443, Enabled: false}
	if s.TLSOn() {
		plain, secure = registry.Port{Number: port, Enabled: false}, registry.Port{Number: port, Enabled: true}
	}
	md := map[string]string{"zone": s.Cluster.Zone, "management.port": itoa(port)}
	for k, v := range s.InstanceMetadata {
		md[k] = v
	}
	return &registry.Instance{
		InstanceID:          id,
		HostName:            host,
		App:                 strings.ToUpper(s.AppName),
		IPAddr:              ip,
		Status:              registry.StatusUp,
		OverriddenStatus:    registry.StatusUnknown,
		Port:                plain,
		SecurePort:          secure,
		CountryID:           1,
		DataCenterInfo:      registry.DataCenterInfo{Class: registry.DataCenterClassDefault, Name: "MyOwn"},
		RenewalIntervalSecs: s.InstanceRenewalInterval,
		LeaseDurationSecs:   s.InstanceLeaseDuration,
		Metadata:            registry.NewMetadata(md),
		HomePageURL:         instanceURL(base, s.InstanceHomePageURL, s.InstanceHomePagePath),
		StatusPageURL:       instanceURL(base, s.InstanceStatusPageURL, s.InstanceStatusPagePath),
		HealthCheckURL:      instanceURL(base, s.InstanceHealthCheckURL, s.InstanceHealthCheckPath),
		VIPAddress:          app,
		SecureVIPAddress:    app,
		LastDirtyTimestamp:  now.UnixMilli(),
	}
}

// clusterNodeOf tells the registry which instances are the cluster's own
// nodes: those of the application the nodes register themselves under
// (spring.application.name), this node's and its peers' alike, the
// latter arriving by replication. They are no clients a cold start must
// wait for (registry.Config.ClusterNode): a node registers itself when it
// opens, and its 30 s renewal interval (Spring's default) would otherwise
// hold every read of a cluster started together for 35 s whatever
// eureka.server.expected-client-renewal-interval-seconds says.
func clusterNodeOf(s *settings.Settings) func(*registry.Instance) bool {
	app := strings.ToUpper(s.AppName)
	return func(in *registry.Instance) bool { return in.App == app }
}

// instanceURL is Spring's rule for the instance's URLs: a full URL as
// given, else the path on the node's own base URL.
func instanceURL(base, full, path string) string {
	if full != "" {
		return full
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return base + path
}

func (sr *selfRegistration) run(ctx context.Context) {
	sr.register()
	t := time.NewTicker(sr.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			key := registry.InstanceKey{App: sr.instance.App, ID: sr.instance.ID()}
			if _, err := sr.reg.Apply(registry.CancelOp(key.App, key.ID)); err != nil && !errors.Is(err, registry.ErrInstanceNotFound) {
				sr.log.Warn().Err(err).Msg("cancel self-registration")
			}
			return
		case <-t.C:
			_, err := sr.reg.Apply(registry.RenewOp(sr.instance.App, sr.instance.ID()).Dirty(sr.instance.LastDirtyTimestamp))
			switch {
			case err == nil, errors.Is(err, registry.ErrStaleDirtyTimestamp):
			case errors.Is(err, registry.ErrInstanceNotFound), errors.Is(err, registry.ErrStatusUnknown), errors.Is(err, registry.ErrNewerDirtyTimestamp):
				sr.register()
			default:
				sr.log.Warn().Err(err).Msg("renew self-registration")
			}
		}
	}
}

func (sr *selfRegistration) register() {
	if _, err := sr.reg.Apply(registry.RegisterOp(sr.instance.Clone())); err != nil {
		sr.log.Error().Err(err).Msg("self-registration refused")
		return
	}
	sr.log.Info().Str("app", sr.instance.App).Str("instance_id", sr.instance.ID()).Msg("registered this node")
}
