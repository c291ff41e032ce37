package conformance

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/envelope"
)

// Source labels of the vector files, as printed before each group name.
const (
	SourceSeed000 = "seed-000" // seed 000, embedded
	SourcePublic  = "public"   // agent-correspondence-0.1-vectors.json from the shared folder
	SourceSeed001 = "seed-001" // seed 001 (predicate envelopes v1), embedded
)

// Group is the outcome of one vector group of one file. Every entry of the
// group is counted exactly once: as passed, as failed, or as an erratum (a
// known damaged entry whose corrected rule holds; when the corrected rule
// does not hold the entry counts as failed). Failures holds one line per
// failed entry; it names the entry and what differed, never an event body.
type Group struct {
	Source   string
	Name     string
	Passed   int
	Failed   int
	Errata   []Erratum
	Failures []string
}

// Title is "<source> <group>", for example "seed-000 path_vectors".
func (g Group) Title() string { return g.Source + " " + g.Name }

// Report is the outcome of a vector run: the groups in the order they ran,
// notes (for example that the public file was not found), and what was
// not run, each item naming how to run it ("the public vector file (set
// ACRELAY_SHARED_DIR or --shared-dir)"), so that a total of passes is
// never read as the whole suite.
type Report struct {
	Groups []Group
	Notes  []string
	NotRun []string
}

// Failed is the number of failed entries over all groups.
func (r Report) Failed() int {
	n := 0
	for _, g := range r.Groups {
		n += g.Failed
	}
	return n
}

// Passed is the number of passed entries over all groups.
func (r Report) Passed() int {
	n := 0
	for _, g := range r.Groups {
		n += g.Passed
	}
	return n
}

// Errata lists every erratum of the run with the title of its group.
func (r Report) Errata() []GroupErratum {
	var out []GroupErratum
	for _, g := range r.Groups {
		for _, e := range g.Errata {
			out = append(out, GroupErratum{Group: g.Title(), Erratum: e})
		}
	}
	return out
}

// GroupErratum is an erratum with the title of the group it was found in.
type GroupErratum struct {
	Group string
	Erratum
}

// MarshalJSON gives the report the shape
// {"groups":[{"name","passed","failed","errata"}],"failed","not_run"?},
// where name is the group's Title, errata the number of errata, and
// not_run (left out when everything ran) the Report's NotRun.
func (r Report) MarshalJSON() ([]byte, error) {
	type group struct {
		Name   string `json:"name"`
		Passed int    `json:"passed"`
		Failed int    `json:"failed"`
		Errata int    `json:"errata"`
	}
	out := struct {
		Groups []group  `json:"groups"`
		Failed int      `json:"failed"`
		NotRun []string `json:"not_run,omitempty"`
	}{Groups: []group{}, Failed: r.Failed(), NotRun: r.NotRun}
	for _, g := range r.Groups {
		out.Groups = append(out.Groups, group{g.Title(), g.Passed, g.Failed, len(g.Errata)})
	}
	return json.Marshal(out)
}

// RunVectors runs seed 000 and seed 001 (both embedded) and, when
// sharedDir is not empty, the public vector file at
// sharedDir/PublicVectorsPath, in the order seed 000, public, seed 001.
// Error: the public file cannot be read (a missing shared folder is the
// caller's decision: pass "" to run the seeds only).
func RunVectors(sharedDir string) (Report, error) {
	var r Report
	seed000, err := seeds.ReadFile(seed000File)
	if err != nil {
		return r, err
	}
	r.Groups = append(r.Groups, RunCorrespondenceVectors(SourceSeed000, seed000)...)
	if sharedDir != "" {
		public, err := os.ReadFile(filepath.Join(sharedDir, filepath.FromSlash(PublicVectorsPath)))
		if err != nil {
			return r, fmt.Errorf("public vector file: %w", err)
		}
		r.Groups = append(r.Groups, RunCorrespondenceVectors(SourcePublic, public)...)
	} else {
		r.Notes = append(r.Notes, "public vector file not run: shared folder not found (set ACRELAY_SHARED_DIR or --shared-dir)")
		r.NotRun = append(r.NotRun, "the public vector file (set ACRELAY_SHARED_DIR or --shared-dir)")
	}
	seed001, err := seeds.ReadFile(seed001File)
	if err != nil {
		return r, err
	}
	r.Groups = append(r.Groups, RunEnvelopeVectors(SourceSeed001, seed001)...)
	return r, nil
}

