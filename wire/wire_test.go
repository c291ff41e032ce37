package wire_test

import (
	stdjson "encoding/json"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/acrelay/acrelay/wire"
)

const event = `{"b":1,"a":"x"}` // not canonical on purpose: written as given

func TestMarshalAppend(t *testing.T) {
	tests := []struct {
		name string
		in   wire.AppendAnswer
		want string
	}{
		{
			name: "no warnings",
			in: wire.AppendAnswer{Record: wire.Record{Event: jsontext.Value(event), Receipt: wire.Receipt{ReceivedSeq: "7", ReceivedAt: "2026-07-19T10:00:00.000Z"},
				MissingParents: []string{}, LineageStatus: "not_applicable"}, Warnings: []wire.Warning{}},
			want: `{"event":{"b":1,"a":"x"},"receipt":{"received_seq":"7","received_at":"2026-07-19T10:00:00.000Z"},"missing_parents":[],"lineage_status":"not_applicable","warnings":[]}`,
		},
		{
			name: "a warning with ids, one without",
			in: wire.AppendAnswer{Record: wire.Record{Event: jsontext.Value(event), Receipt: wire.Receipt{ReceivedSeq: "1", ReceivedAt: "t"},
				MissingParents: []string{"sha256:aa"}, LineageStatus: "pending"},
				Warnings: []wire.Warning{{Code: "session_fork", Detail: "d", EventIDs: []string{"sha256:bb"}}, {Code: "claim_lineage_pending", Detail: "e"}}},
			want: `{"event":{"b":1,"a":"x"},"receipt":{"received_seq":"1","received_at":"t"},"missing_parents":["sha256:aa"],"lineage_status":"pending",` +
				`"warnings":[{"code":"session_fork","detail":"d","event_ids":["sha256:bb"]},{"code":"claim_lineage_pending","detail":"e"}]}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := wire.MarshalAppend(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			// The client reads it back with encoding/json.
			var back wire.AppendAnswer
			if err := stdjson.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			if string(back.Event) != event || !reflect.DeepEqual(back.Receipt, tc.in.Receipt) || !reflect.DeepEqual(back.Warnings, tc.in.Warnings) {
				t.Fatalf("read back %+v", back)
			}
		})
	}
}

func TestRecordBytes(t *testing.T) {
	r := wire.Record{Event: jsontext.Value(event), Receipt: wire.Receipt{ReceivedSeq: "2", ReceivedAt: "t"}, MissingParents: []string{}, LineageStatus: "valid"}
	got, err := json.Marshal(r, json.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"event":{"b":1,"a":"x"},"receipt":{"received_seq":"2","received_at":"t"},"missing_parents":[],"lineage_status":"valid"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestErrorBody(t *testing.T) {
	tests := []struct {
		name string
		in   wire.Error
		want string
	}{
		{name: "bare", in: wire.Error{Error: wire.CodeNotFound, Message: "no such resource"},
			want: `{"error":"not_found","message":"no such resource"}`},
		{name: "hint and issues", in: wire.Error{Error: wire.CodeEventInvalid, Message: "m", Hint: "h", Issues: jsontext.Value(`[{"pointer":"/a","code":"required","message":"x"}]`)},
			want: `{"error":"event_invalid","message":"m","hint":"h","issues":[{"pointer":"/a","code":"required","message":"x"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.in, json.Deterministic(true))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			var back wire.Error
			if err := stdjson.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			if back.Error != tc.in.Error || back.Message != tc.in.Message || back.Hint != tc.in.Hint || string(back.Issues) != string(tc.in.Issues) {
				t.Fatalf("read back %+v", back)
			}
		})
	}
}

// marshalAppendReflect is the reflection-based encoding MarshalAppend
// replaced: the event as given, then json.Marshal of the other members.
func marshalAppendReflect(a wire.AppendAnswer) ([]byte, error) {
	event := a.Event
	a.Event = nil
	tail, err := json.Marshal(a, json.Deterministic(true))
	if err != nil {
		return nil, err
	}
	return append(append(append([]byte(`{"event":`), event...), ','), tail[1:]...), nil
}

func TestMarshalAppendMatchesJSON(t *testing.T) {
	for _, a := range []wire.AppendAnswer{
		{Record: wire.Record{Event: jsontext.Value(event)}},
		{Record: wire.Record{Event: jsontext.Value(event), Receipt: wire.Receipt{ReceivedSeq: "18446744073709551615", ReceivedAt: "2026-07-19T10:00:00.000Z"},
			MissingParents: []string{"a", "b"}, LineageStatus: "valid"},
			Warnings: []wire.Warning{{Code: "c", Detail: "quote \" backslash \\ tab \t nul \x00 <&> \u2028 é", EventIDs: []string{}, Paths: []string{"p/1", "p\"2"}}}},
		{Record: wire.Record{Event: jsontext.Value(event), MissingParents: []string{}}, Warnings: []wire.Warning{{}, {EventIDs: []string{"x"}}}},
	} {
		want, err := marshalAppendReflect(a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := wire.MarshalAppend(a)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	}
	if _, err := wire.MarshalAppend(wire.AppendAnswer{Record: wire.Record{Event: jsontext.Value(event), LineageStatus: "\xff"}}); err == nil {
		t.Fatal("invalid UTF-8 marshalled without error")
	}
}

// FuzzMarshalAppend: MarshalAppend writes what json.Marshal writes, and
// fails exactly when it does.
func FuzzMarshalAppend(f *testing.F) {
	f.Add("7", "2026-07-19T10:00:00.000Z", "sha256:aa", "valid", "session_fork", "d\"\\\n", "p")
	f.Add("", "", "", "", "", "\xff", "")
	f.Fuzz(func(t *testing.T, seq, at, parent, status, code, detail, path string) {
		a := wire.AppendAnswer{Record: wire.Record{Event: jsontext.Value(event), Receipt: wire.Receipt{ReceivedSeq: seq, ReceivedAt: at},
			MissingParents: []string{parent}, LineageStatus: status},
			Warnings: []wire.Warning{{Code: code, Detail: detail, EventIDs: []string{parent}}, {Code: code, Paths: []string{path}}}}
		want, werr := marshalAppendReflect(a)
		got, gerr := wire.MarshalAppend(a)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("errors differ: %v against %v", gerr, werr)
		}
		if werr == nil && string(got) != string(want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
}
