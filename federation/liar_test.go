package federation_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
	"github.com/acrelay/acrelay/wire"
)

// fakeRemote is a remote relay that lies: it serves a registry and pages
// of records it chooses, and refuses WebSub subscriptions (so the link
// polls).
type fakeRemote struct {
	mu      sync.Mutex
	keys    []relay.RegistryKeyJSON
	records []fakeRecord
	mode    string // "", "endless" (one page streams forever), "empty_more" (one page claims more, brings none)
	srv     *httptest.Server
	pages   int
}

type fakeRecord struct {
	raw        []byte
	seq        int64
	receivedAt time.Time
}

func newFakeRemote(t *testing.T) *fakeRemote {
	f := &fakeRemote{}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/correspondence/keys", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		body, _ := json.Marshal(relay.RegistryKeysJSON{Keys: f.keys})
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	mux.HandleFunc("/v1/correspondence/events", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.pages++
		mode := f.mode
		f.mode = ""
		after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		var recs []fakeRecord
		for _, rec := range f.records {
			if rec.seq > after {
				recs = append(recs, rec)
			}
		}
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch mode {
		case "endless":
			_, _ = w.Write([]byte(`{"events":[`))
			for r.Context().Err() == nil {
				if _, err := w.Write(bytes.Repeat([]byte(" "), 1<<16)); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
			return
		case "empty_more":
			_, _ = w.Write([]byte(`{"events":[],"page":{"after":null,"next_after":null,"has_more":true}}`))
			return
		}
		var out struct {
			Events []wire.Record `json:"events"`
			Page   wire.Page     `json:"page"`
		}
		out.Events = []wire.Record{}
		for _, rec := range recs {
			out.Events = append(out.Events, wire.Record{Event: rec.raw, MissingParents: []string{},
				Receipt: wire.Receipt{ReceivedSeq: strconv.FormatInt(rec.seq, 10), ReceivedAt: correspondence.FormatTimestamp(rec.receivedAt)}})
		}
		body, _ := json.Marshal(out)
		_, _ = w.Write(body)
	})
	mux.HandleFunc("/websub/hub", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadRequest) })
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func keyRow(s *storetest.Signer, created time.Time, revokedAt time.Time) relay.RegistryKeyJSON {
	k := relay.RegistryKeyJSON{SigningKeyID: s.KeyID, IdentityID: s.IdentityID, PublicKeyB64URL: correspondence.EncodePublicKey(s.Pub),
		Status: store.StatusActive, CreatedAt: correspondence.FormatTimestamp(created), Source: "local",
		Identity: relay.RegistryIdentityJSON{DisplayName: "remote", Status: store.StatusActive, CreatedAt: correspondence.FormatTimestamp(created), Source: "local"}}
	if !revokedAt.IsZero() {
		v := correspondence.FormatTimestamp(revokedAt)
		k.Status, k.RevokedAt = store.StatusRevoked, &v
	}
	return k
}

// TestLyingRemote (both engines): a remote serving a bad signature, an
// unknown key, a changed body under a known event id, and a record
// received after its key's revocation gets each refused, kept with its
// reason (GET of the peer link, /metrics) and never stored; the honest
// records around them (including history signed before the revocation)
// are stored. The unknown key's refusal may pass: the cursor waits before
// it (no permanent hole) while later records keep arriving, and once the
// remote's registry lists the key the record is stored and the cursor
// passes everything. A page that never ends, and a page that claims more
// but brings nothing, cost one round each; the link then goes on with
// honest records. A record the remote backdates into a revoked key's
// active window is refused (receipt_backdated).
func TestLyingRemote(t *testing.T) {
	for _, kind := range engines() {
		t.Run(kind, func(t *testing.T) { testLyingRemote(t, kind) })
	}
}

