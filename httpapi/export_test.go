package httpapi

// WatchState reports, for tests, how many blocking fetches wait on app and
// whether the channel they wait on is still open (not yet woken).
func (s *Server) WatchState(app string) (waiters int, armed bool) {
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
func (s *Server) WatchAppVersion(app string) uint64 { return s.watch.appVersion(app) }

// WatchersHeld is how many blocking fetches are held now.
func (s *Server) WatchersHeld() int64 { return s.watch.held.Load() }
