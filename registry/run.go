package registry

import (
	"context"
	"time"
)

// Run drives the periodic tasks until ctx ends: eviction every
// EvictionInterval, the renewal-threshold recount every
// RenewThresholdUpdateInterval, and delta pruning every
// DeltaRetentionInterval. It is the only code in the package with tickers;
// tests call EvictExpired, UpdateRenewThreshold and PruneDeltas on a moved
// clock instead.
func (r *Registry) Run(ctx context.Context) {
	evict := time.NewTicker(r.cfg.EvictionInterval)
	defer evict.Stop()
	threshold := time.NewTicker(r.cfg.RenewThresholdUpdateInterval)
	defer threshold.Stop()
	prune := time.NewTicker(r.cfg.DeltaRetentionInterval)
	defer prune.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-evict.C:
			r.EvictExpired()
		case <-threshold.C:
			r.UpdateRenewThreshold()
		case <-prune.C:
			r.PruneDeltas()
		}
	}
}
