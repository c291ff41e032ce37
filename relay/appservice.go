package relay

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/internal/apierror"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// MatrixBinder makes and removes a project's Matrix bindings
// (couriers/matrix.Binder); cmd passes it in Config.Matrix.
type MatrixBinder interface {
	Bind(ctx context.Context, projectID string, req matrix.BindRequest) (store.MatrixBinding, error)
	Unbind(ctx context.Context, projectID, bindingID string) error
	// Describe shows bindings with their rooms' end-to-end encryption
	// and the relay's part in it; it never fails.
	Describe(ctx context.Context, bs []store.MatrixBinding) []matrix.BindingJSON
}

var (
	errMatrixDisabled      = apierror.New(wire.CodeMatrixNotConfigured)
	errMatrixRoomID        = apierror.New(wire.CodeRoomIDInvalid)
	errMatrixUserID        = apierror.New(wire.CodeUserIDInvalid)
	errMatrixRoomChoice    = apierror.New(wire.CodeRoomChoiceInvalid)
	errMatrixHomeserver    = apierror.New(wire.CodeMatrixHomeserverFailed)
	errMatrixRepositoryID  = errRepositoryIDInvalid
	errMatrixBindingsClear = apierror.New(wire.CodeNotFound).Say("no such binding")
	errMatrixEncryption    = apierror.New(wire.CodeMatrixEncryptionUnavailable)
)

