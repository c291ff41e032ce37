package matrix_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/store"
)

// TestEncryptedRoomRefusedWithoutCrypto: a relay without encryption (no
// Crypto: a build without -tags goolm, or application-service mode)
// refuses to bind an end-to-end encrypted room (ErrEncryptionUnavailable)
// and, for a binding made anyway (in the store directly, as one made
// before the room turned encryption on), sends nothing into the room —
// not one plaintext event — while the runner reports why.
func TestEncryptedRoomRefusedWithoutCrypto(t *testing.T) {
	e := newEnv(t)
	room, err := matrix.CreateEncryptedRoom(ctx, e.alice, "encrypted", []id.UserID{e.botID})
	if err != nil {
		t.Fatal(err)
	}
	e.room = room
	cli := e.client()
	if _, err := cli.JoinRoomByID(ctx, room); err != nil {
		t.Fatal(err)
	}
	b := &matrix.Binder{Store: e.st, Client: cli}
	if _, err := b.Bind(ctx, e.signer.ProjectID, matrix.BindRequest{RoomID: room.String()}); !errors.Is(err, matrix.ErrEncryptionUnavailable) {
		t.Fatalf("Bind of an encrypted room without encryption: %v, want ErrEncryptionUnavailable", err)
	}
	if _, err := b.Bind(ctx, e.signer.ProjectID, matrix.BindRequest{Create: true, Encrypted: true}); !errors.Is(err, matrix.ErrEncryptionUnavailable) {
		t.Fatalf("Bind creating an encrypted room without encryption: %v, want ErrEncryptionUnavailable", err)
	}
	if _, err := e.st.CreateMatrixBinding(ctx, store.MatrixBinding{ID: "5d0c4a8e-2f0b-4c39-9a43-6b1f0f3a2d11", ProjectID: e.signer.ProjectID, RoomID: room.String()}); err != nil {
		t.Fatal(err)
	}
	e.startRelay(e.st)
	e.appendN(2)
	waitFor(t, 20*time.Second, "the runner reports the refusal", func() bool {
		return strings.Contains(e.runner.Status().LastError, "end-to-end encrypted")
	})
	// Three refused deliveries in a row stored: the courier retried, and
	// still sent nothing.
	waitFor(t, 20*time.Second, "three refused deliveries", func() bool {
		ts, _ := e.st.TargetStates(ctx, matrix.Name, e.signer.ProjectID)
		return len(ts) == 1 && ts[0].Failures >= 3 && strings.Contains(ts[0].LastError, "end-to-end encrypted")
	})
	for _, ev := range e.roomEvents() {
		if ev.StateKey == nil && (ev.Type.Type == matrix.EventTypeRecord || ev.Type == event.EventMessage || ev.Type == event.EventEncrypted) {
			t.Fatalf("the relay sent %s into the encrypted room", ev.Type.Type)
		}
	}
}