// correspondenceGroups are the groups of a correspondence vector file, in
// file order; metadataMembers are the members that hold no vectors.
var (
	correspondenceGroups = []string{
		"bounds", "signing_vector", "canonicalization_vectors", "rejection_vectors", "body_matrix",
		"invalid_body_vectors", "opaque_id_vectors", "locator_vectors", "path_vectors", "lineage_vectors",
	}
	metadataMembers = []string{"protocol", "canonicalization"}
)

// RunCorrespondenceVectors runs every group of an agent-correspondence
// vector file (seed 000 or the public file) and returns one Group per
// group in file order. A group the file lacks, and a member this runner
// does not know, each count as one failure, so that nothing in the file
// passes unchecked. A file that is not JSON is one failed group "file".
func RunCorrespondenceVectors(source string, data []byte) []Group {
	var file map[string]json.RawMessage
	if err := json.Unmarshal(data, &file); err != nil {
		g := Group{Source: source, Name: "file"}
		g.fail("read vector file: %v", err)
		return []Group{g}
	}
	var groups []Group
	if p := string(file["protocol"]); p != `"`+correspondence.Protocol+`"` {
		g := Group{Source: source, Name: "protocol"}
		g.fail("protocol member is not %q", correspondence.Protocol)
		groups = append(groups, g)
	}
	for _, name := range correspondenceGroups {
		g := Group{Source: source, Name: name}
		raw, ok := file[name]
		if !ok {
			g.fail("the file has no %s", name)
			groups = append(groups, g)
			continue
		}
		runGroup(&g, raw, data)
		groups = append(groups, g)
	}
	var unknown []string
	for name := range file {
		if !slices.Contains(correspondenceGroups, name) && !slices.Contains(metadataMembers, name) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		g := Group{Source: source, Name: name}
		g.fail("member %s is not known to this runner and was not checked", name)
		groups = append(groups, g)
	}
	return groups
}

func runGroup(g *Group, raw json.RawMessage, file []byte) {
	switch g.Name {
	case "bounds":
		runBounds(g, raw)
	case "signing_vector":
		runSigningVector(g, raw)
	case "canonicalization_vectors":
		runCanonicalizationVectors(g, raw)
	case "rejection_vectors":
		runRejectionVectors(g, raw)
	case "body_matrix":
		runBodyMatrix(g, raw)
	case "invalid_body_vectors":
		runInvalidBodyVectors(g, raw)
	case "opaque_id_vectors":
		runScalarVectors(g, raw, "value", correspondence.ValidOpaqueID)
	case "locator_vectors":
		runScalarVectors(g, raw, "value", correspondence.ValidLocator)
	case "path_vectors":
		runScalarVectors(g, raw, "path", correspondence.ValidPath)
	case "lineage_vectors":
		runLineageVectors(g, file)
	}
}

func (g *Group) fail(format string, args ...any) {
	g.Failed++
	g.Failures = append(g.Failures, fmt.Sprintf(format, args...))
}

// record counts one entry: passed when err is nil, else failed with the
// entry's label and the error.
func (g *Group) record(entry string, err error) {
	if err == nil {
		g.Passed++
		return
	}
	g.fail("%s: %v", entry, err)
}

// decodeList decodes a group's array into out (a pointer to a slice),
// refusing members the runner does not know. On error it records one
// failure and returns false.
func decodeList(g *Group, raw json.RawMessage, out any) bool {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		g.fail("read %s: %v", g.Name, err)
		return false
	}
	return true
}

