package httpapi

import "github.com/muster-registry/muster/httpapi/eureka"

// The Eureka API's insides, for these tests (httpapi/eureka/introspect.go).

func (s *Server) WatchState(app string) (waiters int, armed bool) { return s.api.WatchState(app) }
func (s *Server) WatchAppVersion(app string) uint64               { return s.api.WatchAppVersion(app) }
func (s *Server) WatchersHeld() int64                             { return s.api.WatchersHeld() }
func (s *Server) ChunkSpans(delta bool) [4]int                    { return s.api.ChunkSpans(delta) }

var SetChunkBytes = eureka.SetChunkBytes
