package relay

import (
	"net/http"
	"strings"

	"github.com/gorilla/mux"
)

// logPath is what log lines say about a request's path: its route
// template (/v1/feeds/{feed_token}.atom), never the path itself, which
// may hold a feed capability. An unmatched path under /v1/feeds/ is cut.
func logPath(r *http.Request) string {
	if rt := mux.CurrentRoute(r); rt != nil {
		if t, err := rt.GetPathTemplate(); err == nil {
			return t
		}
	}
	if strings.HasPrefix(r.URL.Path, "/v1/feeds/") {
		return "/v1/feeds/…"
	}
	return r.URL.Path
}
