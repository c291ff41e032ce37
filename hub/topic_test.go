package hub_test

import (
	"errors"
	"testing"

	"github.com/acrelay/acrelay/hub"
)

func TestTopicCanonicalURL(t *testing.T) {
	const pub = "https://relay.example/base"
	const pid = "0b6e3f4a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
	for _, tc := range []struct {
		name, raw, want string
	}{
		{"canonical", pub + "/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=repo-a",
			pub + "/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=repo-a"},
		{"any order, thread", pub + "/v1/correspondence/events.json?thread_id=t1&repository_id=repo-a&project_id=" + pid,
			pub + "/v1/correspondence/events.json?project_id=" + pid + "&repository_id=repo-a&thread_id=t1"},
		{"percent-encoding normalized", "HTTPS://RELAY.example/base/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=%72epo-%41",
			pub + "/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=repo-A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top, err := hub.ParseTopic(pub, tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			if got := top.URL(pub); got != tc.want {
				t.Fatalf("URL = %s\nwant  %s", got, tc.want)
			}
			again, err := hub.ParseTopic(pub, top.URL(pub))
			if err != nil || again != top {
				t.Fatalf("round trip: %+v %v", again, err)
			}
		})
	}
	for _, raw := range []string{
		"https://other.example/base/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=r",
		"http://relay.example/base/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=r",
		pub + "/v1/correspondence/events?project_id=" + pid + "&repository_id=r",
		pub + "/v1/correspondence/events.atom?project_id=" + pid,
		pub + "/v1/correspondence/events.atom?project_id=not-a-uuid&repository_id=r",
		pub + "/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=r&repository_id=s",
		pub + "/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=r&limit=5",
		pub + "/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=r&thread_id=",
		pub + "/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=r#frag",
		"https://user@relay.example/base/v1/correspondence/events.atom?project_id=" + pid + "&repository_id=r",
		"%zz",
	} {
		if _, err := hub.ParseTopic(pub, raw); !errors.Is(err, hub.ErrTopic) {
			t.Errorf("ParseTopic(%q) = %v, want ErrTopic", raw, err)
		}
	}
}
