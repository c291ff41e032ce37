package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
)

func init() { rootCmd.AddCommand(newDemoCmd()) }

func newDemoCmd() *cobra.Command {
	var rf relayFlags
	var repo string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Play a two-agent coordination story on a running relay",
		Long: `demo creates two agent identities with fresh Ed25519 keys in the token's
project (the token needs the admin scope, like the project token the first
start prints), gives them a read+append token, and plays a coordination
story: intents, overlapping claims (visible in voice as overlap), progress,
an artifact offer of a git commit acknowledged up to ack.applied, a pause
and resume, a claim renewal fork resolved with conflict.resolve, a handoff,
releases and close. Last, it leaves a claim open and another overlapping it
(a live claim and an open conflict to look at, for 30 minutes). Every
record is then read back and verified. It prints where to look: the web
view of the repository, the events (JSON and Atom), voice and claims URLs.

The private keys live only in memory and are dropped at exit.`,
		Example: `  export ACRELAY_URL=http://127.0.0.1:8080 ACRELAY_TOKEN=<project token>  # a token in an env var, not in the process list
  acrelay demo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := rf.client(nil)
			if err != nil {
				return err
			}
			if repo == "" {
				repo = "repo:example.com/acrelay-demo-" + randomHex(4)
			}
			return runDemo(cmd.Context(), c, repo, cmd.OutOrStdout())
		},
	}
	rf.add(cmd, false)
	cmd.Flags().StringVar(&repo, "repository-id", "", "repository id for the story (default: a fresh repo:example.com/acrelay-demo-…)")
	return cmd
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// demoAgent is one identity of the story with its session.
type demoAgent struct {
	name string
	sess *client.Session
}

// demoStory holds the state shared by the story's steps.
type demoStory struct {
	ctx    context.Context
	c      *client.Client // the agents' read+append client
	out    io.Writer
	repo   string
	thread string
	count  int
}

func (d *demoStory) at(paths ...string) client.At {
	return client.At{RepositoryID: d.repo, ThreadID: d.thread, Parents: []string{},
		Scope: correspondence.Scope{Branch: ptrTo("main"), Paths: paths}}
}

func ptrTo(s string) *string { return &s }

// short abbreviates an event id for the narration.
func short(id string) string {
	if len(id) > 19 {
		return id[:19]
	}
	return id
}

// post signs draft as agent a at at, posts it and narrates one line.
func (d *demoStory) post(a *demoAgent, at client.At, draft client.Draft) (*correspondence.Event, error) {
	ev, err := a.sess.Sign(at, draft)
	if err != nil {
		return nil, err
	}
	res, err := d.c.Post(d.ctx, ev)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", a.name, draft.Kind, err)
	}
	d.count++
	extra := ""
	if res.Record.LineageStatus != correspondence.LineageNotApplicable && res.Record.LineageStatus != "" {
		extra = " lineage=" + string(res.Record.LineageStatus)
	}
	for _, w := range res.Warnings {
		extra += " warning=" + w.Code
	}
	fmt.Fprintf(d.out, "  %-6s %-17s %s…  received_seq=%d%s\n", a.name, ev.Kind, short(ev.ID), res.Record.Receipt.ReceivedSeq, extra)
	return ev, nil
}

func runDemo(ctx context.Context, admin *client.Client, repo string, out io.Writer) error {
	who, err := admin.Whoami(ctx)
	if err != nil {
		return fmt.Errorf("whoami: %w", err)
	}
	if who.ProjectID == "" {
		return errors.New("demo needs a project token with the admin scope, not the operator token")
	}
	project := who.ProjectID
	fmt.Fprintf(out, "acrelay demo on project %s, repository %s\n\n", project, repo)

	// Two identities, each with a fresh key registered by the admin token.
	keys := client.Keyring{}
	newAgent := func(name string) (*demoAgent, correspondence.Sender, []byte, error) {
		ident, err := admin.CreateIdentity(ctx, project, "", "demo agent "+name)
		if err != nil {
			return nil, correspondence.Sender{}, nil, fmt.Errorf("create identity: %w", err)
		}
		priv, err := client.GenerateKey()
		if err != nil {
			return nil, correspondence.Sender{}, nil, err
		}
		s, _ := client.NewSigner(priv, project, correspondence.Sender{})
		key, err := admin.AddKey(ctx, ident.IdentityID, "", s.PublicKeyB64URL())
		if err != nil {
			return nil, correspondence.Sender{}, nil, fmt.Errorf("add key: %w", err)
		}
		s.Sender = correspondence.Sender{IdentityID: ident.IdentityID, SigningKeyID: key.SigningKeyID,
			DeviceID: uuid.NewString(), SessionID: uuid.NewString()}
		keys[key.SigningKeyID] = client.Key{IdentityID: ident.IdentityID, PublicKey: s.PublicKey()}
		fmt.Fprintf(out, "identity %-5s %s  signing key %s\n", name, ident.IdentityID, key.SigningKeyID)
		return &demoAgent{name: name, sess: client.NewSession(s, client.NewMemorySequencer(0))}, s.Sender, priv, nil
	}
	ada, adaSender, adaKey, err := newAgent("ada")
	if err != nil {
		return err
	}
	brook, _, _, err := newAgent("brook")
	if err != nil {
		return err
	}
	// Ada's second device: same identity and key, its own device and session.
	ada2Signer, _ := client.NewSigner(adaKey, project, correspondence.Sender{IdentityID: adaSender.IdentityID,
		SigningKeyID: adaSender.SigningKeyID, DeviceID: uuid.NewString(), SessionID: uuid.NewString()})
	ada2 := &demoAgent{name: "ada#2", sess: client.NewSession(ada2Signer, client.NewMemorySequencer(0))}

	tok, err := admin.CreateToken(ctx, project, []string{"read", "append"})
	if err != nil {
		return fmt.Errorf("create agent token: %w", err)
	}
	agents := *admin
	agents.Token = tok.Token
	agents.Keys = keys
	d := &demoStory{ctx: ctx, c: &agents, out: out, repo: repo, thread: "task:parser-errors"}
	fmt.Fprintf(out, "agent token id %s (scopes read, append; the token itself stays in memory)\n\n", tok.TokenID)

	now := time.Now()
	step := func(title string) { fmt.Fprintf(out, "%s\n", title) }

	step("1. Intents and overlapping claims")
	intentA, err := d.post(ada, d.at("src/parser"), client.Intent("Rework parser error messages so they name the offending token."))
	if err != nil {
		return err
	}
	openA, err := d.post(ada, d.at("src/parser"), client.ClaimOpen(uuid.NewString(), now.Add(30*time.Minute)))
	if err != nil {
		return err
	}
	if _, err := d.post(brook, d.at("src/parser/input"), client.Intent("Add fuzzing for the parser's input path.")); err != nil {
		return err
	}
	openB, err := d.post(brook, d.at("src/parser/input"), client.ClaimOpen(uuid.NewString(), now.Add(30*time.Minute)))
	if err != nil {
		return err
	}
	if v, err := d.c.Voice(ctx, repo, ""); err != nil {
		fmt.Fprintf(out, "  voice: not readable (%v)\n", err)
	} else {
		claimOf := map[string]string{}
		for ev, name := range map[*correspondence.Event]string{openA: "ada", openB: "brook"} {
			c, _ := ev.Claim()
			claimOf[ev.ID] = name + "'s claim " + c.ClaimID
		}
		for _, o := range v.Conflicts.OverlappingClaims {
			fmt.Fprintf(out, "  voice: overlapping claims on %v: %s and %s\n", o.Paths, claimOf[o.LeftEventID], claimOf[o.RightEventID])
		}
		if len(v.Conflicts.OverlappingClaims) == 0 {
			fmt.Fprintf(out, "  voice: no overlap reported (projection_status=%s)\n", v.ProjectionStatus)
		}
	}
	if _, err := d.post(brook, d.at("src/parser/input"), client.Observation("Our claims overlap on src/parser/input; I will write fuzz targets only until Ada's change lands.")); err != nil {
		return err
	}

	step("2. Progress, an artifact, acknowledgements up to ack.applied")
	if _, err := d.post(ada, d.at("src/parser"), client.Progress("Error messages reworded; the parser tests pass.")); err != nil {
		return err
	}
	commit := randomHex(20)
	at := d.at("src/parser")
	at.Parents = []string{intentA.ID}
	offer, err := d.post(ada, at, client.ArtifactOffer(client.GitCommit(commit), "Commit with the reworded parser errors, ready for review."))
	if err != nil {
		return err
	}
	for _, dr := range []client.Draft{
		client.AckSeen(offer.ID, ""),
		client.AckUnderstood(offer.ID, "The messages now quote the token kind, not its bytes."),
		client.AckAccepted(offer.ID, ""),
		client.AckApplied(offer.ID, randomHex(20), "Rebased onto the fuzzing branch."),
	} {
		if _, err := d.post(brook, d.at("src/parser/input"), dr); err != nil {
			return err
		}
	}

	step("3. A pause and a resume")
	pause, err := d.post(brook, d.at("src/parser/input"), client.Pause(now.Add(10*time.Minute), "Waiting for CI."))
	if err != nil {
		return err
	}
	if _, err := d.post(brook, d.at("src/parser/input"), client.Resume(pause.ID, "CI is green.")); err != nil {
		return err
	}

	step("4. A claim renewal fork, resolved")
	renew1, err := d.post(ada, d.at("src/parser"), client.ClaimRenew(openA, now.Add(60*time.Minute)))
	if err != nil {
		return err
	}
	renew2, err := d.post(ada2, d.at("src/parser"), client.ClaimRenew(openA, now.Add(90*time.Minute)))
	if err != nil {
		return err
	}
	if cl, err := d.c.Claims(ctx, client.ClaimsQuery{RepositoryID: repo, Path: "src/parser"}); err != nil {
		fmt.Fprintf(out, "  claims: not readable (%v)\n", err)
	} else {
		seen := map[string]bool{}
		for _, row := range cl.Claims {
			if row.Conflicted && !seen[row.ClaimID] {
				seen[row.ClaimID] = true
				fmt.Fprintf(out, "  claims: ada's claim %s generation %d is conflicted: %d tips, one per device\n", row.ClaimID, row.Generation, len(row.CompetingEventIDs)+1)
			}
		}
	}
	if _, err := d.post(ada, d.at("src/parser"), client.ConflictResolve([]string{renew1.ID, renew2.ID},
		"Keep the renewal from the second device; the first device releases its branch.", "")); err != nil {
		return err
	}
	if _, err := d.post(ada, d.at("src/parser"), client.ClaimRelease(renew1, "Superseded by the other device's renewal.")); err != nil {
		return err
	}

	step("5. Handoff, releases and close")
	if _, err := d.post(ada2, d.at("src/parser"), client.Handoff("Parser errors reworded and applied by Brook; fuzzing continues on the input path.",
		"Run the parser fuzz targets for ten minutes before touching src/parser again.", "")); err != nil {
		return err
	}
	if _, err := d.post(ada2, d.at("src/parser"), client.ClaimRelease(renew2, "")); err != nil {
		return err
	}
	if _, err := d.post(brook, d.at("src/parser/input"), client.ClaimRelease(openB, "Fuzz targets merged.")); err != nil {
		return err
	}
	if _, err := d.post(ada, d.at("src/parser"), client.Close("Done here.")); err != nil {
		return err
	}
	if _, err := d.post(brook, d.at("src/parser/input"), client.Close("")); err != nil {
		return err
	}

	// Left open on purpose, so the web view, voice and claims have
	// something to show: a live claim, and another that overlaps it.
	step("6. Left open for you to look at: a live claim and an overlapping one")
	d.thread = "task:lexer"
	if _, err := d.post(brook, d.at("src/lexer"), client.Intent("Split the lexer's token table out of the parser.")); err != nil {
		return err
	}
	liveB, err := d.post(brook, d.at("src/lexer"), client.ClaimOpen(uuid.NewString(), now.Add(30*time.Minute)))
	if err != nil {
		return err
	}
	liveA, err := d.post(ada, d.at("src/lexer/tokens"), client.ClaimOpen(uuid.NewString(), now.Add(30*time.Minute)))
	if err != nil {
		return err
	}
	claimB, _ := liveB.Claim()
	claimA, _ := liveA.Claim()
	fmt.Fprintf(out, "  open: brook's claim %s on src/lexer and ada's claim %s on src/lexer/tokens overlap until %s\n",
		claimB.ClaimID, claimA.ClaimID, now.Add(30*time.Minute).UTC().Format("15:04:05Z"))

	// Read everything back, verifying each record against the two keys.
	n := 0
	for _, err := range d.c.Events(ctx, client.EventsQuery{RepositoryID: repo}) {
		if err != nil {
			return fmt.Errorf("read back: %w", err)
		}
		n++
	}
	fmt.Fprintf(out, "\nread back %d of %d records; every signature and event id verified\n\n", n, d.count)

	q := url.Values{"repository_id": {repo}}.Encode()
	base := admin.BaseURL.String()
	atom := base + "/v1/correspondence/events.atom?" + q
	if links, err := d.c.Discover(ctx, repo, ""); err == nil {
		if u, err := links.Get(client.RelAlternate, client.MediaTypeAtom); err == nil {
			atom = u
		}
	}
	fmt.Fprintf(out, "In a browser (sign in with a read token of the project; the project token works):\n")
	fmt.Fprintf(out, "  web view:      %s/ui/projects/%s?%s\n\n", base, url.PathEscape(project), q)
	fmt.Fprintf(out, "Where to look (send your token as Authorization: Bearer …):\n")
	fmt.Fprintf(out, "  events (JSON): %s/v1/correspondence/events?%s\n", base, q)
	fmt.Fprintf(out, "  events (Atom): %s\n", atom)
	fmt.Fprintf(out, "  voice:         %s/v1/correspondence/voice?%s\n", base, q)
	fmt.Fprintf(out, "  claims:        %s/v1/correspondence/claims?%s\n", base, q)
	fmt.Fprintf(out, "  e.g. curl -H \"Authorization: Bearer $ACRELAY_TOKEN\" '%s/v1/correspondence/voice?%s'\n", base, q)
	return nil
}
