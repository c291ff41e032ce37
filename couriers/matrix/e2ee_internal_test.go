package matrix

import (
	"encoding/json"
	"errors"
	"testing"

	"maunium.net/go/mautrix/event"

	"github.com/acrelay/acrelay/store"
)

// FuzzQueuedEncrypted: whatever a stored submission holds, queuedEncrypted
// never panics; it finds an event only under the one member keyEncrypted,
// and what encryptedSubmission wraps it finds again with the same id.
func FuzzQueuedEncrypted(f *testing.F) {
	f.Add([]byte(`{"event_id":"$a","type":"m.room.encrypted","sender":"@a:b","content":{"algorithm":"m.megolm.v1.aes-sha2"}}`))
	f.Add([]byte(`{"io.github.acrelay.matrix_encrypted":1}`))
	f.Add([]byte(`{"project_id":"x"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_ = queuedEncrypted(store.MatrixSubmission{Event: raw, RoomID: "!r:s"})
		var ev event.Event
		if json.Unmarshal(raw, &ev) != nil || !json.Valid(raw) {
			return
		}
		got := queuedEncrypted(store.MatrixSubmission{Event: encryptedSubmission(raw), RoomID: "!r:s"})
		if got == nil {
			t.Fatalf("wrapped event not found again: %s", raw)
		}
		if got.ID != ev.ID {
			t.Fatalf("event id %q, want %q", got.ID, ev.ID)
		}
	})
}

// TestUndecryptableReason: each decryption failure maps to its stable
// metric label.
func TestUndecryptableReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{ErrEncryptionUnavailable, ReasonNoEncryption},
		{errors.New("undecryptable: no_session: failed to decrypt megolm event: no session with given ID found"), ReasonNoSession},
		{errors.New("undecryptable: replayed_index: duplicate megolm message index 0"), ReasonReplay},
		{errors.New("undecryptable: malformed: corrupted megolm payload"), ReasonMalformed},
		{errors.New("something else"), ReasonOther},
	} {
		if got := UndecryptableReason(c.err); got != c.want {
			t.Errorf("%v: %q, want %q", c.err, got, c.want)
		}
	}
}
