package relay

import "net/http"

// handlePeerCallback: GET and POST /v1/federation/callback/{peer_id}
// (handleFederationCallback). A refused verification of intent (W3C
// WebSub #hub-verifies-intent: an unknown peer, topic or mode) is any 404
// to the hub; to everyone else it is this relay's 404 not_found, in JSON
// like every other route, not the plain text that package federation and
// client.WebSubSubscriber write with http.NotFound. Deliveries (POST) go
// through untouched: their answers are for the hub, and the subscriber's
// http.MaxBytesReader needs the server's own ResponseWriter.
func (s *Server) handlePeerCallback(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.handleFederationCallback(w, r)
		return
	}
	s.handleFederationCallback(&jsonNotFound{ResponseWriter: w, s: s, r: r}, r)
}

// jsonNotFound passes a response through unless its status is 404, whose
// body it replaces with writeError's errNotFound (the text the handler
// writes after is dropped).
type jsonNotFound struct {
	http.ResponseWriter
	s       *Server
	r       *http.Request
	wrote   bool // the status is written
	dropped bool // it was a 404: the handler's body goes nowhere
}

func (w *jsonNotFound) WriteHeader(status int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if status == http.StatusNotFound {
		w.dropped = true
		// http.Error set a plain-text Content-Type and deleted
		// Content-Length; writeBytes sets both again.
		w.s.writeError(w.ResponseWriter, w.r, errNotFound)
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *jsonNotFound) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.dropped {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *jsonNotFound) Unwrap() http.ResponseWriter { return w.ResponseWriter }
