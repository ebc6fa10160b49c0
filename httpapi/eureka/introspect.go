package eureka

// The API seen from inside, for the HTTP layer's black-box tests (which
// reach it through httpapi's export_test.go) and for diagnosis: functions,
// not methods, so they stay out of the API's own method set.

// WatchState reports, for tests, how many blocking fetches wait on app and
// whether the channel they wait on is still open (not yet woken).
func WatchState(s *API, app string) (waiters int, armed bool) {
	h := s.watch
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.apps[app]
	if a == nil {
		return 0, false
	}
	return a.waiters, a.changed != nil
}

// WatchAppVersion is the hub's version of app.
func WatchAppVersion(s *API, app string) uint64 { return s.watch.appVersion(app) }

// WatchersHeld is how many blocking fetches are held now.
func WatchersHeld(s *API) int64 { return s.watch.held.Load() }

// SetChunkBytes sets the size payload chunks aim at, so that a test's small
// registry makes several chunks; the returned func restores it.
func SetChunkBytes(n int) (restore func()) {
	old := chunkBytes
	chunkBytes = n
	return func() { chunkBytes = old }
}

// ChunkSpans reports, for tests, the apps per chunk of the registry's
// documents (delta false) or the delta's, by format: JSON, XML, gzip JSON,
// gzip XML.
func ChunkSpans(s *API, delta bool) [4]int {
	ps := s.pieces
	ps.mu.Lock()
	defer ps.mu.Unlock()
	st := &ps.spans[b2i(delta)]
	return [4]int{st[variantJSON].span, st[variantXML].span, st[variantJSONGzNext].span, st[variantXMLGz].span}
}
