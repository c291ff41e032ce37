package relay

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/gorilla/mux"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/apierror"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// Federation peer links (spec/federation.md): the admin routes that make,
// list and remove them, and the WebSub callback each link subscribes
// with. The links themselves run in package federation, which cmd passes
// in as Config.Peers.

// CallbackPath prefixes the WebSub callback of a peer link:
// {public}/v1/federation/callback/{peer_id}.
const CallbackPath = "/v1/federation/callback/"

// PeerLinks runs this relay's peer links (*federation.Manager).
type PeerLinks interface {
	// Refresh tells that the project's peer links changed (made or
	// removed): the running links follow without a restart.
	Refresh(projectID string)
	// ServeCallback serves the WebSub callback of link peerID: the
	// hub's verification of intent (GET) and signed deliveries (POST),
	// whose HMAC it checks. It needs no bearer token.
	ServeCallback(w http.ResponseWriter, r *http.Request, peerID string)
	// Status is what this process knows of a running link, as JSON (nil
	// when it does not run it).
	Status(peerID string) any
}

var (
	errRemoteURLRefused = apierror.New(wire.CodeRemoteURLInvalid).Say("remote_url names an address the relay does not call (loopback, private, link-local, metadata or its own)").WithHint("an operator may allow a host with --websub-allow-hosts, for tests")
	errRemoteURLInvalid = apierror.New(wire.CodeRemoteURLInvalid)
	errTokenRequired    = apierror.New(wire.CodeTokenRequired)
)

// redacted stands for a secret in every listing.
const redacted = "[redacted]"

type peerJSON struct {
	PeerID       string  `json:"peer_id"`
	ProjectID    string  `json:"project_id"`
	RemoteURL    string  `json:"remote_url"`
	RepositoryID *string `json:"repository_id"`
	Token        string  `json:"token"`
	CreatedAt    string  `json:"created_at"`
	Status       any     `json:"status,omitempty"`
}

func (s *Server) peerOut(p store.Peer) peerJSON {
	out := peerJSON{PeerID: p.ID, ProjectID: p.ProjectID, RemoteURL: p.RemoteURL, Token: redacted,
		CreatedAt: correspondence.FormatTimestamp(p.CreatedAt)}
	if p.RepositoryID != "" {
		out.RepositoryID = &p.RepositoryID
	}
	if s.cfg.Peers != nil {
		out.Status = s.cfg.Peers.Status(p.ID)
	}
	return out
}

// NormalizeRemoteURL checks a peer's remote_url and returns it without a
// trailing slash. ok is false for anything but an absolute http(s) URL
// without userinfo, query or fragment.
func NormalizeRemoteURL(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return "", false
	}
	return strings.TrimRight(u.String(), "/"), true
}

