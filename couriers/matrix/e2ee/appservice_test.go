//go:build goolm

package e2ee_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/couriers/matrix/e2ee"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/internal/hstest"
	"github.com/acrelay/acrelay/internal/matrixtest"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

// sink hands the homeserver's pushes to the current inbox, and the
// device traffic they carry (Synapse's MSC2409/MSC3202) to the current
// olm machine.
type sink struct {
	in   atomic.Pointer[matrix.Inbox]
	mach atomic.Pointer[e2ee.Machine]
}

func (s *sink) AcceptDeviceTraffic(ctx context.Context, body []byte) error {
	m := s.mach.Load()
	if m == nil {
		return errors.New("relay down")
	}
	return m.ProcessTransaction(ctx, body)
}

func (s *sink) Accept(ctx context.Context, evs []json.RawMessage) error {
	in := s.in.Load()
	if in == nil {
		return errors.New("relay down")
	}
	return in.Accept(ctx, evs)
}

func hexToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestEncryptedRoomAppserviceDendrite: application-service mode with
// encryption. The relay's device comes from m.login.application_service
// (kept in the store and reused after a restart), its to-device traffic
// through a /sync of its own (Dendrite 0.13.8 has no MSC3202/MSC4190); the
// homeserver pushes the room's m.room.encrypted events, which are queued
// as they came and decrypted when answered. A member's Element-style
// encrypted room: records arrive encrypted and decryptable, exactly once
// across a restart; an encrypted submission is appended and answered
// once, encrypted.
// Dendrite asks for a password to publish cross-signing keys, which the
// application service has not: its device stays not cross-signed, and
// the machine's status says why.
func TestEncryptedRoomAppserviceDendrite(t *testing.T) {
	testEncryptedRoomAppserviceXS(t, startDendrite, xsRefused)
}

// xsWant is what an application-service test expects of the device's
// cross-signing.
type xsWant int

const (
	xsAny     xsWant = iota // not looked at
	xsRefused               // not cross-signed: the homeserver asked for a password
	xsStrict                // cross-signed; the member shares keys only with cross-signed devices
)

// testEncryptedRoomAppservice is TestEncryptedRoomAppservice… on the
// homeserver startHS starts (Dendrite, Synapse).
func testEncryptedRoomAppservice(t *testing.T, startHS hstest.Start) {
	testEncryptedRoomAppserviceXS(t, startHS, xsAny)
}