// fileBounds is the file's bounds member.
type fileBounds struct {
	RawPostBytes   int `json:"raw_post_utf8_bytes_max"`
	RepositoryID   int `json:"repository_id_scalar_values_max"`
	ThreadID       int `json:"thread_id_scalar_values_max"`
	Parents        int `json:"parents_max"`
	ScopePaths     int `json:"scope_paths_max"`
	Path           int `json:"path_scalar_values_max"`
	GeneralText    int `json:"general_text_scalar_values_max"`
	HandoffSummary int `json:"handoff_summary_scalar_values_max"`
	TargetEventIDs int `json:"target_event_ids_max"`
}

// maxRawPostBytes is the raw POST cap of spec §3. Only a relay enforces
// it (the HTTP suite posts a larger body); the runner checks the file
// states the same number.
const maxRawPostBytes = 65536

// runBounds checks every bound of the file at the bound (accepted) and one
// past it (refused with an issue at the bounded member). Texts are made of
// U+1F600, four UTF-8 bytes and two UTF-16 units, so that a count in bytes
// or code units would refuse the value at the bound.
func runBounds(g *Group, raw json.RawMessage) {
	var b fileBounds
	if !decodeList(g, raw, &b) {
		return
	}
	const wide = "\U0001F600"
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("sha256:%064x", i+1)
		}
		return out
	}
	text := func(name string, n int) canonicaljson.Member {
		return canonicaljson.Member{Name: name, Value: canonicaljson.StringValue(strings.Repeat(wide, n))}
	}
	summary := func(n int) func(*correspondence.Event) {
		return func(e *correspondence.Event) { e.Body = canonicaljson.ObjectValue(text("summary", n)) }
	}
	cases := []struct {
		name    string
		max     int
		pointer string
		at      func(n int) func(*correspondence.Event)
	}{
		{"repository_id_scalar_values_max", b.RepositoryID, "/repository_id", func(n int) func(*correspondence.Event) {
			return func(e *correspondence.Event) { e.RepositoryID = strings.Repeat(wide, n) }
		}},
		{"thread_id_scalar_values_max", b.ThreadID, "/thread_id", func(n int) func(*correspondence.Event) {
			return func(e *correspondence.Event) { e.ThreadID = strings.Repeat(wide, n) }
		}},
		{"parents_max", b.Parents, "/parents", func(n int) func(*correspondence.Event) {
			return func(e *correspondence.Event) { e.Parents = ids(n) }
		}},
		{"scope_paths_max", b.ScopePaths, "/scope/paths", func(n int) func(*correspondence.Event) {
			return func(e *correspondence.Event) {
				e.Scope.Paths = make([]string, n)
				for i := range e.Scope.Paths {
					e.Scope.Paths[i] = fmt.Sprintf("p%d", i)
				}
			}
		}},
		{"path_scalar_values_max", b.Path, "/scope/paths/0", func(n int) func(*correspondence.Event) {
			return func(e *correspondence.Event) { e.Scope.Paths = []string{strings.Repeat(wide, n)} }
		}},
		{"general_text_scalar_values_max", b.GeneralText, "/body/summary", summary},
		{"handoff_summary_scalar_values_max", b.HandoffSummary, "/body/summary", func(n int) func(*correspondence.Event) {
			return func(e *correspondence.Event) {
				e.Kind = correspondence.KindHandoff
				e.Body = canonicaljson.ObjectValue(text("summary", n), text("next_safe_action", 1))
			}
		}},
		{"target_event_ids_max", b.TargetEventIDs, "/body/target_event_ids", func(n int) func(*correspondence.Event) {
			return func(e *correspondence.Event) {
				e.Kind = correspondence.KindConflictRaise
				targets := make([]canonicaljson.Value, n)
				for i, id := range ids(n) {
					targets[i] = canonicaljson.StringValue(id)
				}
				e.Body = canonicaljson.ObjectValue(canonicaljson.Member{Name: "target_event_ids", Value: canonicaljson.ArrayValue(targets...)})
				e.Parents = ids(min(n, b.Parents))
			}
		}},
	}
	for _, c := range cases {
		g.record(fmt.Sprintf("%s %d", c.name, c.max), func() error {
			if c.max < 1 {
				return errors.New("missing or not positive")
			}
			if issues := boundedEvent(c.at(c.max)); issues != nil {
				return fmt.Errorf("refused at the bound: %s", describe(&correspondence.ValidationError{Code: "event_invalid", Issues: issues}))
			}
			for _, is := range boundedEvent(c.at(c.max + 1)) {
				if is.Pointer == c.pointer {
					return nil
				}
			}
			return fmt.Errorf("admitted one past the bound (no issue at %s)", c.pointer)
		}())
	}
	var err error
	if b.RawPostBytes != maxRawPostBytes {
		err = fmt.Errorf("the file says %d, spec §3 says %d", b.RawPostBytes, maxRawPostBytes)
	}
	g.record(fmt.Sprintf("raw_post_utf8_bytes_max %d (enforced by a relay; conformance http posts past it)", b.RawPostBytes), err)
}

