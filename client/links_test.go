package client

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
)

func TestParseLinks(t *testing.T) {
	base, _ := url.Parse("https://relay.example/v1/correspondence/events?repository_id=r")
	h := http.Header{}
	h.Add("Link", `</v1/correspondence/events?repository_id=r>; rel="self"; type="application/vnd.agenttool.correspondence+json", <events.atom?repository_id=r>; rel=alternate; type="application/atom+xml"; title="a, b; c"`)
	h.Add("Link", `<https://other.example/voice?repository_id=r&thread_id=t>; rel="https://agenttool.dev/rels/correspondence-voice"; rel="ignored"`)
	h.Add("Link", `</v1/correspondence/claims?repository_id=r>;rel="https://agenttool.dev/rels/active-claims other"`)
	h.Set("Link-Template", `"/v1/wake/voice?identity_id={identity_id}&keys=correspondence"; rel="https://agenttool.dev/rels/correspondence-live"; type="text/event-stream"`)
	l, err := ParseLinks(h, base)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		rel, typ, want string
	}{
		{RelSelf, "", "https://relay.example/v1/correspondence/events?repository_id=r"},
		{RelAlternate, MediaTypeAtom, "https://relay.example/v1/correspondence/events.atom?repository_id=r"},
		{RelVoice, "", "https://other.example/voice?repository_id=r&thread_id=t"},
		{RelActiveClaims, "", "https://relay.example/v1/correspondence/claims?repository_id=r"},
		{"other", "", "https://relay.example/v1/correspondence/claims?repository_id=r"},
	}
	for _, tc := range tests {
		got, err := l.Get(tc.rel, tc.typ)
		if err != nil || got != tc.want {
			t.Errorf("Get(%q, %q) = %q, %v; want %q", tc.rel, tc.typ, got, err, tc.want)
		}
	}
	if l.Links[1].Params["title"] != "a, b; c" {
		t.Errorf("quoted title %q", l.Links[1].Params["title"])
	}
	if _, err := l.Get("ignored", ""); !errors.Is(err, ErrNoLink) {
		t.Errorf("second rel parameter counted: %v", err)
	}
	live, err := l.Expand(RelLive, map[string]string{"identity_id": "2222 2222/x"})
	if err != nil || live != "https://relay.example/v1/wake/voice?identity_id=2222%202222%2Fx&keys=correspondence" {
		t.Fatalf("live %q %v", live, err)
	}
	if l.Templates[0].Params["type"] != MediaTypeSSE {
		t.Errorf("template params %v", l.Templates[0].Params)
	}
	if _, err := l.Expand(RelVoice, nil); !errors.Is(err, ErrNoLink) {
		t.Errorf("expand of a plain link: %v", err)
	}
}

func TestParseLinksMalformed(t *testing.T) {
	for _, v := range []string{`no-angle; rel=self`, `<a>; rel="open`, `<a`, `<a> rel=self`} {
		h := http.Header{"Link": {v}}
		if _, err := ParseLinks(h, nil); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
	h := http.Header{"Link-Template": {`not-a-string; rel="x"`}}
	if _, err := ParseLinks(h, nil); err == nil {
		t.Error("token Link-Template accepted")
	}
}