// handlePeerCreate: POST /v1/admin/projects/{project_id}/peers
// {"remote_url", "token", "repository_id"?} (operator, or the project's
// admin) → 201 {peer_id, project_id, remote_url, repository_id, token:
// "[redacted]", created_at}; 409 already_exists for a second link to the
// same remote and repository.
func (s *Server) handlePeerCreate(w http.ResponseWriter, r *http.Request) {
	projectID, err := s.listedProject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in struct {
		RemoteURL    string  `json:"remote_url"`
		Token        string  `json:"token"`
		RepositoryID *string `json:"repository_id"`
	}
	if err := decodeAdmin(w, r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	remote, ok := NormalizeRemoteURL(in.RemoteURL)
	if !ok {
		s.writeError(w, r, errRemoteURLInvalid)
		return
	}
	if s.cfg.CheckRemote != nil {
		if err := s.cfg.CheckRemote(r.Context(), remote); err != nil {
			s.writeError(w, r, errRemoteURLRefused)
			return
		}
	}
	if strings.TrimSpace(in.Token) == "" {
		s.writeError(w, r, errTokenRequired)
		return
	}
	p := store.Peer{ID: uuid.NewString(), ProjectID: projectID, RemoteURL: remote, Token: strings.TrimSpace(in.Token)}
	if in.RepositoryID != nil {
		if !correspondence.ValidOpaqueID(*in.RepositoryID) {
			s.writeError(w, r, errRepositoryIDInvalid)
			return
		}
		p.RepositoryID = *in.RepositoryID
	}
	p, err = s.st.CreatePeer(r.Context(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "peer link added", "project_id", projectID, "peer_id", p.ID, "remote_url", p.RemoteURL)
	if s.cfg.Peers != nil {
		s.cfg.Peers.Refresh(projectID)
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusCreated, mediaJSON, s.peerOut(p))
}

// handlePeerList: GET /v1/admin/projects/{project_id}/peers → {peers:
// [peer…]}, tokens redacted, each with this process's status of the link
// when it runs it.
func (s *Server) handlePeerList(w http.ResponseWriter, r *http.Request) {
	projectID, err := s.listedProject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := readQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	peers, err := s.st.Peers(r.Context(), projectID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]peerJSON, 0, len(peers))
	for _, p := range peers {
		out = append(out, s.peerOut(p))
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, mediaJSON, map[string]any{"peers": out})
}

// refusalsJSON is what a peer link's refused records add up to
// (store.RefusalSummary).
type refusalsJSON struct {
	Pending  int64            `json:"pending"`   // refused for a reason that may pass: retried, holding the remote cursor
	Final    int64            `json:"final"`     // refused for good
	ByReason map[string]int64 `json:"by_reason"` // both, by stable reason code
	Latest   *refusalJSON     `json:"latest"`    // the most recently refused record, null when none
}

type refusalJSON struct {
	ReceivedSeq      string  `json:"received_seq"` // the remote's
	EventID          string  `json:"event_id"`
	Reason           string  `json:"reason"`
	Final            bool    `json:"final"`
	Attempts         int     `json:"attempts"`
	RemoteReceivedAt *string `json:"remote_received_at"`
	FirstRefusedAt   string  `json:"first_refused_at"`
	RefusedAt        string  `json:"refused_at"`
}

func refusalsOut(sum store.RefusalSummary) refusalsJSON {
	out := refusalsJSON{ByReason: map[string]int64{}}
	for _, c := range sum.Counts {
		out.ByReason[c.Reason] += c.Count
		if c.Final {
			out.Final += c.Count
		} else {
			out.Pending += c.Count
		}
	}
	if l := sum.Latest; l != nil {
		out.Latest = &refusalJSON{ReceivedSeq: strconv.FormatInt(l.ReceivedSeq, 10), EventID: l.EventID, Reason: l.Reason,
			Final: l.Final, Attempts: l.Attempts, FirstRefusedAt: correspondence.FormatTimestamp(l.FirstRefusedAt),
			RefusedAt: correspondence.FormatTimestamp(l.RefusedAt)}
		if !l.RemoteReceivedAt.IsZero() {
			v := correspondence.FormatTimestamp(l.RemoteReceivedAt)
			out.Latest.RemoteReceivedAt = &v
		}
	}
	return out
}

// handlePeerGet: GET /v1/admin/projects/{project_id}/peers/{peer_id} →
// the link as the listing shows it, with "refusals": {pending, final,
// by_reason: {reason: count}, latest: {received_seq, event_id, reason,
// final, attempts, remote_received_at, first_refused_at, refused_at} |
// null} from the store (every process answers the same), and
// "split_view": {kind, origin, detected_at, cosigned_checkpoint,
// seen_checkpoint} | null, the evidence that stopped the link
// (federation/witness.go); 404 not_found for a link the project does not
// have.
func (s *Server) handlePeerGet(w http.ResponseWriter, r *http.Request) {
	projectID, err := s.listedProject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := readQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.st.Peer(r.Context(), projectID, mux.Vars(r)["peer_id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sum, err := s.st.SummarizeRefusals(r.Context(), projectID, p.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	views, err := s.st.SplitViews(r.Context(), projectID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		peerJSON
		Refusals  refusalsJSON   `json:"refusals"`
		SplitView *splitViewJSON `json:"split_view"`
	}{s.peerOut(p), refusalsOut(sum), splitViewOut(views, p.ID)}
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusOK, mediaJSON, out)
}

// handlePeerRemove: DELETE /v1/admin/projects/{project_id}/peers/{peer_id}
// → 204; the link stops, its imported keys and records stay.
func (s *Server) handlePeerRemove(w http.ResponseWriter, r *http.Request) {
	projectID, err := s.listedProject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	peerID := mux.Vars(r)["peer_id"]
	if err := s.st.RemovePeer(r.Context(), projectID, peerID); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "peer link removed", "project_id", projectID, "peer_id", peerID)
	if s.cfg.Peers != nil {
		s.cfg.Peers.Refresh(projectID)
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleFederationCallback: GET and POST /v1/federation/callback/{peer_id},
// outside the bearer middleware: the link checks the hub's challenge and
// every delivery's X-Hub-Signature.
func (s *Server) handleFederationCallback(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Peers == nil {
		s.writeError(w, r, errNotFound)
		return
	}
	s.cfg.Peers.ServeCallback(w, r, mux.Vars(r)["peer_id"])
}

// splitViewJSON is the split-view evidence that stopped a link
// (federation/witness.go): both checkpoint notes of the remote's log, as
// it served them, for anyone to check with its log key.
type splitViewJSON struct {
	Kind       string `json:"kind"` // "fork" or "inconsistent"
	Origin     string `json:"origin"`
	DetectedAt string `json:"detected_at"`
	Cosigned   string `json:"cosigned_checkpoint"`
	Seen       string `json:"seen_checkpoint"`
}

// splitViewOut is link peerID's first evidence, nil when none.
func splitViewOut(views []store.SplitView, peerID string) *splitViewJSON {
	for _, v := range views {
		if v.PeerID == peerID {
			return &splitViewJSON{Kind: v.Kind, Origin: v.Origin, DetectedAt: correspondence.FormatTimestamp(v.DetectedAt),
				Cosigned: string(v.Cosigned), Seen: string(v.Seen)}
		}
	}
	return nil
}
