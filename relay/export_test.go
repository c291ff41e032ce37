package relay

// WakeSubscribers counts the open wake streams (tests only).
func (s *Server) WakeSubscribers() int { return s.wake.subscribers() }

// Advance feeds the wake fan-out directly, as the store's advances do
// (tests of the fan-out alone).
func (s *Server) Advance(projectID string, receivedSeq int64) { s.wake.advance(projectID, receivedSeq) }
