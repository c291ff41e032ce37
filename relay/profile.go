package relay

import (
	_ "embed"
	"net/http"
)

// profilePath is the relay's own description of the profile it
// implements, the target of every correspondence response's
// rel="describedby" link (RFC 8288).
const profilePath = "/v1/profile"

const mediaMarkdown = "text/markdown; charset=utf-8"

// profilePage is the static page served at profilePath: which spec
// sections the relay implements and the choices it makes where the spec
// leaves room (negotiation, headers, error codes, wake frames).
//
//go:embed profile.md
var profilePage []byte

// handleProfile: GET|HEAD /v1/profile → the profile page as Markdown,
// under a strong ETag. It needs no token: it holds no project's data.
func (s *Server) handleProfile(w http.ResponseWriter, r *http.Request) {
	if _, err := readQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	body := profilePage
	if s.cfg.LogVerifierKey != "" {
		// The log: its key, and where any project's checkpoint is.
		base := s.publicBase(r)
		h.Set("Link", "<"+base+logKeyPath+`>; rel="`+relLogKey+`"; type="text/plain"`)
		h.Set("Link-Template", marshalTemplate(base+"/v1/log/{project_id}/checkpoint", relLogCheckpoint, "text/plain"))
		body = append(append([]byte(nil), profilePage...), s.profileLog()...)
	}
	s.writeRepresentation(w, r, mediaMarkdown, body)
}
