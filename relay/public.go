package relay

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/gorilla/mux"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/apierror"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// routePublicRead prefixes the names of the read routes a public project
// opens to requests without a token (spec/websub.md "Topics"): events,
// topics, archives, claims, voice.
const routePublicRead = "public-read"

var errVisibilityInvalid = apierror.New(wire.CodeVisibilityInvalid)

// anonymousRead reports whether r carries no Authorization header at all
// and matched a public-read route: readProject then decides.
func anonymousRead(r *http.Request) bool {
	if _, ok := r.Header["Authorization"]; ok {
		return false
	}
	rt := mux.CurrentRoute(r)
	return rt != nil && strings.HasPrefix(rt.GetName(), routePublicRead)
}

// readProject resolves the project a read acts on, before the query is
// validated. With a bearer: the token's project, which needs the read
// scope, and a project_id parameter must name that project (else 404, as
// for any other project's data). Without one: the project_id parameter,
// if it names a public project; anything else is 401, whether the project
// is private or does not exist, so nothing private is learned. public
// reports the project's visibility when it was looked up (anonymous reads).
func (s *Server) readProject(r *http.Request) (projectID string, public bool, err error) {
	p := principalFrom(r.Context())
	vals, qerr := url.ParseQuery(r.URL.RawQuery)
	if !p.Anonymous {
		if err := requireProject(p, store.ScopeRead); err != nil {
			return "", false, err
		}
		if qerr == nil {
			for _, v := range vals["project_id"] {
				if v != p.ProjectID {
					return "", false, errNotFound
				}
			}
		}
		return p.ProjectID, false, nil
	}
	ids := vals["project_id"]
	if qerr != nil || len(ids) != 1 || !correspondence.ValidUUID(ids[0]) {
		return "", false, errUnauthorized
	}
	v, err := s.st.ProjectVisibility(r.Context(), ids[0])
	if isNotFound(err) || (err == nil && v != store.VisibilityPublic) {
		return "", false, errUnauthorized
	}
	if err != nil {
		return "", false, err
	}
	return ids[0], true, nil
}

// isPublic reports the project's visibility (false when it cannot be read:
// the stricter answer).
func (s *Server) isPublic(r *http.Request, projectID string) bool {
	v, err := s.st.ProjectVisibility(r.Context(), projectID)
	return err == nil && v == store.VisibilityPublic
}

// parseVisibility maps the optional "visibility" member: absent is
// private. Error: 400 visibility_invalid.
func parseVisibility(v *string) (string, error) {
	if v == nil {
		return store.VisibilityPrivate, nil
	}
	if *v != store.VisibilityPrivate && *v != store.VisibilityPublic {
		return "", errVisibilityInvalid
	}
	return *v, nil
}

type projectStateJSON struct {
	ProjectID  string `json:"project_id"`
	Visibility string `json:"visibility"`
}

// handleProjectUpdate: PATCH /v1/admin/projects/{project_id}
// {"visibility": "public"|"private"} (operator token, or the project's
// admin) → 200 {"project_id", "visibility"}.
func (s *Server) handleProjectUpdate(w http.ResponseWriter, r *http.Request) {
	projectID := mux.Vars(r)["project_id"]
	if err := requireAdminOf(principalFrom(r.Context()), projectID); err != nil {
		s.writeError(w, r, err)
		return
	}
	var in struct {
		Visibility *string `json:"visibility"`
	}
	if err := decodeAdmin(w, r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	if in.Visibility == nil {
		s.writeError(w, r, errVisibilityInvalid)
		return
	}
	v, err := parseVisibility(in.Visibility)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.st.SetProjectVisibility(r.Context(), projectID, v); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "project visibility set", "project_id", projectID, "visibility", v)
	s.writeJSON(w, r, http.StatusOK, mediaJSON, projectStateJSON{ProjectID: projectID, Visibility: v})
}
