package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/muster-registry/muster/registry/persist"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/settings"
)

// A cold cluster never serves a falsely empty registry. After syncUp the
// node has the registry from a peer, or it does not; when it does not:
//
//   - with muster.data-dir it loads its own snapshot (registry/persist),
//     every lease counted as renewed now, and serves it;
//   - without one (or with no usable snapshot), when it knows peers and
//     every one of them is starting too (a full cluster restart), none of
//     the configured peers appeared, or the peers it knows could not be
//     reached, it opens but refuses registry reads (403) and /readyz for
//     the cold-start wait: live clients heartbeat meanwhile, get 404 and
//     register again, so when reads open the registry holds every live
//     instance. An unreachable peer (a second node not up yet, a peer URL
//     at an old port) holds reads no longer than a cold start: whatever
//     it holds, the live clients have re-registered here by then, and
//     Eureka's five minutes (wait-time-in-ms-when-sync-empty) would only
//     refuse reads that are already complete.
//
// The wait is one client renewal interval plus settings.ColdStartMargin: the
// interval eureka.server.expected-client-renewal-interval-seconds names,
// or the longest leaseInfo.renewalIntervalInSecs the registering clients
// declare, up to eureka.server.wait-time-in-ms-when-sync-empty
// (registry.RefuseReadsUntilRenewed). An explicit muster.cold-start-wait-ms
// is a fixed wait instead. An explicit wait-time-in-ms-when-sync-empty caps
// every start-up refusal: 0 (as Spring's guides write for a standalone
// server) serves at once, cold or not, and does not wait for syncUp either:
// when no peer answers its first round (the only peer unreachable, every
// peer starting), the node opens and syncUp's other rounds run in the
// background (Settings.SyncInBackground).
//
// Spring's eureka.instance.registry.default-open-for-traffic-count, when a
// file sets it, is followed as Spring follows it: above 0, Spring's
// openForTraffic counts that many instances after an empty sync and serves
// at once, and so does the node; 0 is Eureka's own gate, reads refused for
// wait-time-in-ms-when-sync-empty after a sync that found nothing, even on
// a node without peers. Unset, the rules above apply (Spring's default of
// 1 would serve a restarted cluster's empty registry to every client; see
// docs/migration-from-java-eureka.md).
//
// A node with no peers configured (a single node) serves what it has at
// once, as Eureka does: there is no one else to ask, and a lone node that
// restarts without a data dir would otherwise refuse every new deployment
// for the wait. A lone node whose snapshot was refused (truncated, altered,
// empty, another cluster's) is the exception: it knows it had a registry
// and has lost it, exactly the case of a full restart where no peer has
// it, so it starts cold too.

// Start-up outcomes, for the log and muster_start_state.
const (
	startCopied    = "copied"      // syncUp copied the registry from a peer
	startRestored  = "restored"    // loaded the snapshot from muster.data-dir
	startAlone     = "alone"       // no peers configured: serves what it has
	startCold      = "cold"        // full restart, no data: reads refused for the cold-start wait
	startNoPeer    = "unreachable" // peers known, none reachable: reads refused for the cold-start wait
	startSyncOff   = "sync_off"    // eureka.server.registry-sync-retries = 0
	startOpenCount = "open_count"  // default-open-for-traffic-count > 0 set: Spring's open at once
	startSyncEmpty = "sync_empty"  // default-open-for-traffic-count = 0 set: Eureka's wait-time-in-ms-when-sync-empty
	// wait-time-in-ms-when-sync-empty = 0 and no peer answered syncUp's
	// first round: open at once, syncUp's other rounds in the background.
	startSyncBackground = "sync_background"
)

// The start-up keys whose meaning depends on whether they are set.
const (
	coldStartWaitKey = "muster.cold-start-wait-ms"
	openCountKey     = "eureka.instance.registry.default-open-for-traffic-count"
)

// startRefusal decides, after syncUp and the snapshot, how long registry
// reads are refused and why. snapshotRefused says a snapshot was there but
// refused (restoreSnapshot): the node had a registry it cannot serve.
func startRefusal(s *settings.Settings, res replication.SyncResult, peersExpected, restored, snapshotRefused bool) (time.Duration, string) {
	switch {
	case res.Source != "":
		return 0, startCopied
	case restored:
		return 0, startRestored
	case s.Explicit(openCountKey) && s.DefaultOpenForTrafficCount > 0:
		return 0, startOpenCount
	case s.Explicit(openCountKey):
		return s.WaitWhenSyncEmpty, startSyncEmpty
	case s.Sync.Attempts <= 0 && !snapshotRefused:
		return 0, startSyncOff
	case res.AllStarting:
		return s.ColdStartWait, startCold
	case !res.PeersKnown && peersExpected:
		return s.ColdStartWait, startCold
	case res.PeersKnown && !res.Reached:
		return s.ColdStartWait, startNoPeer
	case snapshotRefused:
		return s.ColdStartWait, startCold
	}
	return 0, startAlone
}