// boundedEvent returns the validation issues of a signed intent changed
// by mod.
func boundedEvent(mod func(*correspondence.Event)) []correspondence.Issue {
	e, err := wrapBody("intent", canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue("bounds")}))
	if err != nil {
		return []correspondence.Issue{{Code: err.Error()}}
	}
	mod(e)
	if err := e.Sign(wrapKey); err != nil {
		return []correspondence.Issue{{Code: err.Error()}}
	}
	return correspondence.Validate(e.Value())
}

// signingVector is the file's signing_vector member.
type signingVector struct {
	Name             string          `json:"name"`
	TestKeyWarning   string          `json:"test_key_warning"`
	PrivateSeedHex   string          `json:"private_seed_hex"`
	PublicKeyB64URL  string          `json:"public_key_b64url"`
	Core             json.RawMessage `json:"core"`
	CoreJCS          string          `json:"core_jcs"`
	SigningDigestHex string          `json:"signing_digest_hex"`
	SignatureB64URL  string          `json:"signature_b64url"`
	EventID          string          `json:"event_id"`
}

// runSigningVector makes four checks (spec §6): core_jcs of the parsed
// event, the signing digest, the signature (Sign reproduces it byte for
// byte, it verifies under the vector's public key, which belongs to the
// seed) and the event id (Sign reproduces it, and the signed event parsed
// with that id verifies).
func runSigningVector(g *Group, raw json.RawMessage) {
	var sv signingVector
	if !decodeList(g, raw, &sv) {
		return
	}
	const checks = 4
	seed, err := hex.DecodeString(sv.PrivateSeedHex)
	if err != nil || len(seed) != ed25519.SeedSize {
		g.Failed += checks
		g.Failures = append(g.Failures, "private_seed_hex is not 32 bytes of hex")
		return
	}
	priv := ed25519.NewKeyFromSeed(seed)
	core, err := canonicaljson.ParseObject(sv.Core)
	if err != nil {
		g.Failed += checks
		g.Failures = append(g.Failures, fmt.Sprintf("core refused by the strict profile: %v", err))
		return
	}
	signedValue := core
	signedValue.Members = append(slices.Clone(core.Members),
		canonicaljson.Member{Name: "event_id", Value: canonicaljson.StringValue(sv.EventID)},
		canonicaljson.Member{Name: "signature", Value: canonicaljson.ObjectValue(
			canonicaljson.Member{Name: "algorithm", Value: canonicaljson.StringValue(correspondence.SignatureAlgorithm)},
			canonicaljson.Member{Name: "value_b64url", Value: canonicaljson.StringValue(sv.SignatureB64URL)},
		)},
	)
	ev, err := correspondence.EventFromValue(signedValue)
	if err != nil {
		g.Failed += checks
		g.Failures = append(g.Failures, fmt.Sprintf("%s: the signed vector event is refused: %s", sv.Name, describe(err)))
		return
	}

	coreJCS, err := ev.CoreJCS()
	if err == nil && string(coreJCS) != sv.CoreJCS {
		err = errors.New("differs from the vector's core_jcs")
	}
	g.record(sv.Name+" core_jcs", err)

	d := correspondence.SigningDigest([]byte(sv.CoreJCS))
	err = nil
	if got := hex.EncodeToString(d[:]); got != sv.SigningDigestHex {
		err = fmt.Errorf("%s, want %s", got, sv.SigningDigestHex)
	}
	g.record(sv.Name+" signing_digest", err)

	signed := *ev
	signed.ID, signed.Signature = "", ""
	err = signed.Sign(priv)
	pub, perr := correspondence.DecodePublicKey(sv.PublicKeyB64URL)
	switch {
	case err != nil:
	case perr != nil:
		err = perr
	case !pub.Equal(priv.Public()):
		err = errors.New("public_key_b64url does not belong to private_seed_hex")
	case signed.Signature != sv.SignatureB64URL:
		err = fmt.Errorf("%s, want %s", signed.Signature, sv.SignatureB64URL)
	}
	g.record(sv.Name+" signature", err)

	err = nil
	switch {
	case signed.ID != sv.EventID:
		err = fmt.Errorf("signing gives %s, want %s", signed.ID, sv.EventID)
	case perr != nil:
		err = perr
	default:
		if verr := ev.Verify(pub); verr != nil {
			err = fmt.Errorf("the vector event does not verify: %w", verr)
		}
	}
	g.record(sv.Name+" event_id", err)
}

