package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
)

func init() { rootCmd.AddCommand(newSignCmd()) }

// maxEventInput bounds what sign and post read: the relay refuses POST
// bodies over 65,536 bytes (spec §3); a little slack for whitespace.
const maxEventInput = 1 << 20

type signOpts struct {
	signer    signerFlags
	in        string
	seq       int64
	seqFile   string
	kind      string
	repo      string
	thread    string
	paths     []string
	branch    string
	baseRev   string
	parents   []string
	summary   string
	detail    string
	targets   []string
	claimID   string
	expiresIn time.Duration
	expiresAt string
	pred      string
	revision  string
	patch     string
	content   string
	locator   string
	nextSafe  string
	handoffID string
	until     string
}

func newSignCmd() *cobra.Command {
	var o signOpts
	cmd := &cobra.Command{
		Use:   "sign",
		Short: "Sign an event: a core event from a file or stdin, or one built from flags",
		Long: `sign prints one signed event (RFC 8785 JSON, one line) ready for acrelay post.

Without --kind it reads a core event (the event without event_id and signature)
from --in (default stdin). Members the core leaves out are filled: protocol,
authority, issued_at (now), and project_id, sender and session_seq from the
flags; flags that are set replace the core's values.

With --kind it builds the event from flags (spec §5 bodies): --summary, --detail,
--target (repeatable), --claim-id/--expires-in for claim.open, --predecessor FILE
(a signed claim event) for claim.renew and claim.release, --revision for git
commits and result revisions, --until for pause and rest, and so on. Event ids
the body references are added to parents.

The event is validated locally (spec §2–§5) before it is signed; problems are
listed with their JSON pointers.`,
		Example: `  acrelay sign --key agent.pem --kind intent --repository-id repo:example/app \
    --thread-id task:parser --path src/parser --summary "Refactor parser errors" \
    --session-seq 1 | acrelay post
  acrelay sign --key agent.pem --kind claim.renew --predecessor open.json \
    --repository-id repo:example/app --thread-id task:parser --seq-file .acrelay-seq
  acrelay sign --key agent.pem < core.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ev, err := o.run(cmd.InOrStdin())
			if err != nil {
				return err
			}
			raw, err := ev.CanonicalJSON()
			if err != nil {
				return err
			}
			return writeRawLine(cmd.OutOrStdout(), raw)
		},
	}
	o.signer.add(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.in, "in", "-", `core event file ("-" for stdin); used when --kind is not set`)
	fs.Int64Var(&o.seq, "session-seq", 0, "session_seq of this event (1 … 2^53-1)")
	fs.StringVar(&o.seqFile, "seq-file", "", "file keeping the session's last session_seq; the next value is used, and stored once the event is signed")
	fs.StringVar(&o.kind, "kind", "", "build an event of this kind from flags (intent, claim.open, …, repair)")
	fs.StringVar(&o.repo, "repository-id", "", "repository id (opaque, 1–256 characters)")
	fs.StringVar(&o.thread, "thread-id", "", "thread id (opaque, 1–256 characters)")
	fs.StringArrayVar(&o.paths, "path", nil, `scope path prefix, repeatable ("." is the whole repository; default ".")`)
	fs.StringVar(&o.branch, "branch", "", "scope branch (default null)")
	fs.StringVar(&o.baseRev, "base-revision", "", "scope base revision, 40 or 64 lowercase hex (default null)")
	fs.StringArrayVar(&o.parents, "parent", nil, "parent event id, repeatable")
	fs.StringVar(&o.summary, "summary", "", "body summary")
	fs.StringVar(&o.detail, "detail", "", "body detail")
	fs.StringArrayVar(&o.targets, "target", nil, "target event id, repeatable (ack.*, resume, refusal, conflict.*, repair)")
	fs.StringVar(&o.claimID, "claim-id", "", "claim UUID for claim.open (default: a fresh one)")
	fs.DurationVar(&o.expiresIn, "expires-in", time.Hour, "claim expiry from now (claim.open, claim.renew)")
	fs.StringVar(&o.expiresAt, "expires-at", "", "claim expiry as an RFC 3339 time (overrides --expires-in)")
	fs.StringVar(&o.pred, "predecessor", "", "file holding the signed claim event to renew or release")
	fs.StringVar(&o.revision, "revision", "", "git revision: artifact.offer git_commit, or result_revision of ack.applied, conflict.resolve, repair")
	fs.StringVar(&o.patch, "patch-digest", "", "artifact.offer git_patch digest (sha256:<hex>)")
	fs.StringVar(&o.content, "content-digest", "", "artifact.offer content_digest digest (sha256:<hex>)")
	fs.StringVar(&o.locator, "locator", "", "artifact locator (scheme:…)")
	fs.StringVar(&o.nextSafe, "next-safe-action", "", "handoff next_safe_action")
	fs.StringVar(&o.handoffID, "handoff-id", "", "handoff contract UUID")
	fs.StringVar(&o.until, "until", "", "pause/rest until, an RFC 3339 time")
	return cmd
}

// reserveSeq returns the session_seq of the event being signed and a
// commit that spends it. With --seq-file the file is written only by
// commit, which the caller runs once the event is validated and signed:
// an event refused here costs no session_seq (the next one would
// otherwise leave a gap the relay reports). With --session-seq the number
// is the caller's own and commit does nothing.
func (o *signOpts) reserveSeq() (int64, func() error, error) {
	switch {
	case o.seqFile != "":
		f := &client.FileSequencer{Path: o.seqFile}
		n, err := f.Reserve()
		if err != nil {
			return 0, nil, err
		}
		return n, func() error { return f.Commit(n) }, nil
	case o.seq > 0:
		return o.seq, func() error { return nil }, nil
	}
	return 0, nil, errors.New("set --session-seq N or --seq-file FILE")
}

func (o *signOpts) run(stdin io.Reader) (*correspondence.Event, error) {
	if o.kind == "" {
		return o.signCore(stdin)
	}
	signer, err := o.signer.signer(false)
	if err != nil {
		return nil, err
	}
	d, err := o.draft()
	if err != nil {
		return nil, err
	}
	n, commit, err := o.reserveSeq()
	if err != nil {
		return nil, err
	}
	at := client.At{RepositoryID: o.repo, ThreadID: o.thread, Parents: o.parents,
		Scope: correspondence.Scope{Paths: o.paths}}
	if len(at.Scope.Paths) == 0 {
		at.Scope.Paths = []string{"."}
	}
	if o.branch != "" {
		at.Scope.Branch = &o.branch
	}
	if o.baseRev != "" {
		at.Scope.BaseRevision = &o.baseRev
	}
	if at.Parents == nil {
		at.Parents = []string{}
	}
	ev, err := client.NewSession(signer, client.NewMemorySequencer(n-1)).Sign(at, d)
	if err != nil {
		return nil, err
	}
	if err := checkEvent(ev); err != nil {
		return nil, err
	}
	return ev, commit()
}

// checkEvent validates a signed event with the core, listing every issue.
func checkEvent(ev *correspondence.Event) error {
	raw, err := ev.CanonicalJSON()
	if err != nil {
		return err
	}
	if _, err := correspondence.ParseEvent(raw); err != nil {
		return describeInvalid(err)
	}
	return nil
}

func describeInvalid(err error) error {
	var ve *correspondence.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	msg := "event is invalid (" + ve.Code + "):"
	for _, is := range ve.Issues {
		msg += fmt.Sprintf("\n  %s %s: %s", is.Pointer, is.Code, is.Message)
	}
	return errors.New(msg)
}

func parseTime(flag, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: want an RFC 3339 time such as 2026-07-19T12:00:00Z", flag)
	}
	return t, nil
}

func (o *signOpts) expiry() (time.Time, error) {
	if o.expiresAt != "" {
		return parseTime("--expires-at", o.expiresAt)
	}
	return time.Now().Add(o.expiresIn), nil
}

func (o *signOpts) predecessor() (*correspondence.Event, error) {
	if o.pred == "" {
		return nil, errors.New("--predecessor FILE (the signed claim event) is required")
	}
	data, err := os.ReadFile(o.pred)
	if err != nil {
		return nil, fmt.Errorf("predecessor: %w", err)
	}
	return client.DecodeEvent(data)
}

func (o *signOpts) target() (string, error) {
	if len(o.targets) != 1 {
		return "", fmt.Errorf("%s needs exactly one --target", o.kind)
	}
	return o.targets[0], nil
}

// draft maps the flags onto the builder of o.kind.
func (o *signOpts) draft() (client.Draft, error) {
	k := correspondence.Kind(o.kind)
	switch k {
	case correspondence.KindIntent:
		return client.Intent(o.summary), nil
	case correspondence.KindProgress:
		return client.Progress(o.summary), nil
	case correspondence.KindObservation:
		return client.Observation(o.summary), nil
	case correspondence.KindClaimOpen:
		exp, err := o.expiry()
		if err != nil {
			return client.Draft{}, err
		}
		id := o.claimID
		if id == "" {
			id = uuid.NewString()
		}
		return client.ClaimOpen(id, exp), nil
	case correspondence.KindClaimRenew, correspondence.KindClaimRelease:
		pred, err := o.predecessor()
		if err != nil {
			return client.Draft{}, err
		}
		if k == correspondence.KindClaimRelease {
			return client.ClaimRelease(pred, o.detail), nil
		}
		exp, err := o.expiry()
		if err != nil {
			return client.Draft{}, err
		}
		return client.ClaimRenew(pred, exp), nil
	case correspondence.KindArtifactOffer:
		var a client.Artifact
		switch {
		case o.revision != "":
			a = client.GitCommit(o.revision)
		case o.patch != "":
			a = client.GitPatch(o.patch, o.locator)
		case o.content != "":
			a = client.ContentDigest(o.content, o.locator)
		default:
			return client.Draft{}, errors.New("artifact.offer needs --revision, --patch-digest or --content-digest")
		}
		return client.ArtifactOffer(a, o.summary), nil
	case correspondence.KindAckSeen, correspondence.KindAckUnderstood, correspondence.KindAckAccepted,
		correspondence.KindAckApplied, correspondence.KindAckRejected, correspondence.KindResume:
		t, err := o.target()
		if err != nil {
			return client.Draft{}, err
		}
		switch k {
		case correspondence.KindAckSeen:
			return client.AckSeen(t, o.detail), nil
		case correspondence.KindAckUnderstood:
			return client.AckUnderstood(t, o.detail), nil
		case correspondence.KindAckAccepted:
			return client.AckAccepted(t, o.detail), nil
		case correspondence.KindAckApplied:
			return client.AckApplied(t, o.revision, o.detail), nil
		case correspondence.KindAckRejected:
			return client.AckRejected(t, o.detail), nil
		}
		return client.Resume(t, o.detail), nil
	case correspondence.KindConflictRaise:
		return client.ConflictRaise(o.targets, o.summary), nil
	case correspondence.KindConflictResolve:
		return client.ConflictResolve(o.targets, o.summary, o.revision), nil
	case correspondence.KindRepair:
		return client.Repair(o.targets, o.summary, o.revision), nil
	case correspondence.KindPause, correspondence.KindRest:
		var until time.Time
		if o.until != "" {
			var err error
			if until, err = parseTime("--until", o.until); err != nil {
				return client.Draft{}, err
			}
		}
		if k == correspondence.KindPause {
			return client.Pause(until, o.detail), nil
		}
		return client.Rest(until, o.detail), nil
	case correspondence.KindRefusal:
		t := ""
		if len(o.targets) > 1 {
			return client.Draft{}, errors.New("refusal takes at most one --target")
		} else if len(o.targets) == 1 {
			t = o.targets[0]
		}
		return client.Refusal(t, o.detail), nil
	case correspondence.KindHandoff:
		return client.Handoff(o.summary, o.nextSafe, o.handoffID), nil
	case correspondence.KindClose:
		return client.Close(o.summary), nil
	}
	return client.Draft{}, fmt.Errorf("unknown --kind %q (one of the 21 kinds of spec §5)", o.kind)
}

// signCore reads a core event, fills what it leaves out, validates and
// signs it.
func (o *signOpts) signCore(stdin io.Reader) (*correspondence.Event, error) {
	data, err := readInput(o.in, stdin)
	if err != nil {
		return nil, err
	}
	v, err := canonicaljson.ParseObject(data)
	if err != nil {
		return nil, fmt.Errorf("core event: %w", err)
	}
	set := func(name string, val canonicaljson.Value, replace bool) {
		for i := range v.Members {
			if v.Members[i].Name == name {
				if replace {
					v.Members[i].Value = val
				}
				return
			}
		}
		v.Members = append(v.Members, canonicaljson.Member{Name: name, Value: val})
	}
	str := canonicaljson.StringValue
	set("protocol", str(correspondence.Protocol), false)
	set("authority", canonicaljson.ObjectValue(
		canonicaljson.Member{Name: "automatic_action", Value: str("never")},
		canonicaljson.Member{Name: "grants", Value: canonicaljson.ArrayValue()}), false)
	set("issued_at", str(correspondence.FormatTimestamp(time.Now())), false)
	set("parents", canonicaljson.ArrayValue(), false)
	if o.signer.projectID != "" {
		set("project_id", str(o.signer.projectID), true)
	}
	sender, _ := v.Get("sender")
	if sender.Kind != canonicaljson.Object {
		sender = canonicaljson.ObjectValue()
	}
	for _, f := range []struct{ name, val string }{
		{"identity_id", o.signer.sender.IdentityID}, {"signing_key_id", o.signer.sender.SigningKeyID},
		{"device_id", o.signer.sender.DeviceID}, {"session_id", o.signer.sender.SessionID}} {
		if f.val == "" {
			continue
		}
		replaced := false
		for i := range sender.Members {
			if sender.Members[i].Name == f.name {
				sender.Members[i].Value, replaced = str(f.val), true
			}
		}
		if !replaced {
			sender.Members = append(sender.Members, canonicaljson.Member{Name: f.name, Value: str(f.val)})
		}
	}
	set("sender", sender, true)
	// The key is loaded, and a session_seq reserved, before the event is
	// judged; the session_seq is spent only once the event is signed.
	signer, err := o.signer.signer(true)
	if err != nil {
		return nil, err
	}
	commit := func() error { return nil }
	if o.seqFile != "" || o.seq > 0 {
		var n int64
		if n, commit, err = o.reserveSeq(); err != nil {
			return nil, err
		}
		set("session_seq", canonicaljson.IntValue(n), true)
	}
	// Placeholders of the right shape let the core validate the rest; Sign
	// replaces both.
	set("event_id", str("sha256:"+fmt.Sprintf("%064d", 0)), true)
	set("signature", canonicaljson.ObjectValue(
		canonicaljson.Member{Name: "algorithm", Value: str(correspondence.SignatureAlgorithm)},
		canonicaljson.Member{Name: "value_b64url", Value: str(zeroSig)}), true)
	raw, err := canonicaljson.Canonical(v)
	if err != nil {
		return nil, fmt.Errorf("core event: %w", err)
	}
	ev, err := correspondence.ParseEvent(raw)
	if err != nil {
		return nil, describeInvalid(err)
	}
	if err := signer.SignAsIs(ev); err != nil {
		return nil, err
	}
	return ev, commit()
}

// zeroSig is 64 zero bytes in unpadded base64url: a well-formed placeholder.
const zeroSig = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// readInput reads a file, or stdin for "-", bounded by maxEventInput.
func readInput(name string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxEventInput+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxEventInput {
		return nil, fmt.Errorf("input larger than %d bytes", maxEventInput)
	}
	return data, nil
}