// handleMatrixBind: POST /v1/admin/projects/{project_id}/matrix/bindings
// {"room_id"? | "create": true, "invite"?: [...], "repository_id"?,
// "encrypted"?} → 201 matrix.BindingJSON {binding_id, project_id,
// repository_id?, room_id, created_at, encrypted?, e2ee?}.
func (s *Server) handleMatrixBind(w http.ResponseWriter, r *http.Request) {
	projectID := mux.Vars(r)["project_id"]
	if err := requireAdminOf(principalFrom(r.Context()), projectID); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.cfg.Matrix == nil {
		s.writeError(w, r, errMatrixDisabled)
		return
	}
	var in struct {
		RoomID       string   `json:"room_id"`
		Create       bool     `json:"create"`
		Invite       []string `json:"invite"`
		RepositoryID string   `json:"repository_id"`
		Encrypted    bool     `json:"encrypted"`
	}
	if err := decodeAdmin(w, r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	b, err := s.cfg.Matrix.Bind(r.Context(), projectID, matrix.BindRequest{RepositoryID: in.RepositoryID, RoomID: in.RoomID, Create: in.Create, Invite: in.Invite, Encrypted: in.Encrypted})
	switch {
	case errors.Is(err, matrix.ErrRoomIDInvalid):
		err = errMatrixRoomID
	case errors.Is(err, matrix.ErrUserIDInvalid):
		err = errMatrixUserID
	case errors.Is(err, matrix.ErrRoomChoice):
		err = errMatrixRoomChoice
	case errors.Is(err, matrix.ErrRepositoryIDInvalid):
		err = errMatrixRepositoryID
	case errors.Is(err, matrix.ErrEncryptionUnavailable):
		s.log.Error("matrix binding refused: the room is end-to-end encrypted and this relay cannot encrypt", "project_id", projectID)
		err = errMatrixEncryption
	case errors.Is(err, matrix.ErrHomeserver):
		s.log.Warn("matrix room creation failed", "project_id", projectID, "err", err)
		err = errMatrixHomeserver
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusCreated, mediaJSON, s.cfg.Matrix.Describe(r.Context(), []store.MatrixBinding{b})[0])
}

// handleMatrixBindings: GET …/matrix/bindings → {"bindings": [...]} of
// matrix.BindingJSON, the POST answer's shape: with Matrix configured,
// each says whether its room is end-to-end encrypted and the relay's part
// in it (e2ee); without, the bindings as stored.
func (s *Server) handleMatrixBindings(w http.ResponseWriter, r *http.Request) {
	projectID := mux.Vars(r)["project_id"]
	if err := requireAdminOf(principalFrom(r.Context()), projectID); err != nil {
		s.writeError(w, r, err)
		return
	}
	bs, err := s.st.MatrixBindings(r.Context(), projectID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Bindings []matrix.BindingJSON `json:"bindings"`
	}{Bindings: []matrix.BindingJSON{}}
	if s.cfg.Matrix != nil {
		out.Bindings = append(out.Bindings, s.cfg.Matrix.Describe(r.Context(), bs)...)
	} else {
		for _, b := range bs {
			out.Bindings = append(out.Bindings, matrix.BindingOut(b))
		}
	}
	s.writeJSON(w, r, http.StatusOK, mediaJSON, out)
}

// handleMatrixUnbind: DELETE …/matrix/bindings/{binding_id} → 204.
func (s *Server) handleMatrixUnbind(w http.ResponseWriter, r *http.Request) {
	projectID := mux.Vars(r)["project_id"]
	if err := requireAdminOf(principalFrom(r.Context()), projectID); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.cfg.Matrix == nil {
		s.writeError(w, r, errMatrixDisabled)
		return
	}
	if err := s.cfg.Matrix.Unbind(r.Context(), projectID, mux.Vars(r)["binding_id"]); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = errMatrixBindingsClear
		}
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// TransactionSink takes the events of a pushed application-service
// transaction (couriers/matrix.Inbox.Accept). A nil error means they are
// stored durably.
type TransactionSink interface {
	Accept(ctx context.Context, events []json.RawMessage) error
}

// DeviceTrafficSink is what a TransactionSink may also be: it takes the
// whole body of each transaction for the relay's Matrix device
// (couriers/matrix/e2ee.Machine.ProcessTransaction: the to-device events,
// device-list changes and one-time-key counts Synapse pushes,
// MSC2409/MSC3202). It is called before Accept; a non-nil error answers
// the transaction 503 so that the homeserver sends it again.
type DeviceTrafficSink interface {
	AcceptDeviceTraffic(ctx context.Context, body []byte) error
}

// AppserviceHandler serves the application-service API a homeserver calls
// (Matrix application-service API v1), on a listener of its own:
// PUT /_matrix/app/v1/transactions/{txnId} (authenticated by hs_token;
// 403 M_FORBIDDEN for a wrong one, 401 M_UNAUTHORIZED for none; a replay
// of a txnId is harmless because submissions are de-duplicated by Matrix
// event id), POST /_matrix/app/v1/ping → {}, and the users and rooms
// queries → 404 M_NOT_FOUND (the relay provisions no users or aliases).
func AppserviceHandler(hsToken string, sink TransactionSink, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := mux.NewRouter()
	write := func(w http.ResponseWriter, status int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
	// fail answers a Matrix errcode of wire's error table with its status
	// and message, as {"errcode", "error"}.
	fail := func(w http.ResponseWriter, errcode string) {
		row, _ := wire.LookupError(errcode)
		b, _ := json.Marshal(wire.MatrixError{Errcode: row.Code, Error: row.Message})
		write(w, row.Status, string(b))
	}
	auth := func(next http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			if r.Header.Get("Authorization") == "" {
				tok = r.URL.Query().Get("access_token") // the legacy form
			}
			switch {
			case tok == "":
				fail(w, wire.MatrixCodeUnauthorized)
			case subtle.ConstantTimeCompare([]byte(tok), []byte(hsToken)) != 1:
				fail(w, wire.MatrixCodeForbidden)
			default:
				next(w, r)
			}
		}
	}
	m.HandleFunc("/_matrix/app/v1/transactions/{txnId}", auth(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Events []json.RawMessage `json:"events"`
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<20))
		if err == nil {
			err = json.Unmarshal(body, &in)
		}
		if err != nil {
			fail(w, wire.MatrixCodeNotJSON)
			return
		}
		if ds, ok := sink.(DeviceTrafficSink); ok {
			if err := ds.AcceptDeviceTraffic(r.Context(), body); err != nil {
				log.Warn("appservice transaction's device traffic not taken", "txn_id", mux.Vars(r)["txnId"], "err", err)
				fail(w, wire.MatrixCodeUnknown)
				return
			}
		}
		if err := sink.Accept(r.Context(), in.Events); err != nil {
			log.Warn("appservice transaction not stored", "txn_id", mux.Vars(r)["txnId"], "err", err)
			fail(w, wire.MatrixCodeUnknown)
			return
		}
		write(w, http.StatusOK, `{}`)
	})).Methods("PUT")
	m.HandleFunc("/_matrix/app/v1/ping", auth(func(w http.ResponseWriter, r *http.Request) {
		write(w, http.StatusOK, `{}`)
	})).Methods("POST")
	notFound := auth(func(w http.ResponseWriter, r *http.Request) {
		fail(w, wire.MatrixCodeNotFound)
	})
	m.HandleFunc("/_matrix/app/v1/users/{userId}", notFound).Methods("GET")
	m.HandleFunc("/_matrix/app/v1/rooms/{roomAlias}", notFound).Methods("GET")
	m.PathPrefix("/_matrix/app/v1/thirdparty/").Handler(notFound)
	m.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail(w, wire.MatrixCodeUnrecognized)
	})
	return m
}