// canonicalizationVector is one entry of canonicalization_vectors.
type canonicalizationVector struct {
	Name  string          `json:"name"`
	Valid bool            `json:"valid"`
	Value json.RawMessage `json:"value"`
	JCS   string          `json:"jcs"`
}

// runCanonicalizationVectors parses each value's exact bytes under the
// strict profile and compares the RFC 8785 output with jcs (spec §2).
func runCanonicalizationVectors(g *Group, raw json.RawMessage) {
	var vs []canonicalizationVector
	if !decodeList(g, raw, &vs) {
		return
	}
	for _, v := range vs {
		if e, ok := matchCanonicalizationErratum(v); ok {
			g.erratum(v.Name, e)
			continue
		}
		g.record(v.Name, checkCanonicalization(v.Value, v.Valid, v.JCS))
	}
}

func checkCanonicalization(value []byte, valid bool, jcs string) error {
	got, err := canonicaljson.CanonicalizeBytes(value)
	switch {
	case !valid && err == nil:
		return errors.New("accepted, must be refused")
	case !valid:
		return nil
	case err != nil:
		return fmt.Errorf("refused: %w", err)
	case string(got) != jcs:
		return fmt.Errorf("JCS is %q, want %q", got, jcs)
	}
	return nil
}

// rejectionVector is one entry of rejection_vectors.
type rejectionVector struct {
	Name   string `json:"name"`
	JSON   string `json:"json"`
	Reason string `json:"reason"`
}

// runRejectionVectors checks that the strict profile refuses each document
// with exactly the vector's reason code (spec §2).
func runRejectionVectors(g *Group, raw json.RawMessage) {
	var vs []rejectionVector
	if !decodeList(g, raw, &vs) {
		return
	}
	for _, v := range vs {
		_, err := canonicaljson.Parse([]byte(v.JSON))
		var pe *canonicaljson.ProfileError
		switch {
		case err == nil:
			err = fmt.Errorf("accepted, must be refused with %s", v.Reason)
		case !errors.As(err, &pe):
			err = fmt.Errorf("refused without a reason code (%w), want %s", err, v.Reason)
		case pe.Reason != v.Reason:
			err = fmt.Errorf("refused with %s, want %s", pe.Reason, v.Reason)
		default:
			err = nil
		}
		g.record(v.Name, err)
	}
}

// kindBody is one entry of body_matrix or invalid_body_vectors.
type kindBody struct {
	Kind   string          `json:"kind"`
	Body   json.RawMessage `json:"body"`
	Reason string          `json:"reason"`
}

// The test key that wraps body vectors in signed events: the signing
// vector's PUBLIC TEST seed (bytes 0x00…0x1f), never a real identity's.
var wrapKey = ed25519.NewKeyFromSeed([]byte{
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
})

