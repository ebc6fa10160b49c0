package registry

// SubscribeAfter returns a cursor that resumes after the event with Seq
// seq, for a consumer that saw the changes up to seq before (a watch stream
// resumed with its last index). When those events are no longer in the
// outbox, or seq is ahead of the newest event (it came from before a
// restart of this node), the cursor is placed after the newest event and
// resync is true: the consumer must rebuild its state from a Snapshot, as
// one that fell behind. Close the cursor when done.
func (r *Registry) SubscribeAfter(seq uint64) (c *Cursor, resync bool) {
	o := r.out
	size := uint64(len(o.ring))
	c, resync = o.subscribe(func(head uint64) (uint64, bool) {
		if seq > head || (head >= size && seq < head-size) {
			return head + 1, true
		}
		return seq + 1, false
	})
	// Events may be waiting already (a resume), or have been appended
	// before the cursor was listed: Ready may fire spuriously, never late.
	c.wake <- struct{}{}
	return c, resync
}
