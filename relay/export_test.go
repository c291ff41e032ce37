package relay

// WakeSubscribers counts the open wake streams (tests only).
func (s *Server) WakeSubscribers() int { return s.wake.subscribers() }