// testEncryptedRoomAppserviceXS is testEncryptedRoomAppservice asserting
// xs of the device's cross-signing: with xsStrict the device is
// cross-signed in the background without a password, the recovery key
// stored and printed once (not again after the restart), the homeserver
// shows the device signed by the user's self-signing key, and the member
// (alice) sends and shares room keys only with cross-signed devices
// (Element's "exclude unverified devices"); with xsRefused the device is
// not cross-signed and Status says the homeserver asked for a password.
func testEncryptedRoomAppserviceXS(t *testing.T, startHS hstest.Start, xs xsWant) {
	if testing.Short() {
		t.Skip("runs a homeserver; skipped with -short")
	}
	var push sink
	reg := appservice.CreateRegistration()
	reg.ID, reg.SenderLocalpart = "acrelay", "acrelay"
	reg.AppToken, reg.ServerToken = hexToken(), hexToken()
	reg.Namespaces.UserIDs.Register(regexp.MustCompile(`@acrelay:acrelay\.test`), true)
	// The device's to-device traffic in the transactions where the
	// homeserver can (Synapse: it refuses /sync to the sender); Dendrite
	// ignores both and the device's own /sync carries it.
	reg.EphemeralEvents, reg.MSC3202 = true, true
	as := httptest.NewServer(relay.AppserviceHandler(reg.ServerToken, &push, nil))
	t.Cleanup(as.Close)
	reg.URL = as.URL
	y, err := reg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	hs := startHS(t, hstest.Options{AppserviceYAML: y})
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := st.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	signer := storetest.NewSigner(t, p.ID).Register(t, st)
	asUser := hs.UserID("acrelay")
	asCli, err := matrix.NewClient(hs.HomeserverURL(), asUser, reg.AppToken)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	var device id.DeviceID
	var runner *couriers.Runner
	var printed []string
	var devCli *mautrix.Client
	start := func() (stop func()) {
		var err error
		devCli, err = e2ee.AppserviceDevice(ctx, asCli, st)
		if err != nil {
			t.Fatal(err)
		}
		if device != "" && devCli.DeviceID != device {
			t.Fatalf("a restart made a new device %s (was %s)", devCli.DeviceID, device)
		}
		device = devCli.DeviceID
		cr, err := e2ee.Open(ctx, e2ee.Options{Client: devCli, Store: st, Logger: log, Appservice: asCli,
			PrintRecoveryKey: func(rk string) { printed = append(printed, rk) }})
		if err != nil {
			t.Fatal(err)
		}
		m := cr.(*e2ee.Machine)
		if err := m.Err(ctx); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		switch xsigned := m.CrossSigned(wctx); xs {
		case xsStrict:
			rk, err := st.MatrixCryptoSecret(ctx, store.MatrixRecoveryKey, func() (string, error) { return "", errors.New("none stored") })
			if !xsigned || err != nil || len(printed) != 1 || printed[0] != rk || rk == "" {
				t.Fatalf("cross-signed %v; recovery key stored %v, printed %d times (want true, stored, once)", xsigned, err, len(printed))
			}
			if f := matrix.CheckDeviceKeys(ctx, devCli); f.Status != matrix.StatusOK {
				t.Fatalf("doctor: %+v, want ok (published and cross-signed)", f)
			}
			if cs := m.Status(ctx); !cs.CrossSigned || cs.Detail != "ready; the device is cross-signed by the relay's user" {
				t.Fatalf("status %+v", cs)
			}
		case xsRefused:
			want := "ready; the device is not cross-signed (clients that exclude unverified devices send it no keys): the homeserver asks for the account password (user-interactive auth) to publish cross-signing keys, which an application service has not: its device stays not cross-signed on this homeserver (a bot with --matrix-password-file can be)"
			if cs := m.Status(ctx); xsigned || cs.CrossSigned || cs.Detail != want || len(printed) != 0 {
				t.Fatalf("status %+v, printed %d recovery keys; want not cross-signed, detail %q, none printed", cs, len(printed), want)
			}
			if f := matrix.CheckDeviceKeys(ctx, devCli); f.Status != matrix.StatusWarn {
				t.Fatalf("doctor: %+v, want warn (not cross-signed)", f)
			}
		}
		c := &matrix.Courier{Store: st, Client: asCli, PublicURL: "http://relay.test", Host: "hs", Crypto: cr, Logger: log}
		runner = couriers.NewRunner(st, c, couriers.Options{Holder: "as-" + hexToken()[:6], LeaseTTL: 15 * time.Second,
			Backoff: couriers.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second}, DeliveryTimeout: 20 * time.Second, Batch: 5, Refresh: time.Second})
		in := &matrix.Inbox{Store: st, Ingest: ingest.New(st, ingest.Options{}), Client: asCli, Crypto: cr, DeferDecrypt: true, Logger: log}
		push.in.Store(in)
		push.mach.Store(m)
		rctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { _ = runner.Run(rctx) })
		wg.Go(func() { _ = in.Run(rctx) })
		wg.Go(func() { _ = m.SyncDevice(rctx) })
		return func() { push.in.Store(nil); push.mach.Store(nil); cancel(); wg.Wait(); _ = m.Close() }
	}
	stop := start()
	defer func() { stop() }()

	alice := matrixtest.NewMember(t, hs, "alice")
	if xs == xsStrict {
		alice.Mach.SendKeysMinTrust = id.TrustStateCrossSignedTOFU
		alice.Mach.ShareKeysMinTrust = id.TrustStateCrossSignedTOFU
	}
	resp, err := alice.Cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "encrypted, appservice",
		Invite:       []id.UserID{asUser},
		InitialState: []*event.Event{{Type: event.StateEncryption, Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	room := resp.RoomID
	b := &matrix.Binder{Store: st, Client: asCli, Refresh: runner.Refresh, CanEncrypt: true}
	if _, err := asCli.JoinRoomByID(ctx, room); err != nil {
		t.Fatal(err)
	}
	bd, err := b.Bind(ctx, p.ID, matrix.BindRequest{RoomID: room.String()})
	if err != nil || !bd.Encrypted {
		t.Fatalf("bind: %v (encrypted %v)", err, bd.Encrypted)
	}
	waitFor(t, 30*time.Second, "alice's client saw the relay join", func() bool { return alice.Cli.StateStore.IsInRoom(ctx, room, asUser) })

	var ids []string
	appendN := func(n int) {
		for range n {
			_, raw := signer.Event(t, storetest.Spec{Summary: "appservice"})
			res, err := ingest.New(st, ingest.Options{}).Append(ctx, p.ID, raw)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Record.EventID)
		}
	}
	appendN(3)
	alice.WaitRoom(t, room, asUser, signer.Pub, ids)

	_, raw := signer.Event(t, storetest.Spec{Summary: "submitted encrypted to the appservice"})
	sub, err := alice.Send(room, event.Type{Type: matrix.EventTypeSubmit, Class: event.MessageEventType}, json.RawMessage(`{"event":`+string(raw)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	var s matrixtest.Seen
	waitFor(t, 60*time.Second, "the encrypted submission answered", func() bool {
		s = alice.Read(t, room, asUser, signer.Pub)
		return len(s.Replies[sub.EventID]) > 0
	})
	waitAnswered(t, st, sub.EventID)
	s = alice.Read(t, room, asUser, signer.Pub)
	if got := s.Replies[sub.EventID]; len(got) != 1 || !got[0].OK {
		t.Fatalf("replies %+v, want exactly one accepting it", got)
	}
	ids = append(ids, s.Replies[sub.EventID][0].EventID)

	stop()
	appendN(2)
	stop = start()
	appendN(2)
	alice.WaitRoom(t, room, asUser, signer.Pub, ids)
}

// TestCrossSignedAppserviceLostStoreSynapse: an application service whose
// database was lost (a fresh store against the same homeserver user)
// finds the user's cross-signing keys and no recovery key for them: the
// new device is cross-signed all the same, with new keys published with
// the application service's token (Synapse asks an application service
// for no password to replace them), a new recovery key stored and printed
// once; the first device no longer carries a valid self-signing
// signature (the keys were replaced, not reused).
func TestCrossSignedAppserviceLostStoreSynapse(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a homeserver; skipped with -short")
	}
	var push sink
	reg := appservice.CreateRegistration()
	reg.ID, reg.SenderLocalpart = "acrelay", "acrelay"
	reg.AppToken, reg.ServerToken = hexToken(), hexToken()
	reg.Namespaces.UserIDs.Register(regexp.MustCompile(`@acrelay:acrelay\.test`), true)
	as := httptest.NewServer(relay.AppserviceHandler(reg.ServerToken, &push, nil))
	t.Cleanup(as.Close)
	reg.URL = as.URL
	y, err := reg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	hs := startSynapse(t, hstest.Options{AppserviceYAML: y})
	asUser := hs.UserID("acrelay")
	asCli, err := matrix.NewClient(hs.HomeserverURL(), asUser, reg.AppToken)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// signFresh starts the relay's device on a fresh store and waits for
	// its cross-signing.
	signFresh := func() (id.DeviceID, string) {
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		devCli, err := e2ee.AppserviceDevice(ctx, asCli, st)
		if err != nil {
			t.Fatal(err)
		}
		var printed []string
		cr, err := e2ee.Open(ctx, e2ee.Options{Client: devCli, Store: st, Logger: log, Appservice: asCli,
			PrintRecoveryKey: func(rk string) { printed = append(printed, rk) }})
		if err != nil {
			t.Fatal(err)
		}
		m := cr.(*e2ee.Machine)
		defer m.Close()
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if !m.CrossSigned(wctx) {
			t.Fatalf("device %s not cross-signed: %+v", devCli.DeviceID, m.Status(ctx))
		}
		rk, err := st.MatrixCryptoSecret(ctx, store.MatrixRecoveryKey, func() (string, error) { return "", errors.New("none stored") })
		if err != nil || len(printed) != 1 || printed[0] != rk || rk == "" {
			t.Fatalf("recovery key stored %v, printed %d times (want stored, once)", err, len(printed))
		}
		if f := matrix.CheckAppserviceDeviceKeys(ctx, asCli, asUser, devCli.DeviceID); f.Status != matrix.StatusOK {
			t.Fatalf("doctor: %+v, want ok", f)
		}
		return devCli.DeviceID, rk
	}
	first, rk1 := signFresh()
	second, rk2 := signFresh()
	if first == second || rk1 == rk2 {
		t.Fatalf("the second store reused device %s / the recovery key", second)
	}
	if f := matrix.CheckAppserviceDeviceKeys(ctx, asCli, asUser, first); f.Status != matrix.StatusWarn {
		t.Fatalf("the first device after the keys were replaced: %+v, want warn (not cross-signed)", f)
	}
}
