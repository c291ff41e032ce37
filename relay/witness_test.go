package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/sequencer"
	"github.com/acrelay/acrelay/store"
	acrtlog "github.com/acrelay/acrelay/tlog"
	"github.com/acrelay/acrelay/witness"
)

// publishLog integrates projectID's records into its tree with the
// relay's log key (the sequencer's one step) and returns the key and
// the head.
func (e *env) publishLog(projectID string) (acrtlog.LogKey, store.TreeHead) {
	e.t.Helper()
	ctx := context.Background()
	skey, err := e.st.LogKey(ctx, func() (string, error) {
		s, _, err := acrtlog.NewLogKey(acrtlog.KeyName("http://relay.test"))
		return s, err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	lk, err := acrtlog.OpenLogKey(skey)
	if err != nil {
		e.t.Fatal(err)
	}
	head, err := sequencer.New(e.st, sequencer.Options{PublicURL: "http://relay.test", Key: lk}).Integrate(ctx, projectID)
	if err != nil {
		e.t.Fatal(err)
	}
	return lk, head
}

// cosignWith cosigns the checkpoint note msg (opened with v) by the
// witness signer key skey.
func cosignWith(t *testing.T, msg []byte, v note.Verifier, skey string) []byte {
	t.Helper()
	s, err := witness.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	_, n, err := witness.Open(msg, v, "")
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := witness.Cosign(s, n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWitnessKeyRoute: GET /v1/witness-key is the relay's cosignature/v1
// verifier key, named after its public URL, the same on every read, as
// text/plain without a token; HEAD has no body.
func TestWitnessKeyRoute(t *testing.T) {
	e := newEnv(t)
	r := e.do("GET", witness.KeyPath, "", nil)
	mustStatus(t, r, http.StatusOK)
	if ct := r.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	key := strings.TrimSuffix(string(r.Body), "\n")
	if !strings.HasPrefix(key, "relay.test/witness+") || len(r.Body) != len(key)+1 {
		t.Fatalf("body %q: want one line, a key named relay.test/witness", r.Body)
	}
	if _, err := witness.NewVerifier(key); err != nil {
		t.Fatalf("served key %q: %v", key, err)
	}
	skey, err := e.st.WitnessKey(context.Background(), func() (string, error) { t.Fatal("a second key created"); return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := witness.VerifierKey(skey); want != key {
		t.Fatalf("served %q, stored key's %q", key, want)
	}
	if again := e.do("GET", witness.KeyPath, "", nil); again.Status != http.StatusOK || !bytes.Equal(again.Body, r.Body) {
		t.Fatalf("second read %d %q", again.Status, again.Body)
	}
	if h := e.do("HEAD", witness.KeyPath, "", nil); h.Status != http.StatusOK || len(h.Body) != 0 {
		t.Fatalf("HEAD %d %q", h.Status, h.Body)
	}
}

// TestCosignatureRoute: a peer link's witness cosigning the relay's
// published checkpoint is kept (204; the latest per witness); anything
// else is refused with its code and nothing is kept: no token, another
// project's token, an unknown witness, a note not signed by the log key,
// another project's origin, a size beyond the tree, a body too large.
func TestCosignatureRoute(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	for _, s := range []string{"one", "two", "three"} {
		mustStatus(t, e.post(a, a.intent("repo-a", s)), http.StatusCreated)
	}
	otherPID, otherTok := e.newProject("")
	lk, head := e.publishLog(pid)
	if head.Size != 3 {
		t.Fatalf("tree size %d, want 3", head.Size)
	}
	readTok := e.newToken(pid, "read")
	path := witness.CosignaturesPath(pid)

	// Peer B is a link of the project whose witness key is known; C is not.
	bKey, _ := witness.NewKey("relay-b.example/witness")
	bVKey, _ := witness.VerifierKey(bKey)
	cKey, _ := witness.NewKey("relay-c.example/witness")
	peer, err := e.st.CreatePeer(ctx, store.Peer{ID: newUUID(), ProjectID: pid, RemoteURL: "https://relay-b.example", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.st.SaveWitnessState(ctx, store.WitnessState{ProjectID: pid, PeerID: peer.ID, LogKey: "relay-b.example+01020304+AQID", WitnessKey: bVKey}, 0); err != nil || !ok {
		t.Fatalf("SaveWitnessState = %v, %v", ok, err)
	}

	good := cosignWith(t, head.Checkpoint, lk.Verifier, bKey)
	byC := cosignWith(t, head.Checkpoint, lk.Verifier, cKey)
	sign := func(c acrtlog.Checkpoint, s note.Signer) []byte {
		msg, err := acrtlog.SignCheckpoint(s, c)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	cp, err := acrtlog.ParseCheckpoint(string(head.Checkpoint[:bytes.Index(head.Checkpoint, []byte("\n\n"))+1]))
	if err != nil {
		t.Fatal(err)
	}
	forgedKey, _, _ := acrtlog.NewLogKey(acrtlog.KeyName("http://relay.test"))
	forged, _ := acrtlog.OpenLogKey(forgedKey)
	notOurs := cosignWith(t, sign(cp, forged.Signer), forged.Verifier, bKey)
	beyond := cp
	beyond.Size = 4
	tooLarge := cosignWith(t, sign(beyond, lk.Signer), lk.Verifier, bKey)
	otherOrigin := cp
	otherOrigin.Origin = acrtlog.Origin("http://relay.test", otherPID)
	wrongOrigin := cosignWith(t, sign(otherOrigin, lk.Signer), lk.Verifier, bKey)

	for _, tc := range []struct {
		name   string
		tok    string
		path   string
		body   []byte
		status int
		code   string
	}{
		{"no token", "", path, good, http.StatusUnauthorized, "unauthorized"},
		{"another project's token", otherTok, path, good, http.StatusNotFound, "not_found"},
		{"another project's route", readTok, witness.CosignaturesPath(otherPID), good, http.StatusNotFound, "not_found"},
		{"unknown witness", readTok, path, byC, http.StatusForbidden, "cosigner_unknown"},
		{"only the log's signature", readTok, path, head.Checkpoint, http.StatusForbidden, "cosigner_unknown"},
		{"not signed by the log key", readTok, path, notOurs, http.StatusUnprocessableEntity, "checkpoint_not_published"},
		{"beyond the tree", readTok, path, tooLarge, http.StatusUnprocessableEntity, "checkpoint_not_published"},
		{"another project's origin", readTok, path, wrongOrigin, http.StatusUnprocessableEntity, "checkpoint_not_published"},
		{"not a note", readTok, path, []byte("hello\n"), http.StatusUnprocessableEntity, "checkpoint_not_published"},
		{"too large", readTok, path, bytes.Repeat([]byte("a"), witness.MaxNoteBytes+1), http.StatusRequestEntityTooLarge, "body_too_large"},
	} {
		r := e.do("POST", tc.path, tc.tok, tc.body, "Content-Type", "text/plain; charset=utf-8")
		if r.Status != tc.status || r.code(t) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.Status, r.Body, tc.status, tc.code)
		}
	}
	if cs, err := e.st.Cosignatures(ctx, pid); err != nil || len(cs) != 0 {
		t.Fatalf("Cosignatures after refusals = %+v, %v; want none", cs, err)
	}

	r := e.do("POST", path, readTok, good, "Content-Type", "text/plain; charset=utf-8")
	mustStatus(t, r, http.StatusNoContent)
	cs, err := e.st.Cosignatures(ctx, pid)
	line := string(good[len(head.Checkpoint):])
	if err != nil || len(cs) != 1 || cs[0].KeyName != "relay-b.example/witness" || cs[0].Size != 3 || cs[0].Root != head.Root ||
		cs[0].Line != line || string(cs[0].Body) != cp.Text() {
		t.Fatalf("Cosignatures = %+v, %v; want B's line %q on size 3", cs, err, line)
	}
	// The checkpoint route serves the log's note with B's line.
	served := e.do("GET", "/v1/log/"+pid+"/checkpoint", readTok, nil)
	mustStatus(t, served, http.StatusOK)
	if !bytes.Equal(served.Body, good) {
		t.Fatalf("served checkpoint %q, want %q", served.Body, good)
	}
	// A cosignature on a smaller size is not kept over it; once the tree
	// grows, the served checkpoint carries no stale line.
	mustStatus(t, e.post(a, a.intent("repo-a", "four")), http.StatusCreated)
	_, head4 := e.publishLog(pid)
	served = e.do("GET", "/v1/log/"+pid+"/checkpoint", readTok, nil)
	mustStatus(t, served, http.StatusOK)
	if !bytes.Equal(served.Body, head4.Checkpoint) {
		t.Fatalf("served checkpoint at size 4 %q, want the log's note alone %q", served.Body, head4.Checkpoint)
	}
	good4 := cosignWith(t, head4.Checkpoint, lk.Verifier, bKey)
	mustStatus(t, e.do("POST", path, readTok, good4, "Content-Type", "text/plain; charset=utf-8"), http.StatusNoContent)
	mustStatus(t, e.do("POST", path, readTok, good, "Content-Type", "text/plain; charset=utf-8"), http.StatusNoContent)
	served = e.do("GET", "/v1/log/"+pid+"/checkpoint", readTok, nil)
	if served.Status != http.StatusOK || !bytes.Equal(served.Body, good4) {
		t.Fatalf("served checkpoint %d %q, want %q", served.Status, served.Body, good4)
	}
}

// TestReadyzSplitView: a link stopped by a split view makes /readyz
// list federation_split_view under degraded (still 200: the relay
// serves); once the link is removed it no longer counts.
func TestReadyzSplitView(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pid, _ := e.newProject("")
	peer, err := e.st.CreatePeer(ctx, store.Peer{ID: newUUID(), ProjectID: pid, RemoteURL: "https://relay-b.example", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	type ready struct {
		Ready      bool     `json:"ready"`
		Degraded   []string `json:"degraded"`
		SplitViews int      `json:"split_views"`
	}
	get := func() ready {
		t.Helper()
		r := e.do("GET", "/readyz", "", nil)
		mustStatus(t, r, http.StatusOK)
		var b ready
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	if b := get(); !b.Ready || b.Degraded == nil || len(b.Degraded) != 0 || b.SplitViews != 0 {
		t.Fatalf("readyz before = %+v, want ready, degraded [], 0", b)
	}
	if _, err := e.st.SaveSplitView(ctx, store.SplitView{ProjectID: pid, PeerID: peer.ID, Kind: store.SplitViewFork, Origin: "relay-b.example/" + pid,
		Cosigned: []byte("a"), Seen: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if b := get(); !b.Ready || len(b.Degraded) != 1 || b.Degraded[0] != "federation_split_view" || b.SplitViews != 1 {
		t.Fatalf("readyz with a split view = %+v, want ready, degraded [federation_split_view], 1", b)
	}
	if err := e.st.RemovePeer(ctx, pid, peer.ID); err != nil {
		t.Fatal(err)
	}
	if b := get(); !b.Ready || len(b.Degraded) != 0 || b.SplitViews != 0 {
		t.Fatalf("readyz after the link's removal = %+v, want ready, degraded [], 0", b)
	}
}

// TestReadyzLogWitnessSplitView: an external witness's refusal of our own
// checkpoint (package logwitness evidence) lists log_witness_split_view
// under degraded while that witness is configured, and not after.
func TestReadyzLogWitnessSplitView(t *testing.T) {
	st := openTestStore(t)
	ctx := context.Background()
	p, err := st.CreateProject(ctx, newUUID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveSplitView(ctx, store.SplitView{ProjectID: p.ID, PeerID: store.LogWitnessPeerPrefix + "w.example/w", Kind: store.SplitViewInconsistent,
		Origin: "relay.test/" + p.ID, Cosigned: []byte("answer"), Seen: []byte("request")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		witnesses []string
		want      string
	}{
		{"configured", []string{"other.example/w", "w.example/w"}, `"degraded":["log_witness_split_view"],"split_views":0`},
		{"no longer configured", []string{"other.example/w"}, `"degraded":[],"split_views":0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(relay.New(st, relay.Config{PublicURL: "http://relay.test", LogWitnessNames: tc.witnesses}).Handler())
			defer srv.Close()
			e := &env{t: t, st: st, url: srv.URL}
			r := e.do("GET", "/readyz", "", nil)
			mustStatus(t, r, http.StatusOK)
			if !bytes.Contains(r.Body, []byte(tc.want)) {
				t.Fatalf("readyz %s, want %s", r.Body, tc.want)
			}
		})
	}
}
