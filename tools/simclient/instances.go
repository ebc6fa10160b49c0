package simclient

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/muster-registry/muster/client"
)

// instance is one simulated instance. It is owned by one goroutine at a
// time (the registration pool, a renewal worker, the cancel pool; see
// schedule.go), so its fields need no lock.
type instance struct {
	// inst is what the instance registers.
	inst client.Instance
	// lastDirty is its lastDirtyTimestamp, ms since epoch (Eureka wire):
	// raised before every re-registration, so the server takes the new
	// registration over any copy it still holds.
	lastDirty int64
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
	// leaseInfo carries whole seconds, at least 1.
	renew, lease := time.Duration(wholeSeconds(cfg.RenewalInterval))*time.Second, time.Duration(wholeSeconds(cfg.LeaseDuration))*time.Second
	for i := range out {
		a, n := i%cfg.Apps, i/cfg.Apps
		app := appName(a, cfg.Apps)
		vip := strings.ToLower(app)
		id := fmt.Sprintf("%s-%s-%d", cfg.IDPrefix, vip, n)
		base := "http://" + id + ":8080/"
		out[i] = instance{
			inst: client.Instance{
				App:              app,
				ID:               id,
				HostName:         id,
				IPAddr:           ipAddr(net, i),
				Port:             8080,
				Status:           client.StatusUp,
				Zone:             cfg.Zone,
				VIPAddress:       vip,
				SecureVIPAddress: vip,
				HomePageURL:      base,
				StatusPageURL:    base + "actuator/info",
				HealthCheckURL:   base + "actuator/health",
				RenewalInterval:  renew,
				LeaseDuration:    lease,
			},
			lastDirty: ms,
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
