package proxy

import "github.com/polygateway/polygateway/core"

// BufferedBodyBytes returns the request body bytes s holds reserved now.
func BufferedBodyBytes(s *Server) int64 { return s.bodies.used.Load() }

// OnGovern makes s hand every chat call to fn as it is governed; call it
// before s serves.
func OnGovern(s *Server, fn func(*core.Call)) { s.governing = fn }
