package store

import (
	"strconv"

	"github.com/acrelay/acrelay/correspondence"
)

// ImmutableJSON returns the RFC 8785 bytes of {event, receipt} (spec §7,
// §9): the Atom entry content and every courier's payload. It depends only
// on fields that never change after the first acceptance, so the bytes are
// the same forever. r.Event is already canonical, and "event" < "receipt",
// "received_at" < "received_seq" in UTF-16 order, so plain concatenation
// is canonical.
func (r Record) ImmutableJSON() []byte {
	at := correspondence.FormatTimestamp(r.ReceivedAt)
	b := make([]byte, 0, len(r.Event)+96)
	b = append(b, `{"event":`...)
	b = append(b, r.Event...)
	b = append(b, `,"receipt":{"received_at":"`...)
	b = append(b, at...)
	b = append(b, `","received_seq":"`...)
	b = strconv.AppendInt(b, r.ReceivedSeq, 10)
	b = append(b, `"}}`...)
	return b
}
