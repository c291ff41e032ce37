package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store/sqlite"
)

// realRelay runs the real relay handler on a fresh SQLite store and
// returns an admin client for its first-start project.
func realRelay(t *testing.T) (*client.Client, string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	boot, err := registry.FirstStart(ctx, st, false)
	if err != nil || boot == nil {
		t.Fatalf("first start: %v", err)
	}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Handler = relay.New(st, relay.Config{PublicURL: "http://" + srv.Listener.Addr().String()}).Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, boot.ProjectToken)
	if err != nil {
		t.Fatal(err)
	}
	return c, boot.ProjectID
}

// agent registers an identity with a fresh key and returns its session.
func agent(t *testing.T, c *client.Client, project string, kr client.Keyring) *client.Session {
	t.Helper()
	ctx := t.Context()
	ident, err := c.CreateIdentity(ctx, project, "", "sdk test")
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := client.GenerateKey()
	s, _ := client.NewSigner(priv, project, correspondence.Sender{})
	key, err := c.AddKey(ctx, ident.IdentityID, "", s.PublicKeyB64URL())
	if err != nil {
		t.Fatal(err)
	}
	if ident.Status != "active" || key.Status != "active" {
		t.Fatalf("statuses %q %q", ident.Status, key.Status)
	}
	s.Sender = correspondence.Sender{IdentityID: ident.IdentityID, SigningKeyID: key.SigningKeyID, DeviceID: uuid.NewString(), SessionID: uuid.NewString()}
	kr[key.SigningKeyID] = client.Key{IdentityID: ident.IdentityID, PublicKey: s.PublicKey()}
	return client.NewSession(s, client.NewMemorySequencer(0))
}