// wrapBody returns a signed event of the given kind around body, with the
// event ids the body references as its parents (spec §5), and otherwise
// valid fixed fields.
func wrapBody(kind string, body canonicaljson.Value) (*correspondence.Event, error) {
	e := &correspondence.Event{
		ProjectID:    "11111111-1111-4111-8111-111111111111",
		RepositoryID: "repo:conformance",
		ThreadID:     "task:conformance",
		Sender: correspondence.Sender{
			IdentityID:   "22222222-2222-4222-8222-222222222222",
			SigningKeyID: "33333333-3333-4333-8333-333333333333",
			DeviceID:     "44444444-4444-4444-8444-444444444444",
			SessionID:    "55555555-5555-4555-8555-555555555555",
		},
		Kind:       correspondence.Kind(kind),
		Parents:    referencedIDs(body),
		SessionSeq: 1,
		IssuedAt:   "2026-07-19T10:00:00.000Z",
		Scope:      correspondence.Scope{Paths: []string{"."}},
		Body:       body,
	}
	if err := e.Sign(wrapKey); err != nil {
		return nil, err
	}
	return e, nil
}

// referencedIDs collects the event ids a body references
// (predecessor_event_id, target_event_id, target_event_ids), in body order,
// each once.
func referencedIDs(body canonicaljson.Value) []string {
	ids := []string{}
	add := func(v canonicaljson.Value) {
		if v.Kind == canonicaljson.String && !slices.Contains(ids, v.Str) {
			ids = append(ids, v.Str)
		}
	}
	for _, m := range body.Members {
		switch m.Name {
		case "predecessor_event_id", "target_event_id":
			add(m.Value)
		case "target_event_ids":
			for _, e := range m.Value.Elems {
				add(e)
			}
		}
	}
	return ids
}

// runBodyMatrix wraps each body in a signed event and checks that the
// event's canonical bytes parse, validate and verify, and that the parsed
// event serializes to the same bytes (spec §5, §6).
func runBodyMatrix(g *Group, raw json.RawMessage) {
	var vs []kindBody
	if !decodeList(g, raw, &vs) {
		return
	}
	pub := wrapKey.Public().(ed25519.PublicKey)
	for _, v := range vs {
		g.record(v.Kind, func() error {
			body, err := canonicaljson.ParseObject(v.Body)
			if err != nil {
				return fmt.Errorf("body refused by the strict profile: %w", err)
			}
			e, err := wrapBody(v.Kind, body)
			if err != nil {
				return err
			}
			raw, err := e.CanonicalJSON()
			if err != nil {
				return err
			}
			got, err := correspondence.ParseEvent(raw)
			if err != nil {
				return fmt.Errorf("refused: %s", describe(err))
			}
			if err := got.Verify(pub); err != nil {
				return fmt.Errorf("verify: %w", err)
			}
			again, err := got.CanonicalJSON()
			if err != nil {
				return err
			}
			if string(again) != string(raw) {
				return errors.New("the parsed event serializes to other bytes")
			}
			return nil
		}())
	}
}

// runInvalidBodyVectors wraps each body in an otherwise valid signed event
// and checks that ParseEvent refuses it as event_invalid with exactly one
// issue, under /body, whose code is the vector's reason.
func runInvalidBodyVectors(g *Group, raw json.RawMessage) {
	var vs []kindBody
	if !decodeList(g, raw, &vs) {
		return
	}
	for _, v := range vs {
		g.record(v.Kind+" "+v.Reason, func() error {
			body, err := canonicaljson.ParseObject(v.Body)
			if err != nil {
				return fmt.Errorf("body refused by the strict profile: %w", err)
			}
			e, err := wrapBody(v.Kind, body)
			if err != nil {
				return err
			}
			raw, err := e.CanonicalJSON()
			if err != nil {
				return err
			}
			_, err = correspondence.ParseEvent(raw)
			var ve *correspondence.ValidationError
			switch {
			case err == nil:
				return fmt.Errorf("accepted, must be refused with %s", v.Reason)
			case !errors.As(err, &ve):
				return fmt.Errorf("refused with %v, want event_invalid", err)
			case ve.Code != correspondence.CodeEventInvalid:
				return fmt.Errorf("refused with %s, want event_invalid", ve.Code)
			case len(ve.Issues) != 1 || ve.Issues[0].Code != v.Reason || !strings.HasPrefix(ve.Issues[0].Pointer, "/body"):
				return fmt.Errorf("issues %s, want exactly one %s under /body", describe(err), v.Reason)
			}
			return nil
		}())
	}
}

