package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/internal/attributed"
)

// Resources of acrelay mcp, as URI templates (RFC 6570; ids are
// percent-encoded, so repo:example/app is repo%3Aexample%2Fapp):
//
//	acrelay://repositories/{repository_id}/voice
//	acrelay://repositories/{repository_id}/claims
//	acrelay://repositories/{repository_id}/threads/{thread_id}
//
// Each reads as text/plain for a model, other identities' words framed
// by internal/attributed. A subscription starts one wake follower per
// repository (client.Follow on the agent's own identity: the wake SSE
// stream, replaying /events after each change); every new record sends
// notifications/resources/updated for the repository's voice and claims
// and for its thread.

const resourcePrefix = "acrelay://repositories/"

// resourceRef is a parsed resource URI.
type resourceRef struct {
	repo, kind, thread string // kind: voice, claims or thread
}

func parseResourceURI(uri string) (resourceRef, error) {
	rest, ok := strings.CutPrefix(uri, resourcePrefix)
	if !ok {
		return resourceRef{}, fmt.Errorf("not an acrelay resource")
	}
	segs := strings.Split(rest, "/")
	unesc := func(s string) (string, error) {
		v, err := url.PathUnescape(s)
		if err != nil || v == "" {
			return "", fmt.Errorf("bad id")
		}
		return v, nil
	}
	repo, err := unesc(segs[0])
	if err != nil {
		return resourceRef{}, err
	}
	switch {
	case len(segs) == 2 && (segs[1] == "voice" || segs[1] == "claims"):
		return resourceRef{repo: repo, kind: segs[1]}, nil
	case len(segs) == 3 && segs[1] == "threads":
		th, err := unesc(segs[2])
		if err != nil {
			return resourceRef{}, err
		}
		return resourceRef{repo: repo, kind: "thread", thread: th}, nil
	}
	return resourceRef{}, fmt.Errorf("unknown acrelay resource")
}

// check refuses a malformed repository or thread id before any request
// (codes repository_id_invalid, thread_id_invalid).
func (r resourceRef) check() error {
	if err := needRepo(r.repo); err != nil {
		return err
	}
	return checkThread(r.thread)
}

func (s *mcpServer) addResources() {
	for _, t := range []*mcp.ResourceTemplate{
		{Name: "voice", URITemplate: resourcePrefix + "{repository_id}/voice", MIMEType: "text/plain",
			Description: "Coordination snapshot of a repository (claims, conflicts, newest events), as the voice tool shows it."},
		{Name: "claims", URITemplate: resourcePrefix + "{repository_id}/claims", MIMEType: "text/plain",
			Description: "Active claims of a repository: holder, paths, thread, expiry."},
		{Name: "thread", URITemplate: resourcePrefix + "{repository_id}/threads/{thread_id}", MIMEType: "text/plain",
			Description: "The events of one thread, oldest first (up to 200)."},
	} {
		s.srv.AddResourceTemplate(t, s.readResource)
	}
}

func (s *mcpServer) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	ref, err := parseResourceURI(uri)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err := ref.check(); err != nil {
		return nil, resourceError(err)
	}
	var text string
	switch ref.kind {
	case "voice":
		v, err := s.c.Voice(ctx, ref.repo, "")
		if err != nil {
			return nil, resourceError(err)
		}
		text, _ = s.renderVoice(ctx, ref.repo, v)
	case "claims":
		cl, err := s.c.Claims(ctx, client.ClaimsQuery{RepositoryID: ref.repo})
		if err != nil {
			return nil, resourceError(err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Active claims of %s (%d; projection %s; advisory, they lock nothing):\n", strconv.QuoteToGraphic(ref.repo), len(cl.Claims), cl.ProjectionStatus)
		for _, ac := range cl.Claims {
			for _, l := range s.viewClaim(ctx, ac, "", nil).textLines() {
				b.WriteString(l + "\n")
			}
		}
		b.WriteString(attributed.Notice)
		text = b.String()
	case "thread":
		res, err := s.readPage(ctx, client.EventsQuery{RepositoryID: ref.repo, ThreadID: ref.thread, Limit: 200})
		if err != nil {
			return nil, resourceError(err)
		}
		text = res.Content[0].(*mcp.TextContent).Text
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text}}}, nil
}

// resourceError is a read's refusal as an error whose text is the
// relay's code and message.
func resourceError(err error) error {
	te := asToolError(err)
	return errors.New(te.Code + ": " + te.Message)
}

// follower is the wake follower of one repository and the resource URIs
// subscribed under it (URI → subscription count).
type follower struct {
	cancel context.CancelFunc
	uris   map[string]int
	done   chan struct{}
}

func (s *mcpServer) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	ref, err := parseResourceURI(uri)
	if err != nil {
		return mcp.ResourceNotFoundError(uri)
	}
	if err := ref.check(); err != nil {
		return resourceError(err)
	}
	s.subMu.Lock()
	defer s.subMu.Unlock()
	f := s.followers[ref.repo]
	if f == nil {
		cl, err := s.c.Claims(ctx, client.ClaimsQuery{RepositoryID: ref.repo})
		if err != nil {
			return resourceError(err)
		}
		var after int64
		if cl.Cursor != nil {
			after, _ = strconv.ParseInt(*cl.Cursor, 10, 64)
		}
		fctx, cancel := context.WithCancel(context.Background())
		f = &follower{cancel: cancel, uris: map[string]int{}, done: make(chan struct{})}
		s.followers[ref.repo] = f
		go s.follow(fctx, ref.repo, after, f)
	}
	f.uris[uri]++
	s.log.Debug("resource subscribed", "repository_id", ref.repo)
	return nil
}

func (s *mcpServer) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	ref, err := parseResourceURI(req.Params.URI)
	if err != nil {
		return nil
	}
	s.subMu.Lock()
	defer s.subMu.Unlock()
	f := s.followers[ref.repo]
	if f == nil {
		return nil
	}
	if f.uris[req.Params.URI]--; f.uris[req.Params.URI] <= 0 {
		delete(f.uris, req.Params.URI)
	}
	if len(f.uris) == 0 {
		f.cancel()
		delete(s.followers, ref.repo)
	}
	return nil
}

// follow reads the repository's records live from after on and sends
// notifications/resources/updated for each subscribed URI the record
// concerns, until ctx ends or the relay refuses for good.
func (s *mcpServer) follow(ctx context.Context, repo string, after int64, f *follower) {
	defer close(f.done)
	for rec, err := range s.c.Follow(ctx, client.FollowQuery{RepositoryID: repo, IdentityID: s.self(), After: after}) {
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("wake follower stopped", "repository_id", repo, "err_code", asToolError(err).Code)
			}
			return
		}
		s.subMu.Lock()
		var uris []string
		for uri := range f.uris {
			ref, err := parseResourceURI(uri)
			if err == nil && (ref.kind != "thread" || ref.thread == rec.Event.ThreadID) {
				uris = append(uris, uri)
			}
		}
		s.subMu.Unlock()
		for _, uri := range uris {
			if err := s.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
				s.log.Debug("resource updated notification", "err", err)
			}
		}
	}
}

// stopFollowers ends every wake follower and waits for them.
func (s *mcpServer) stopFollowers() {
	s.subMu.Lock()
	fs := make([]*follower, 0, len(s.followers))
	for repo, f := range s.followers {
		f.cancel()
		fs = append(fs, f)
		delete(s.followers, repo)
	}
	s.subMu.Unlock()
	for _, f := range fs {
		<-f.done
	}
}
