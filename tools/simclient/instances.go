package simclient

import (
	"fmt"
	"hash/fnv"
	"net/url"
	"strings"
	"time"

	"github.com/muster-registry/muster/registry"
)

// instance is one simulated instance. It is owned by one goroutine at a
// time (the registration pool, a renewal worker, the cancel pool; see
// schedule.go), so its fields need no lock.
type instance struct {
	// inst is what the instance registers; replaced by a copy when its
	// lastDirtyTimestamp changes, never modified.
	inst *registry.Instance
	// path is "apps/<APP>/<id>", relative to a server URL.
	path string
	// registered is true after a successful register, false after a
	// cancel.
	registered bool
}

// appName is the name of the a-th of apps applications: APP-00, APP-01, …
// with at least two digits, zero-padded to the width of the largest.
func appName(a, apps int) string {
	width := max(2, len(fmt.Sprint(apps-1)))
	return fmt.Sprintf("APP-%0*d", width, a)
}

// buildInstances makes the fleet's instances: instance i is the
// (i div Apps)-th of app i mod Apps, so apps get equal shares.
func buildInstances(cfg Config, now time.Time) []instance {
	out := make([]instance, cfg.Instances)
	ms := now.UnixMilli()
	net := prefixOctet(cfg.IDPrefix)
	renewSecs, leaseSecs := wholeSeconds(cfg.RenewalInterval), wholeSeconds(cfg.LeaseDuration)
	md := registry.NewMetadata(map[string]string{"zone": cfg.Zone})
	for i := range out {
		a, n := i%cfg.Apps, i/cfg.Apps
		app := appName(a, cfg.Apps)
		vip := strings.ToLower(app)
		id := fmt.Sprintf("%s-%s-%d", cfg.IDPrefix, vip, n)
		base := "http://" + id + ":8080/"
		out[i] = instance{
			inst: &registry.Instance{
				InstanceID:       id,
				HostName:         id,
				App:              app,
				IPAddr:           ipAddr(net, i),
				Status:           registry.StatusUp,
				OverriddenStatus: registry.StatusUnknown,
				Port:             registry.Port{Number: 8080, Enabled: true},
				SecurePort:       registry.Port{Number: 443},
				CountryID:        1,
				DataCenterInfo:   registry.DataCenterInfo{Class: registry.DataCenterClassDefault, Name: "MyOwn"},

				RenewalIntervalSecs: renewSecs,
				LeaseDurationSecs:   leaseSecs,
				Metadata:            md,

				HomePageURL:          base,
				StatusPageURL:        base + "actuator/info",
				HealthCheckURL:       base + "actuator/health",
				VIPAddress:           vip,
				SecureVIPAddress:     vip,
				LastUpdatedTimestamp: ms,
				LastDirtyTimestamp:   ms,
				ActionType:           registry.ActionAdded,
			},
			path: "apps/" + url.PathEscape(app) + "/" + url.PathEscape(id),
		}
	}
	return out
}

// wholeSeconds rounds d to whole seconds, at least 1, for leaseInfo.
func wholeSeconds(d time.Duration) int {
	return max(1, int(d.Round(time.Second)/time.Second))
}

// prefixOctet derives the second octet of the fleet's 10.x.y.z addresses
// from its id prefix, so fleets with different prefixes get different
// addresses (most of the time; they are labels, nothing connects to them).
func prefixOctet(prefix string) int {
	h := fnv.New32a()
	h.Write([]byte(prefix))
	return int(h.Sum32() % 256)
}

// ipAddr is the i-th address of a fleet: 10.<net+i/65536>.<i/256>.<i>.
func ipAddr(net, i int) string {
	return fmt.Sprintf("10.%d.%d.%d", (net+i>>16)%256, (i>>8)%256, i%256)
}
