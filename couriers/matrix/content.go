package matrix

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/matrix-org/gomatrixserverlib"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// Matrix event types and content keys (spec/matrix.md "Decisions").
const (
	EventTypeRecord = "io.github.acrelay.correspondence.record"
	EventTypeSubmit = "io.github.acrelay.correspondence.submit"
	// KeyRecord is the m.notice content key carrying the record.
	KeyRecord = EventTypeRecord
	// KeyOutcome is the reply content key carrying a submission's outcome.
	KeyOutcome = "io.github.acrelay.correspondence.outcome"
)

// RoomVersion is the room version the courier creates rooms with, and
// whose content rules (canonical JSON) it checks before sending.
const RoomVersion = gomatrixserverlib.RoomVersionV10

// MaxContentBytes bounds a record part's content: a whole PDU is at most
// 65,536 bytes, and the envelope (ids, signatures, hashes) needs the
// rest. A larger record goes as a reference.
const MaxContentBytes = 60000

// MaxEncryptedContentBytes bounds a record part's plaintext content in an
// end-to-end encrypted room: megolm's ciphertext is the base64 of the
// whole plaintext event ({"type","content","room_id"}) plus padding and
// MAC, about 4/3 of it, and must fit the same 65,536-byte PDU. Measured on
// Dendrite 0.13.8 (TestEncryptedSizeLimitDendrite): plaintext content up
// to 48,357 bytes passes, 48,365 is refused with 413; the bound leaves
// room for the notice (the record plus its summary, < 800 bytes more) and
// for longer room ids and server names. A larger record goes as a
// reference.
const MaxEncryptedContentBytes = 44000

// maxContent is the content bound of a room.
func maxContent(encrypted bool) int {
	if encrypted {
		return MaxEncryptedContentBytes
	}
	return MaxContentBytes
}

// TxnID is the transaction id of one part of a record in a room: the same
// for every attempt, in every process.
func TxnID(roomID, eventID, part string) string {
	h := sha256.Sum256([]byte(roomID + "\x00" + eventID + "\x00" + part))
	return "acrelay." + part + "." + hex.EncodeToString(h[:16])
}

// Reference is what a record too large for a PDU is sent as: enough to
// fetch it from the relay.
type Reference struct {
	EventID      string `json:"event_id"`
	Kind         string `json:"kind"`
	RepositoryID string `json:"repository_id"`
	ReceivedSeq  string `json:"received_seq"`
	URL          string `json:"url"`
}

// recordContent is the content of a record event: the immutable
// {event, receipt} and the relay's URL, or a reference.
func recordContent(publicURL string, r store.Record) (json.RawMessage, bool) {
	return recordContentMax(publicURL, r, MaxContentBytes)
}

// recordContentMax is recordContent with a content bound of maxBytes.
func recordContentMax(publicURL string, r store.Record, maxBytes int) (json.RawMessage, bool) {
	var b bytes.Buffer
	imm := r.ImmutableJSON()
	b.Write(imm[:len(imm)-1]) // {"event":…,"receipt":{…}
	b.WriteString(`,"relay":`)
	rel, _ := json.Marshal(publicURL)
	b.Write(rel)
	b.WriteByte('}')
	if b.Len() <= maxBytes {
		if _, err := gomatrixserverlib.EnforcedCanonicalJSON(b.Bytes(), RoomVersion); err == nil {
			return b.Bytes(), true
		}
	}
	q := url.Values{"repository_id": {r.RepositoryID}, "after": {strconv.FormatInt(r.ReceivedSeq-1, 10)}, "limit": {"1"}}
	ref := struct {
		Reference Reference `json:"reference"`
		Relay     string    `json:"relay"`
	}{Reference{EventID: r.EventID, Kind: string(r.Kind), RepositoryID: r.RepositoryID,
		ReceivedSeq: strconv.FormatInt(r.ReceivedSeq, 10), URL: publicURL + "/v1/correspondence/events?" + q.Encode()}, publicURL}
	out, _ := json.Marshal(ref)
	return out, false
}

// noticeContent is the m.notice of a record: a one-line summary and the
// same record under KeyRecord.
func noticeContent(r store.Record, record json.RawMessage, full bool) map[string]any {
	return map[string]any{"msgtype": "m.notice", "body": Summary(r, full), KeyRecord: record}
}

// Summary is the one-line human summary of a record:
// "[claim.open] 1b4e28ba claims docs, docs/specs — sha256:6f9d0a1c…".
func Summary(r store.Record, full bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s]", r.Kind)
	if ev, err := correspondence.ParseEvent(r.Event); err == nil {
		who := ev.Sender.IdentityID
		if len(who) > 8 {
			who = who[:8]
		}
		fmt.Fprintf(&b, " %s in %s/%s", who, ev.RepositoryID, ev.ThreadID)
		if len(ev.Scope.Paths) > 0 {
			fmt.Fprintf(&b, " on %s", clip(strings.Join(ev.Scope.Paths, ", "), maxSummaryPaths))
		}
	}
	id := r.EventID
	if len(id) > 15 {
		id = id[:15] + "…"
	}
	fmt.Fprintf(&b, " — %s (received_seq %d)", id, r.ReceivedSeq)
	if !full {
		b.WriteString(" [too large for the room: fetch it from the relay]")
	}
	return b.String()
}

// maxSummaryPaths bounds the paths in a summary (bytes): the notice
// carries the summary beside a record of up to MaxContentBytes, and both
// must fit one PDU (64 paths of 256 scalars would be 64 KiB alone).
const maxSummaryPaths = 200

// clip cuts s to at most n bytes at a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// sentRecord is what a record part found in a room says about itself.
type sentRecord struct {
	eventID string
	seq     int64
}

// parseRecord reads the event id and received_seq of a record content (a
// record event's content, or a notice's KeyRecord).
func parseRecord(content json.RawMessage) (sentRecord, bool) {
	var c struct {
		Event *struct {
			EventID string `json:"event_id"`
		} `json:"event"`
		Receipt *struct {
			ReceivedSeq string `json:"received_seq"`
		} `json:"receipt"`
		Reference *Reference `json:"reference"`
	}
	if json.Unmarshal(content, &c) != nil {
		return sentRecord{}, false
	}
	var id, seq string
	switch {
	case c.Event != nil && c.Receipt != nil:
		id, seq = c.Event.EventID, c.Receipt.ReceivedSeq
	case c.Reference != nil:
		id, seq = c.Reference.EventID, c.Reference.ReceivedSeq
	default:
		return sentRecord{}, false
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil || id == "" {
		return sentRecord{}, false
	}
	return sentRecord{eventID: id, seq: n}, true
}
