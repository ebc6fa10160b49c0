package cluster

import "sync/atomic"

// delegate is memberlist's Delegate for Muster: it only supplies this node's
// metadata. Muster sends no user messages and no push/pull state, so the
// other methods are no-ops. memberlist may call every method from several
// goroutines at once, sometimes with its node lock held; none blocks.
type delegate struct {
	meta    []byte                 // encoded nodeMeta
	leaving []byte                 // the same with Leaving set
	current atomic.Pointer[[]byte] // meta, or leaving once Shutdown has begun
}

// newDelegate encodes m both ways; Validate has checked that both fit
// memberlist.MetaMaxSize.
func newDelegate(m nodeMeta) (*delegate, error) {
	m.Leaving = false
	meta, err := encodeMeta(m)
	if err != nil {
		return nil, err
	}
	m.Leaving = true
	leaving, err := encodeMeta(m)
	if err != nil {
		return nil, err
	}
	d := &delegate{meta: meta, leaving: leaving}
	d.current.Store(&d.meta)
	return d, nil
}

// setLeaving makes NodeMeta advertise the leave intent from now on.
func (d *delegate) setLeaving() { d.current.Store(&d.leaving) }

// NodeMeta returns this node's metadata. It must fit in limit bytes or
// memberlist panics; Validate guarantees that for memberlist.MetaMaxSize,
// the only limit memberlist passes, so nil here is only a safety net.
func (d *delegate) NodeMeta(limit int) []byte {
	meta := *d.current.Load()
	if len(meta) > limit {
		return nil
	}
	return meta
}

// NotifyMsg ignores user messages: Muster sends none.
func (d *delegate) NotifyMsg([]byte) {}

// GetBroadcasts has nothing to piggyback on gossip.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState adds nothing to push/pull exchanges.
func (d *delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState ignores a peer's push/pull state: there is none.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {}
