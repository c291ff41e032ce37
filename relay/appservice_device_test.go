package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/relay"
)

// eventsSink records what Accept took, in order with the device traffic.
type eventsSink struct{ calls []string }

func (s *eventsSink) Accept(_ context.Context, evs []json.RawMessage) error {
	s.calls = append(s.calls, "events:"+string(evs[0]))
	return nil
}

// deviceSink is an eventsSink that also takes device traffic
// (relay.DeviceTrafficSink), failing with err.
type deviceSink struct {
	eventsSink
	err error
}

func (s *deviceSink) AcceptDeviceTraffic(_ context.Context, body []byte) error {
	s.calls = append(s.calls, "device:"+string(body))
	return s.err
}

// TestAppserviceDeviceTraffic: a sink that takes device traffic gets the
// whole transaction body before its events are accepted; its error
// answers 503 and the events are not taken (the homeserver sends the
// transaction again); a sink without it takes the events as before.
func TestAppserviceDeviceTraffic(t *testing.T) {
	const body = `{"events":[{"event_id":"$e"}],"de.sorunome.msc2409.to_device":[{"type":"m.dummy"}]}`
	put := func(h http.Handler) (int, string) {
		srv := httptest.NewServer(h)
		defer srv.Close()
		req, _ := http.NewRequest("PUT", srv.URL+"/_matrix/app/v1/transactions/1", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer hs-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ok := &deviceSink{}
	if status, b := put(relay.AppserviceHandler("hs-token", ok, nil)); status != 200 || b != `{}` {
		t.Fatalf("device sink: %d %s", status, b)
	}
	if want := []string{"device:" + body, `events:{"event_id":"$e"}`}; strings.Join(ok.calls, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls %q, want %q", ok.calls, want)
	}
	failing := &deviceSink{err: errors.New("no device here")}
	if status, b := put(relay.AppserviceHandler("hs-token", failing, nil)); status != 503 || b != `{"errcode":"M_UNKNOWN","error":"not stored; retry"}` {
		t.Fatalf("failing device sink: %d %s", status, b)
	}
	if len(failing.calls) != 1 {
		t.Fatalf("calls %q: the events were taken although the device traffic was not", failing.calls)
	}
	plain := &eventsSink{}
	if status, _ := put(relay.AppserviceHandler("hs-token", plain, nil)); status != 200 || len(plain.calls) != 1 {
		t.Fatalf("events-only sink: %d, calls %q", status, plain.calls)
	}
}
