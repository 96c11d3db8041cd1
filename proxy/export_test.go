package proxy

// BufferedBodyBytes returns the request body bytes s holds reserved now.
func BufferedBodyBytes(s *Server) int64 { return s.bodies.used.Load() }
