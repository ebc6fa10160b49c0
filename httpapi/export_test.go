package httpapi

import "github.com/muster-registry/muster/httpapi/eureka"

// The Eureka API's insides, for these tests (httpapi/eureka/introspect.go).

func (s *Server) WatchState(app string) (waiters int, armed bool) {
	return eureka.WatchState(s.api, app)
}
func (s *Server) WatchAppVersion(app string) uint64 { return eureka.WatchAppVersion(s.api, app) }
func (s *Server) WatchersHeld() int64               { return eureka.WatchersHeld(s.api) }
func (s *Server) ChunkSpans(delta bool) [4]int      { return eureka.ChunkSpans(s.api, delta) }

var SetChunkBytes = eureka.SetChunkBytes
