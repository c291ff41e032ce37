package hub

import (
	"errors"
	"net/url"
	"strings"

	"github.com/acrelay/acrelay/correspondence"
)

// Topic formats: the two topic routes of spec/websub.md "Topics".
const (
	FormatAtom = "atom" // /v1/correspondence/events.atom
	FormatJSON = "json" // /v1/correspondence/events.json
)

// Topic paths below the public URL.
const (
	TopicPathAtom = "/v1/correspondence/events.atom"
	TopicPathJSON = "/v1/correspondence/events.json"
	// HubPath is the embedded hub's endpoint (W3C WebSub #discovery).
	HubPath = "/websub/hub"
)

// Topic is one WebSub topic of the relay: a selection of one project's
// records in one representation.
type Topic struct {
	ProjectID    string
	RepositoryID string
	ThreadID     string // "" for every thread
	Format       string // FormatAtom or FormatJSON
}

// ErrTopic: a hub.topic that is not one of this relay's topic URLs.
var ErrTopic = errors.New("not a topic of this relay")

// URL returns the canonical topic URL under publicURL (no trailing slash):
// {public}/v1/correspondence/events.{atom|json}?project_id=P&repository_id=R[&thread_id=T],
// parameters in that order, each percent-encoded the one way url.QueryEscape
// does (spec/websub.md "Topics").
func (t Topic) URL(publicURL string) string {
	path := TopicPathAtom
	if t.Format == FormatJSON {
		path = TopicPathJSON
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(publicURL, "/"))
	b.WriteString(path)
	b.WriteString("?project_id=")
	b.WriteString(url.QueryEscape(t.ProjectID))
	if t.RepositoryID != "" { // "" is the project-wide JSON topic (federation)
		b.WriteString("&repository_id=")
		b.WriteString(url.QueryEscape(t.RepositoryID))
	}
	if t.ThreadID != "" {
		b.WriteString("&thread_id=")
		b.WriteString(url.QueryEscape(t.ThreadID))
	}
	return b.String()
}

// ParseTopic reads a topic URL of this relay (publicURL, no trailing
// slash): the same scheme, host and path prefix, one of the two topic
// paths, and exactly the parameters project_id (a UUID), repository_id
// and optionally thread_id (opaque ids, spec §3), each once, in any order
// and any percent-encoding: "%41" and "A" name one topic. The JSON path
// with project_id alone is the project-wide topic (RepositoryID ""), which
// federation peer links subscribe to. Errors: ErrTopic.
func ParseTopic(publicURL, raw string) (Topic, error) {
	base, err := url.Parse(strings.TrimRight(publicURL, "/"))
	if err != nil {
		return Topic{}, ErrTopic
	}
	u, err := url.Parse(raw)
	if err != nil || u.Fragment != "" || u.User != nil || u.Opaque != "" {
		return Topic{}, ErrTopic
	}
	if !strings.EqualFold(u.Scheme, base.Scheme) || !strings.EqualFold(u.Host, base.Host) {
		return Topic{}, ErrTopic
	}
	var t Topic
	hasRepo := false
	switch u.Path {
	case base.Path + TopicPathAtom:
		t.Format = FormatAtom
	case base.Path + TopicPathJSON:
		t.Format = FormatJSON
	default:
		return Topic{}, ErrTopic
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Topic{}, ErrTopic
	}
	for k, v := range q {
		if len(v) != 1 {
			return Topic{}, ErrTopic
		}
		switch k {
		case "project_id":
			t.ProjectID = v[0]
		case "repository_id":
			t.RepositoryID, hasRepo = v[0], true
		case "thread_id":
			t.ThreadID = v[0]
			if t.ThreadID == "" {
				return Topic{}, ErrTopic
			}
		default:
			return Topic{}, ErrTopic
		}
	}
	if !hasRepo && t.Format == FormatJSON && t.ThreadID == "" && correspondence.ValidUUID(t.ProjectID) {
		return t, nil // the project-wide JSON topic: every repository (federation)
	}
	if !correspondence.ValidUUID(t.ProjectID) || !correspondence.ValidOpaqueID(t.RepositoryID) ||
		(t.ThreadID != "" && !correspondence.ValidOpaqueID(t.ThreadID)) {
		return Topic{}, ErrTopic
	}
	return t, nil
}
