package matrix_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/acrelay/acrelay/couriers/matrix"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

var submitType = event.Type{Type: matrix.EventTypeSubmit, Class: event.MessageEventType}

// replies maps each submission the courier answered to its outcomes.
func (e *env) replies() map[id.EventID][]matrix.Outcome {
	out := map[id.EventID][]matrix.Outcome{}
	for _, ev := range e.roomEvents() {
		var c struct {
			Rel struct {
				InReplyTo struct {
					EventID id.EventID `json:"event_id"`
				} `json:"m.in_reply_to"`
			} `json:"m.relates_to"`
			Outcome *matrix.Outcome `json:"io.github.acrelay.correspondence.outcome"`
		}
		if json.Unmarshal(ev.Content.VeryRaw, &c) == nil && c.Outcome != nil {
			out[c.Rel.InReplyTo.EventID] = append(out[c.Rel.InReplyTo.EventID], *c.Outcome)
		}
	}
	return out
}

// TestMatrixSubmissionsDendrite: signed submissions from a room member go
// through ingest and get exactly one reply each, across a relay restart
// and a replayed transaction; refusals carry the POST codes.
func TestMatrixSubmissionsDendrite(t *testing.T) {
	e := newEnv(t)
	e.bind()
	e.startRelay(e.st)

	_, good := e.signer.Event(t, storetest.Spec{Summary: "from the room"})
	ev, _ := e.signer.Event(t, storetest.Spec{Summary: "tampered"})
	ev.Signature = strings.Repeat("A", 86)
	bad, _ := ev.CanonicalJSON()
	other := storetest.NewSigner(t, storetest.NewUUID())
	_, foreign := other.Event(t, storetest.Spec{})
	cases := []struct {
		name    string
		content string
		want    string // "" for accepted
	}{
		{"signed", `{"event":` + string(good) + `}`, ""},
		{"retry of the same event", `{"event":` + string(good) + `}`, ""},
		{"bad signature", `{"event":` + string(bad) + `}`, "signature_invalid"},
		{"another project", `{"event":` + string(foreign) + `}`, "project_mismatch"},
		{"malformed", `{"event":"nope"}`, ""},
	}
	sent := make([]id.EventID, len(cases))
	for i, tc := range cases {
		resp, err := e.alice.SendMessageEvent(ctx, e.room, submitType, json.RawMessage(tc.content))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		sent[i] = resp.EventID
	}
	e.answered(20*time.Second, sent...)
	r := e.replies()
	before := map[id.EventID]store.MatrixSubmission{}
	for _, mid := range sent {
		before[mid], _ = e.st.MatrixSubmission(ctx, mid.String())
	}
	var seq string
	for i, tc := range cases {
		got := r[sent[i]]
		if len(got) != 1 {
			t.Fatalf("%s: %d replies, want 1", tc.name, len(got))
		}
		o := got[0]
		switch {
		case tc.name == "malformed":
			if o.OK || o.Status != 400 || o.Error == "" {
				t.Errorf("malformed: outcome %+v, want a 400 refusal", o)
			}
		case tc.want == "":
			if !o.OK || o.ReceivedSeq == "" || o.ReceivedAt == "" {
				t.Errorf("%s: outcome %+v, want a receipt", tc.name, o)
			}
			if seq != "" && o.ReceivedSeq != seq {
				t.Errorf("retry got received_seq %s, want %s (idempotent)", o.ReceivedSeq, seq)
			}
			seq = o.ReceivedSeq
		default:
			if o.OK || o.Error != tc.want {
				t.Errorf("%s: outcome %+v, want %s", tc.name, o, tc.want)
			}
		}
	}
	if head, _, _ := e.st.Head(ctx, e.signer.ProjectID); head != 1 {
		t.Errorf("head = %d, want 1 (only the signed event stored)", head)
	}

	// A restarted relay and a replayed transaction answer nothing again.
	e.stopRelay()
	e.startRelay(e.st)
	body, _ := json.Marshal(map[string]any{"events": []map[string]any{{"type": matrix.EventTypeSubmit, "event_id": sent[0],
		"room_id": e.room, "sender": e.alice.UserID, "origin_server_ts": 1, "content": json.RawMessage(cases[0].content)}}})
	for _, tok := range []string{e.reg.ServerToken, "wrong"} {
		req, _ := http.NewRequest(http.MethodPut, e.as.URL+"/_matrix/app/v1/transactions/replay-1", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := 200
		if tok == "wrong" {
			want = 403
		}
		if resp.StatusCode != want {
			t.Errorf("transaction with token %q: %d, want %d", tok[:3], resp.StatusCode, want)
		}
	}
	// The replay queued nothing: every submission is still final with its
	// one reply, and a final submission is never answered again.
	for i, tc := range cases {
		q, err := e.st.MatrixSubmission(ctx, sent[i].String())
		if b := before[sent[i]]; err != nil || q.Final != store.MatrixSubmissionReplied || q.Attempts != b.Attempts || q.ReplyEventID != b.ReplyEventID {
			t.Errorf("%s after restart and replay: %v, final %q after %d attempts, reply %s; want as before: replied after %d, reply %s",
				tc.name, err, q.Final, q.Attempts, q.ReplyEventID, b.Attempts, b.ReplyEventID)
		}
		if got := e.replies()[sent[i]]; len(got) != 1 || got[0] != r[sent[i]][0] {
			t.Errorf("%s after restart and replay: replies %+v, want the one %+v", tc.name, got, r[sent[i]])
		}
	}
}