// followsClients tells whether a start-up refusal of state stretches with
// the renewal intervals registering clients declare (RefuseReadsUntilRenewed)
// rather than being a fixed wait.
func followsClients(s *settings.Settings, state string) bool {
	return (state == startCold || state == startNoPeer) && !s.Explicit(coldStartWaitKey)
}

// snapshotMetrics are the data-dir figures.
type snapshotMetrics struct {
	writeSeconds prometheus.Gauge
	bytes        prometheus.Gauge
	instances    prometheus.Gauge
	lastSuccess  prometheus.Gauge
	writes       *prometheus.CounterVec
	Load         *prometheus.GaugeVec
	startState   *prometheus.GaugeVec
}

func newSnapshotMetrics(reg prometheus.Registerer) *snapshotMetrics {
	m := &snapshotMetrics{
		writeSeconds: prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_snapshot_write_duration_seconds",
			Help: "How long the last registry snapshot write to muster.data-dir took (encode, fsync, rename)."}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_snapshot_bytes",
			Help: "Size of the last registry snapshot written."}),
		instances: prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_snapshot_instances",
			Help: "Instances in the last registry snapshot written."}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_snapshot_last_success_timestamp_seconds",
			Help: "Unix time of the last successful registry snapshot write (0: none yet)."}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_snapshot_writes_total",
			Help: "Registry snapshot writes by result (ok, error)."}, []string{"result"}),
		Load: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "muster_snapshot_load",
			Help: "1 for the outcome of loading the snapshot at start: loaded, empty, not_found, corrupt, foreign, unsupported, not_needed (a peer had the registry), disabled."}, []string{"outcome"}),
		startState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "muster_start_state",
			Help: "1 for how the node opened: copied (from a peer), restored (snapshot), alone, cold (full restart without data: reads refused for muster.cold-start-wait-ms), unreachable (peers known, none reached: the same wait), sync_off, open_count (default-open-for-traffic-count > 0: open at once), sync_empty (default-open-for-traffic-count = 0: wait-time-in-ms-when-sync-empty), sync_background (wait-time-in-ms-when-sync-empty 0 and no peer answered syncUp's first round: open at once, syncUp goes on in the background)."}, []string{"state"}),
	}
	m.writes.WithLabelValues("ok")
	m.writes.WithLabelValues("error")
	reg.MustRegister(m.writeSeconds, m.bytes, m.instances, m.lastSuccess, m.writes, m.Load, m.startState)
	return m
}

// snapshotWriter writes the registry to muster.data-dir; one write at a
// time, skipped when the registry's version has not moved.
type snapshotWriter struct {
	// mu guards written and version, and makes writes one at a time.
	mu      sync.Mutex
	written bool
	version uint64
}