// scalarVector is one entry of opaque_id_vectors, locator_vectors or
// path_vectors.
type scalarVector struct {
	Value *string `json:"value"`
	Path  *string `json:"path"`
	Valid *bool   `json:"valid"`
}

// runScalarVectors checks valid(value) against each entry's expectation
// (spec §4). key names the member that holds the value.
func runScalarVectors(g *Group, raw json.RawMessage, key string, valid func(string) bool) {
	var vs []scalarVector
	if !decodeList(g, raw, &vs) {
		return
	}
	for i, v := range vs {
		s := v.Value
		if key == "path" {
			s = v.Path
		}
		if s == nil || v.Valid == nil {
			g.fail("entry %d: no %s or no valid member", i, key)
			continue
		}
		if e, ok := matchScalarErratum(g.Name, *s, *v.Valid); ok {
			g.erratum(fmt.Sprintf("%+q", *s), e)
			continue
		}
		var err error
		if got := valid(*s); got != *v.Valid {
			err = fmt.Errorf("valid = %v, want %v", got, *v.Valid)
		}
		g.record(fmt.Sprintf("%+q", *s), err)
	}
}

// lineageNow is the instant the lineage vectors are replayed at. Their
// expiries are relative ("future", "past"), so any instant gives the same
// outcome; a fixed one keeps runs reproducible.
var lineageNow = time.Date(2026, 7, 19, 10, 0, 0, 0, time.UTC)

// runLineageVectors replays each lineage scenario (spec §8) through the
// pure projection ProjectLineage and through the incremental Lineage with
// the relay's frontier budget of 32, and checks every expectation after
// every arrival.
func runLineageVectors(g *Group, file []byte) {
	vs, err := correspondence.LoadLineageVectors(file)
	if err != nil {
		g.fail("%v", err)
		return
	}
	for _, v := range vs {
		bad := v.Check(v.Replay(lineageNow))
		for _, m := range v.Check(v.ReplayIncremental(lineageNow, 32)) {
			bad = append(bad, "incremental: "+m)
		}
		var err error
		if len(bad) > 0 {
			err = errors.New(strings.Join(bad, "; "))
		}
		g.record(v.Name, err)
	}
}

// RunEnvelopeVectors runs seed 001's predicate envelope vectors through
// envelope.CheckVector: group envelope_acceptance (canonical bytes and
// hash reproduced exactly) and envelope_rejection (refused). A file that
// cannot be read is one failed group "file".
func RunEnvelopeVectors(source string, data []byte) []Group {
	vs, err := envelope.ParseVectors(data)
	if err != nil {
		g := Group{Source: source, Name: "file"}
		g.fail("%v", err)
		return []Group{g}
	}
	accept := Group{Source: source, Name: "envelope_acceptance"}
	reject := Group{Source: source, Name: "envelope_rejection"}
	for _, v := range vs {
		g := &accept
		if v.Rejection() {
			g = &reject
		}
		if err := envelope.CheckVector(v); err != nil {
			g.fail("%v", err)
			continue
		}
		g.Passed++
	}
	return []Group{accept, reject}
}

// describe words a refusal for a failure line: the reason or the error
// code with its issues as pointer=code pairs; never the input.
func describe(err error) string {
	var ve *correspondence.ValidationError
	if errors.As(err, &ve) {
		parts := make([]string, len(ve.Issues))
		for i, is := range ve.Issues {
			parts[i] = is.Pointer + "=" + is.Code
		}
		return ve.Code + " [" + strings.Join(parts, " ") + "]"
	}
	return err.Error()
}