func testLyingRemote(t *testing.T, kind string) {
	pid := storetest.NewUUID()
	f := newFakeRemote(t)
	b := startRelay(t, "B", openStore(t, kind, ""), "127.0.0.1:0", fast)
	b.project(pid)
	honest := storetest.NewSigner(t, pid)
	revoked := storetest.NewSigner(t, pid)
	unknown := storetest.NewSigner(t, pid)
	t0 := time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC)
	revokedAt := t0.Add(time.Hour)
	f.keys = []relay.RegistryKeyJSON{keyRow(honest, t0, time.Time{}), keyRow(revoked, t0, revokedAt)}

	h1ev, h1 := honest.Event(t, storetest.Spec{Summary: "honest one"})
	_, bad := honest.Event(t, storetest.Spec{Summary: "bad signature"})
	i := bytes.Index(bad, []byte(`"value_b64url":"`)) + len(`"value_b64url":"`) + 5
	bad = bytes.Clone(bad)
	if bad[i] == 'A' {
		bad[i] = 'B'
	} else {
		bad[i] = 'A'
	}
	_, unk := unknown.Event(t, storetest.Spec{Summary: "unknown key"})
	changed := bytes.Replace(bytes.Clone(h1), []byte("honest one"), []byte("honest 1!!"), 1)
	_, hist := revoked.Event(t, storetest.Spec{Summary: "history"})
	_, late := revoked.Event(t, storetest.Spec{Summary: "late"})
	h2ev, h2 := honest.Event(t, storetest.Spec{Summary: "honest two"})
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	f.records = []fakeRecord{
		{h1, 1, at(time.Minute)}, {bad, 2, at(2 * time.Minute)}, {unk, 3, at(3 * time.Minute)},
		{changed, 4, at(4 * time.Minute)}, {hist, 5, at(59 * time.Minute)}, {late, 6, at(61 * time.Minute)},
		{h2, 7, at(62 * time.Minute)},
	}
	token := "remote-read-token"
	status, body := b.do("POST", "/v1/admin/projects/"+pid+"/peers", operatorToken, map[string]any{"remote_url": f.srv.URL, "token": token})
	if status != http.StatusCreated {
		t.Fatalf("peer add: %d %s", status, body)
	}
	var peer struct {
		PeerID string `json:"peer_id"`
	}
	_ = json.Unmarshal(body, &peer)

	linkStatus := func() map[string]any {
		_, body := b.do("GET", "/v1/admin/projects/"+pid+"/peers", operatorToken, nil)
		var list struct {
			Peers []struct {
				Status map[string]any `json:"status"`
			} `json:"peers"`
		}
		_ = json.Unmarshal(body, &list)
		if len(list.Peers) != 1 {
			return nil
		}
		return list.Peers[0].Status
	}
	// The unknown key's record (3) is kept to retry: the cursor waits
	// before it while every honest record after it is stored.
	eventually(t, 10*time.Second, "honest records stored", func() (bool, string) {
		s := linkStatus()
		return s != nil && s["remote_cursor"] == "2" && b.head(pid) == 3, func() string { b, _ := json.Marshal(s); return string(b) }()
	})
	ids := b.eventIDs(pid)
	want := []string{h1ev.ID, h2ev.ID}
	if len(ids) != 3 || !contains(ids, want[0]) || !contains(ids, want[1]) {
		t.Fatalf("stored %v, want the two honest records and the history", ids)
	}
	stored, err := b.st.Events(ctx, store.EventQuery{ProjectID: pid, RepositoryID: "repo-1", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range stored.Records {
		if rec.EventID == h1ev.ID && !bytes.Equal(rec.Event, h1) {
			t.Fatalf("stored bytes of %s are not the bytes that verified", h1ev.ID)
		}
	}
	if s := linkStatus(); s["refused"] != float64(4) {
		t.Fatalf("refused %v, want 4 (bad signature, unknown key, changed body, received after revocation)", s["refused"])
	}
	// The imported revocation stops new events here too.
	_, again := revoked.Event(t, storetest.Spec{Summary: "posted here"})
	tok := b.appendToken(pid)
	req, _ := http.NewRequest("POST", b.public+"/v1/correspondence/events", bytes.NewReader(again))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST with the revoked key: %v %v", resp, err)
	}

	// A page that never ends, then a page that claims more but brings
	// nothing: each ends its round; the honest record after them arrives.
	h3ev, h3 := honest.Event(t, storetest.Spec{Summary: "honest three"})
	f.mu.Lock()
	f.mode = "endless"
	f.records = append(f.records, fakeRecord{h3, 8, at(63 * time.Minute)})
	f.mu.Unlock()
	eventually(t, 15*time.Second, "honest record after an endless page", func() (bool, string) {
		return contains(b.eventIDs(pid), h3ev.ID), ""
	})
	f.mu.Lock()
	f.mode = "empty_more"
	h4ev, h4 := honest.Event(t, storetest.Spec{Summary: "honest four"})
	f.records = append(f.records, fakeRecord{h4, 9, at(64 * time.Minute)})
	f.mu.Unlock()
	eventually(t, 15*time.Second, "honest record after an empty page claiming more", func() (bool, string) {
		return contains(b.eventIDs(pid), h4ev.ID), ""
	})
	if s := linkStatus(); s["remote_cursor"] != "2" || s["refused"] != float64(4) {
		t.Fatalf("status after the lies: %v", s)
	}
	refusals := func() (int, string) {
		status, body := b.do("GET", "/v1/admin/projects/"+pid+"/peers/"+peer.PeerID, operatorToken, nil)
		var out struct {
			Refusals struct {
				Pending, Final int64
				ByReason       map[string]int64 `json:"by_reason"`
				Latest         *struct {
					ReceivedSeq string `json:"received_seq"`
					Reason      string
				}
			}
		}
		_ = json.Unmarshal(body, &out)
		r := out.Refusals
		latest := ""
		if r.Latest != nil {
			latest = r.Latest.ReceivedSeq + " " + r.Latest.Reason
		}
		return status, fmt.Sprintf("pending %d final %d %v latest %s", r.Pending, r.Final, r.ByReason, latest)
	}
	status, got := refusals()
	wantRefusals := "pending 1 final 3 map[sender_or_signing_key_not_active:1 signature_invalid:2 signing_key_unknown:1] latest 3 signing_key_unknown"
	if status != http.StatusOK || got != wantRefusals {
		t.Fatalf("GET the peer: %d %s, want %s", status, got, wantRefusals)
	}
	if status, body := b.do("GET", "/v1/admin/projects/"+pid+"/peers/"+storetest.NewUUID(), operatorToken, nil); status != http.StatusNotFound {
		t.Fatalf("GET an unknown peer: %d %s", status, body)
	}

	// The remote backdates a record of the revoked key into its active
	// window (before revoked_at, long before the previous record's
	// receipt): refused for good, whatever the key says.
	_, backdated := revoked.Event(t, storetest.Spec{Summary: "backdated"})
	f.mu.Lock()
	f.records = append(f.records, fakeRecord{backdated, 10, at(59 * time.Minute)})
	f.mu.Unlock()
	eventually(t, 10*time.Second, "backdated record refused", func() (bool, string) {
		_, got := refusals()
		return strings.Contains(got, "receipt_backdated:1"), got
	})

	// The unknown key appears in the remote's registry: the kept record
	// is stored and the cursor moves past everything.
	f.mu.Lock()
	f.keys = append(f.keys, keyRow(unknown, t0, time.Time{}))
	f.mu.Unlock()
	eventually(t, 10*time.Second, "kept record stored once its key arrives", func() (bool, string) {
		s := linkStatus()
		return s["remote_cursor"] == "10" && b.head(pid) == 6, fmt.Sprintf("%v head %d", s, b.head(pid))
	})
	if _, got := refusals(); got != "pending 0 final 4 map[receipt_backdated:1 sender_or_signing_key_not_active:1 signature_invalid:2] latest 10 receipt_backdated" {
		t.Fatalf("refusals after the key arrived: %s", got)
	}
	metrics := scrape(t, b)
	for _, line := range []string{
		`acrelay_federation_refused_records{final="true",reason="receipt_backdated"} 1`,
		`acrelay_federation_refused_records{final="true",reason="signature_invalid"} 2`,
	} {
		if !strings.Contains(metrics, line) {
			t.Fatalf("/metrics lacks %s", line)
		}
	}
	if strings.Contains(metrics, `reason="signing_key_unknown"`) {
		t.Fatal("/metrics still counts the record stored after all")
	}
}

func contains(ss []string, s string) bool {
	for _, v := range ss {
		if v == s {
			return true
		}
	}
	return false
}