// TestAgainstRealRelay posts every kind through the SDK to the real relay,
// reads everything back verified, and checks retries, refusals and links.
func TestAgainstRealRelay(t *testing.T) {
	c, project := realRelay(t)
	ctx := t.Context()
	who, err := c.Whoami(ctx)
	if err != nil || who.ProjectID != project {
		t.Fatalf("whoami %+v %v", who, err)
	}
	kr := client.Keyring{}
	s := agent(t, c, project, kr)
	c.Keys = kr
	at := client.At{RepositoryID: "repo:sdk", ThreadID: "t", Parents: []string{}, Scope: correspondence.Scope{Paths: []string{"src"}}}
	now := time.Now()
	var posted []string
	post := func(d client.Draft) *correspondence.Event {
		t.Helper()
		ev, err := s.Sign(at, d)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Post(ctx, ev)
		if err != nil {
			t.Fatalf("%s: %v", d.Kind, err)
		}
		if !res.Created || !res.Record.Verified {
			t.Fatalf("%s: created %v verified %v", d.Kind, res.Created, res.Record.Verified)
		}
		posted = append(posted, ev.ID)
		return ev
	}
	intent := post(client.Intent("Coordinate."))
	open := post(client.ClaimOpen(uuid.NewString(), now.Add(time.Hour)))
	renew := post(client.ClaimRenew(open, now.Add(2*time.Hour)))
	post(client.ClaimRelease(renew, ""))
	post(client.Progress("Half done."))
	post(client.Observation("Two prefixes overlap."))
	offer := post(client.ArtifactOffer(client.GitCommit(strings.Repeat("c", 40)), "Review please."))
	post(client.AckSeen(offer.ID, ""))
	post(client.AckUnderstood(offer.ID, ""))
	post(client.AckAccepted(offer.ID, ""))
	post(client.AckApplied(offer.ID, strings.Repeat("d", 40), ""))
	post(client.AckRejected(intent.ID, "Not now."))
	raise := post(client.ConflictRaise([]string{intent.ID, offer.ID}, ""))
	post(client.ConflictResolve([]string{raise.ID}, "Both stand.", ""))
	pause := post(client.Pause(now.Add(time.Minute), ""))
	post(client.Rest(time.Time{}, ""))
	post(client.Resume(pause.ID, ""))
	post(client.Refusal(intent.ID, ""))
	post(client.Handoff("Summary.", "Run the tests.", uuid.NewString()))
	post(client.Close(""))
	post(client.Repair([]string{intent.ID}, "Corrected.", ""))

	kinds := map[correspondence.Kind]bool{}
	var got []string
	for r, err := range c.Events(ctx, client.EventsQuery{RepositoryID: "repo:sdk", Limit: 5}) {
		if err != nil {
			t.Fatal(err)
		}
		if !r.Verified {
			t.Fatal("unverified record")
		}
		kinds[r.Event.Kind] = true
		got = append(got, r.Event.ID)
	}
	if len(kinds) != 21 || strings.Join(got, ",") != strings.Join(posted, ",") {
		t.Fatalf("read back %d records of %d kinds", len(got), len(kinds))
	}

	// An exact retry is 200 with the original receipt.
	res, err := c.Post(ctx, intent)
	if err != nil || res.Created || res.Record.Receipt.ReceivedSeq != 1 {
		t.Fatalf("retry %+v %v", res, err)
	}
	// A refusal carries the relay's code.
	stranger, _ := client.GenerateKey()
	bad := *intent
	if err := bad.Sign(stranger); err != nil {
		t.Fatal(err)
	}
	_, err = c.Post(ctx, &bad)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 403 || ae.Code != "signature_invalid" {
		t.Fatalf("stranger's signature: %v", err)
	}

	links, err := c.Discover(ctx, "repo:sdk", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := links.Get(client.RelAlternate, client.MediaTypeAtom); err != nil {
		t.Errorf("atom alternate: %v", err)
	}
	for _, rel := range []string{client.RelVoice, client.RelActiveClaims} {
		if _, err := links.Get(rel, ""); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
	}
	if live, err := links.Expand(client.RelLive, map[string]string{"identity_id": s.Signer.Sender.IdentityID}); err != nil ||
		!strings.Contains(live, "identity_id="+s.Signer.Sender.IdentityID) {
		t.Errorf("live template: %q %v", live, err)
	}

	// Records signed by a key the keyring lacks are refused on read.
	c.Keys = client.Keyring{}
	if _, err := c.EventsPage(ctx, client.EventsQuery{RepositoryID: "repo:sdk"}); !errors.Is(err, client.ErrUnknownSigningKey) {
		t.Fatalf("empty keyring: %v", err)
	}
}

// TestFollowAgainstRealRelay follows the real relay's wake stream: every
// record posted (before and while following) arrives exactly once, in
// receipt order, verified, with the SSE path (no polling fallback).
func TestFollowAgainstRealRelay(t *testing.T) {
	c, project := realRelay(t)
	kr := client.Keyring{}
	s := agent(t, c, project, kr)
	c.Keys = kr
	at := client.At{RepositoryID: "repo:follow", ThreadID: "t", Parents: []string{}, Scope: correspondence.Scope{Paths: []string{"src"}}}
	var want []string
	post := func(summary string) {
		ev, err := s.Sign(at, client.Progress(summary))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Post(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
		want = append(want, ev.ID)
	}
	post("before following 1")
	post("before following 2")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var got []string
	for rec, err := range c.Follow(ctx, client.FollowQuery{RepositoryID: "repo:follow", IdentityID: s.Signer.Sender.IdentityID,
		PollInterval: time.Hour}) { // an hour: only the wake stream can deliver in time
		if err != nil {
			t.Fatalf("follow: %v (got %d of %d)", err, len(got), len(want))
		}
		if !rec.Verified {
			t.Fatal("a followed record was not verified")
		}
		got = append(got, rec.Event.ID)
		if len(got) == 2 {
			for i := 0; i < 5; i++ {
				post("while following " + string(rune('a'+i)))
			}
		}
		if len(got) == 7 {
			break
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("followed %v\nwant %v", got, want)
	}
}

// TestFollowWithUnreachableWakeStillCatchesUp: when the advertised wake URL
// cannot be reached, Follow still delivers what the log holds.
func TestFollowWithUnreachableWakeStillCatchesUp(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	boot, _ := registry.FirstStart(ctx, st, false)
	// The public URL points nowhere: the Link-Template names a dead host.
	srv := httptest.NewServer(relay.New(st, relay.Config{PublicURL: "http://127.0.0.1:1"}).Handler())
	t.Cleanup(srv.Close)
	c, _ := client.New(srv.URL, boot.ProjectToken)
	kr := client.Keyring{}
	s := agent(t, c, boot.ProjectID, kr)
	c.Keys = kr
	at := client.At{RepositoryID: "repo:dead-wake", ThreadID: "t", Parents: []string{}, Scope: correspondence.Scope{Paths: []string{"."}}}
	var want []string
	for _, m := range []string{"one", "two"} {
		ev, _ := s.Sign(at, client.Progress(m))
		if _, err := c.Post(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
		want = append(want, ev.ID)
	}
	fctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got []string
	for rec, err := range c.Follow(fctx, client.FollowQuery{RepositoryID: "repo:dead-wake", IdentityID: s.Signer.Sender.IdentityID}) {
		if err != nil {
			t.Fatalf("follow: %v after %d records", err, len(got))
		}
		got = append(got, rec.Event.ID)
		if len(got) == len(want) {
			break
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v want %v", got, want)
	}
}
