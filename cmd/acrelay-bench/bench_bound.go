package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/relay"
)

// acrelay-bench http-bound (hidden): the upper bound `acrelay-bench
// --compare-http-bound` measures a relay against. It is not a relay: an
// HTTP server on the relay's http.Server settings (relay.HTTPServer), on
// Go's default runtime settings as serve runs, whose append does only the ceiling's work — parse and validate, canonicalize,
// hash and verify the signature — and answers 201 without storing
// anything. Its figure is what this machine's net/http, runtime and
// kernel leave for a relay's storage: a durable relay's ratio to the
// ceiling can only be lower. It keeps one signing key (the last one the
// bench registers) and serves only the routes the bench calls.
//
// With --durable-dir it is the durable bound (`acrelay-bench
// --compare-durable-bound`): before its 201 each append is also written to
// a log in that directory and made durable with group commit (boundLog),
// the least any relay that keeps issue 3's promise (a 201 survives a crash
// of the machine) must do beyond the ceiling's work.

func newBenchBoundCmd() *cobra.Command {
	var addr, durableDir string
	cmd := &cobra.Command{
		Use:    "http-bound",
		Short:  "Serve the upper bounds acrelay-bench --compare-http-bound and --compare-durable-bound measure (not a relay)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			op := os.Getenv("ACRELAY_OPERATOR_TOKEN")
			if op == "" {
				return errors.New("http-bound: ACRELAY_OPERATOR_TOKEN is required")
			}
			var blog *boundLog
			if durableDir != "" {
				l, err := openBoundLog(filepath.Join(durableDir, "bound.log"))
				if err != nil {
					return err
				}
				defer l.close()
				blog = l
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			srv := relay.HTTPServer(addr, newBoundHandler(op, blog))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				<-ctx.Done()
				_ = srv.Shutdown(context.Background())
			}()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "listen address")
	cmd.Flags().StringVar(&durableDir, "durable-dir", "", "make each append durable in a log in this directory before answering (the durable bound)")
	return cmd
}

// boundHandler holds the one project, token and key of a bench run.
type boundHandler struct {
	op        string
	projectID string
	mu        sync.Mutex
	token     string
	pub       ed25519.PublicKey
	log       *boundLog // nil: store nothing
}

// newBoundHandler serves the bench's routes for operator token op; with a
// log, each accepted append is made durable in it before the 201.
func newBoundHandler(op string, blog *boundLog) http.Handler {
	b := &boundHandler{op: op, projectID: newBenchUUID(), log: blog}
	m := http.NewServeMux()
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	m.HandleFunc("POST /v1/admin/projects", b.admin(true, func(map[string]any) any {
		return map[string]string{"project_id": b.projectID}
	}))
	m.HandleFunc("POST /v1/admin/projects/{project_id}/tokens", b.admin(true, func(map[string]any) any {
		var t [24]byte
		_, _ = rand.Read(t[:])
		b.mu.Lock()
		b.token = hex.EncodeToString(t[:])
		defer b.mu.Unlock()
		return map[string]any{"token_id": newBenchUUID(), "token": b.token, "scopes": []string{"read", "append", "admin"}}
	}))
	m.HandleFunc("POST /v1/admin/projects/{project_id}/identities", b.admin(false, func(map[string]any) any {
		return map[string]string{"identity_id": newBenchUUID(), "status": "active"}
	}))
	m.HandleFunc("POST /v1/admin/identities/{identity_id}/keys", b.admin(false, func(in map[string]any) any {
		s, _ := in["public_key_b64url"].(string)
		pub, err := correspondence.DecodePublicKey(s)
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.pub = pub
		b.mu.Unlock()
		return map[string]string{"signing_key_id": newBenchUUID(), "status": "active"}
	}))
	m.HandleFunc("POST /v1/correspondence/events", b.append)
	return m
}

// authorized reports whether r carries the operator token or, unless
// operatorOnly, the project token.
func (b *boundHandler) authorized(r *http.Request, operatorOnly bool) bool {
	got := []byte(r.Header.Get("Authorization"))
	if subtle.ConstantTimeCompare(got, []byte("Bearer "+b.op)) == 1 {
		return true
	}
	b.mu.Lock()
	tok := b.token
	b.mu.Unlock()
	return !operatorOnly && tok != "" && subtle.ConstantTimeCompare(got, []byte("Bearer "+tok)) == 1
}

// admin answers one registry route: 201 with what f returns for the JSON
// body, 400 when f returns an error, 401 without the right token.
func (b *boundHandler) admin(operatorOnly bool, f func(map[string]any) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !b.authorized(r, operatorOnly) {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		in := map[string]any{}
		if err := json.NewDecoder(io.LimitReader(r.Body, 16<<10)).Decode(&in); err != nil {
			http.Error(w, `{"error":"invalid_json"}`, http.StatusBadRequest)
			return
		}
		out := f(in)
		if err, ok := out.(error); ok {
			http.Error(w, fmt.Sprintf(`{"error":"body_invalid","message":%q}`, err.Error()), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(out)
	}
}

// append does the ceiling's work on the body (ParseEvent, CanonicalJSON,
// Verify, as benchOnce's ceiling loop) and, with a log, makes the
// canonical event durable (503 once a write or sync failed).
func (b *boundHandler) append(w http.ResponseWriter, r *http.Request) {
	if !b.authorized(r, false) {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, relay.MaxEventBytes))
	if err != nil {
		http.Error(w, `{"error":"body_too_large"}`, http.StatusRequestEntityTooLarge)
		return
	}
	ev, err := correspondence.ParseEvent(body)
	var canonical []byte
	if err == nil {
		canonical, err = ev.CanonicalJSON()
	}
	if err != nil {
		http.Error(w, `{"error":"event_invalid"}`, http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	pub := b.pub
	b.mu.Unlock()
	if ev.ProjectID != b.projectID || ev.Verify(pub) != nil {
		http.Error(w, `{"error":"signature_invalid"}`, http.StatusForbidden)
		return
	}
	if b.log != nil {
		if err := b.log.append(canonical); err != nil {
			http.Error(w, `{"error":"unavailable"}`, http.StatusServiceUnavailable)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"event_id":%q}`+"\n", ev.ID)
}
