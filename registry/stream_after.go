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
	o.mu.Lock()
	size := uint64(len(o.ring))
	next := seq + 1
	if seq > o.head || (o.head >= size && seq < o.head-size) {
		next, resync = o.head+1, true
	}
	c = &Cursor{o: o, next: next, wake: make(chan struct{}, 1)}
	o.mu.Unlock()
	o.cursorsMu.Lock()
	var list []*Cursor
	if cs := o.cursors.Load(); cs != nil {
		list = append(list, *cs...)
	}
	list = append(list, c)
	o.cursors.Store(&list)
	o.cursorsMu.Unlock()
	// Events may be waiting already (a resume), or have been appended
	// before the cursor was listed: Ready may fire spuriously, never late.
	c.wake <- struct{}{}
	return c, resync
}