// restoreSnapshot loads the data dir's snapshot into the registry, before
// OpenForTraffic, when no peer had the registry. It reports whether it
// restored at least one instance, and whether a snapshot was there but
// refused (set aside).
func (n *Node) restoreSnapshot() (restored, refused bool) {
	dir := n.settings.DataDir
	f, err := persist.ReadFile(dir, n.settings.ClusterName)
	h, instances := f.Header, f.Instances
	switch {
	case errors.Is(err, persist.ErrNotFound):
		n.snapMetrics.Load.WithLabelValues("not_found").Set(1)
		n.log.Info().Str("file", persist.Path(dir)).Msg("no registry snapshot to load (a new data dir)")
		return false, false
	case err != nil:
		outcome := "corrupt"
		if errors.Is(err, persist.ErrForeign) {
			outcome = "foreign"
		} else if errors.Is(err, persist.ErrVersion) {
			outcome = "unsupported"
		}
		n.snapMetrics.Load.WithLabelValues(outcome).Set(1)
		ev := n.log.Error().Str("file", persist.Path(dir)).Str("reason", outcome).Err(err)
		if aside, err := persist.SetAside(dir, time.Now()); err == nil {
			ev = ev.Str("moved_to", aside)
		} else {
			ev = ev.AnErr("set_aside_error", err)
		}
		ev.Msg("registry snapshot refused, nothing of it loaded")
		return false, true
	case len(instances) == 0:
		// The cancels still count: without their tombstones a peer's
		// older copy could bring them back.
		persist.RestoreTombstones(n.reg, h.Written, f.Tombstones, time.Now())
		n.snapMetrics.Load.WithLabelValues("empty").Set(1)
		n.log.Info().Str("file", persist.Path(dir)).Time("written", h.Written).Msg("registry snapshot holds no instance")
		return false, false
	}
	stored, rejected := persist.Restore(n.reg, instances)
	// After the instances, so a cancel newer than a restored copy removes
	// it under the winner rule.
	tombs := persist.RestoreTombstones(n.reg, h.Written, f.Tombstones, time.Now())
	for i, err := range rejected {
		if i == 3 {
			n.log.Warn().Int("more", len(rejected)-3).Msg("snapshot: more instances refused")
			break
		}
		n.log.Warn().Err(err).Msg("snapshot: instance refused by the registry")
	}
	n.snapMetrics.Load.WithLabelValues("loaded").Set(1)
	n.log.Info().Str("file", persist.Path(dir)).Str("written_by", h.Node).Time("written", h.Written).
		Dur("age", time.Since(h.Written).Round(time.Second)).Int("instances", stored).Int("tombstones", tombs).
		Msg("no peer had the registry: loaded the snapshot, every lease counted as renewed now")
	return stored > 0, false
}

// restoreSnapshotTombstones applies the snapshot's tombstones after
// syncUp copied the registry from a peer: that peer may have restarted
// from an older snapshot that still holds an instance cancelled here, and
// the cancel, newer under the winner rule, removes the copy (anti-entropy
// then carries it to the peer). The instances of the file are not used.
// A file that cannot be read is left as it is (the next write replaces
// it), as before tombstones were kept.
func (n *Node) restoreSnapshotTombstones() {
	dir := n.settings.DataDir
	f, err := persist.ReadFile(dir, n.settings.ClusterName)
	if errors.Is(err, persist.ErrNotFound) {
		return
	}
	if err != nil {
		n.log.Warn().Err(err).Msg("registry snapshot not read for its tombstones; the next write replaces it")
		return
	}
	kept := persist.RestoreTombstones(n.reg, f.Written, f.Tombstones, time.Now())
	n.log.Info().Str("file", persist.Path(dir)).Int("tombstones", kept).Msg("registry copied from a peer: the snapshot's cancels applied over it")
}

// writeSnapshot writes the registry to the data dir if it changed since
// the last write. A node that refuses reads (it opened without the
// registry) writes nothing: what it holds may be a fraction of the fleet,
// and the snapshot on disk is better.
func (n *Node) writeSnapshot(why string) {
	if n.settings.DataDir == "" || !n.reg.ReadsAllowed() {
		return
	}
	w := &n.snapWriter
	w.mu.Lock()
	defer w.mu.Unlock()
	snap := n.reg.Snapshot()
	if w.written && snap.Version == w.version {
		return
	}
	start := time.Now()
	info, err := persist.Write(n.settings.DataDir, n.settings.ClusterName, n.name, snap, n.reg.LiveTombstones(), start)
	took := time.Since(start)
	if err != nil {
		n.snapMetrics.writes.WithLabelValues("error").Inc()
		n.log.Error().Err(err).Str("why", why).Msg("registry snapshot not written; the previous one is kept")
		return
	}
	w.written, w.version = true, info.Version
	n.snapMetrics.writes.WithLabelValues("ok").Inc()
	n.snapMetrics.writeSeconds.Set(took.Seconds())
	n.snapMetrics.bytes.Set(float64(info.Bytes))
	n.snapMetrics.instances.Set(float64(info.Instances))
	n.snapMetrics.lastSuccess.Set(float64(time.Now().UnixNano()) / 1e9)
	n.log.Debug().Str("file", info.Path).Str("why", why).Int("instances", info.Instances).Int("tombstones", info.Tombstones).Int64("bytes", info.Bytes).
		Dur("took", took).Msg("registry snapshot written")
}

// snapshotLoop writes the snapshot every muster.snapshot-interval-ms.
func (n *Node) snapshotLoop(ctx context.Context) {
	t := time.NewTicker(n.settings.SnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.writeSnapshot("periodic")
		}
	}
}
