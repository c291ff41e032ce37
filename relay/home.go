package relay

import (
	"net/http"
)

// The relay's front door (docs/http.md "The front page"). GET / answers a
// person's browser with a small HTML page — what this relay is, the web
// view's sign-in, where the profile and the docs are — and every other
// client with exactly the JSON 404 it had before the page existed, so an
// API client that probes / sees no change. The page is the web view's: the
// same Content-Security-Policy and security headers, its stylesheet from
// this origin, no script and no third-party resource.

// homePage is the front page's view model.
type homePage struct {
	PublicURL   string // the relay's public base URL, for the API examples
	ProfilePath string
	SigninPath  string
	LogKeyPath  string
}

// handleHome: GET|HEAD / → 200 text/html when the Accept header prefers
// HTML (a browser's does); otherwise, and for every other method, the
// JSON 404 not_found. Vary: Accept either way, so a cache keeps the two
// apart.
func (s *Server) handleHome(w http.ResponseWriter, r *http.Request) {
	w.Header().Add("Vary", "Accept")
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || !prefersHTML(r.Header.Values("Accept")) {
		s.writeError(w, r, errNotFound)
		return
	}
	uiHeaders(w)
	w.Header().Set("Cache-Control", "no-cache")
	s.ui.render(w, r, http.StatusOK, "home", homePage{PublicURL: s.public, ProfilePath: profilePath, SigninPath: "/ui/signin", LogKeyPath: logKeyPath})
}

// prefersHTML reports whether an Accept header (RFC 9110 §12.5.1) names
// text/html or application/xhtml+xml explicitly with a weight above 0 and
// at least the weight it gives JSON. Wildcards count for neither, so */*
// (curl, most HTTP libraries) and no Accept at all stay JSON.
func prefersHTML(accept []string) bool {
	htmlQ, jsonQ := 0, 0
	for _, h := range accept {
		for _, mr := range parseAccept(h) {
			switch mr.typ + "/" + mr.sub {
			case "text/html", "application/xhtml+xml":
				htmlQ = max(htmlQ, mr.q)
			case mediaJSON, mediaVendorJSON:
				jsonQ = max(jsonQ, mr.q)
			}
		}
	}
	return htmlQ > 0 && htmlQ >= jsonQ
}
