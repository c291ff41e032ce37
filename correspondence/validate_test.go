package correspondence_test

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// referencedIDs collects the event ids a body vector references.
func referencedIDs(body canonicaljson.Value) []string {
	var ids []string
	for _, m := range body.Members {
		switch m.Name {
		case "predecessor_event_id", "target_event_id":
			ids = append(ids, m.Value.Str)
		case "target_event_ids":
			for _, e := range m.Value.Elems {
				ids = append(ids, e.Str)
			}
		}
	}
	return ids
}

func TestBodyMatrix(t *testing.T) {
	for _, src := range vectorSources(t) {
		t.Run(src.name, func(t *testing.T) {
			if len(src.vf.BodyMatrix) != 21 {
				t.Fatalf("body_matrix has %d entries, want 21", len(src.vf.BodyMatrix))
			}
			seen := map[correspondence.Kind]bool{}
			pub := testKey(t).Public().(ed25519.PublicKey)
			for _, bm := range src.vf.BodyMatrix {
				t.Run(bm.Kind, func(t *testing.T) {
					body := mustParse(t, bm.Body)
					refs := referencedIDs(body)
					e := baseEvent(t, correspondence.Kind(bm.Kind), body, refs)
					raw, err := e.CanonicalJSON()
					if err != nil {
						t.Fatal(err)
					}
					got, err := correspondence.ParseEvent(raw)
					if err != nil {
						t.Fatalf("refused: %v %+v", err, issuesOf(err))
					}
					if err := got.Verify(pub); err != nil {
						t.Errorf("Verify: %v", err)
					}
					if g := got.ReferencedEventIDs(); strings.Join(g, ",") != strings.Join(refs, ",") {
						t.Errorf("ReferencedEventIDs = %v, want %v", g, refs)
					}
					// Without its parents, a referencing body is refused at /parents.
					if len(refs) > 0 {
						issues := correspondence.Validate(edit(t, e.Value(), "/parents", strArray()))
						if len(issues) != 1 || !hasIssue(issues, "/parents", "reference_not_in_parents") {
							t.Errorf("without parents: %+v", issues)
						}
					}
					seen[correspondence.Kind(bm.Kind)] = true
				})
			}
			for _, k := range correspondence.Kinds {
				if !seen[k] {
					t.Errorf("kind %s not accepted by the matrix", k)
				}
			}
		})
	}
}

func issuesOf(err error) []correspondence.Issue {
	var ve *correspondence.ValidationError
	if errors.As(err, &ve) {
		return ve.Issues
	}
	return nil
}

func TestInvalidBodyVectors(t *testing.T) {
	for _, src := range vectorSources(t) {
		t.Run(src.name, func(t *testing.T) {
			if len(src.vf.InvalidBodyVectors) != 5 {
				t.Fatalf("invalid_body_vectors has %d entries, want 5", len(src.vf.InvalidBodyVectors))
			}
			for _, ib := range src.vf.InvalidBodyVectors {
				t.Run(ib.Reason, func(t *testing.T) {
					body := mustParse(t, ib.Body)
					e := baseEvent(t, correspondence.Kind(ib.Kind), body, referencedIDs(body))
					issues := correspondence.Validate(e.Value())
					if len(issues) != 1 || issues[0].Code != ib.Reason || !strings.HasPrefix(issues[0].Pointer, "/body") {
						t.Errorf("issues = %+v, want exactly one %s under /body", issues, ib.Reason)
					}
					raw, _ := e.CanonicalJSON()
					_, err := correspondence.ParseEvent(raw)
					var ve *correspondence.ValidationError
					if !errors.As(err, &ve) || ve.Code != correspondence.CodeEventInvalid {
						t.Errorf("ParseEvent error = %v, want event_invalid", err)
					}
				})
			}
		})
	}
}

func TestMultipleIssues(t *testing.T) {
	ev := claimOpenEvent(t)
	ev = edit(t, ev, "/session_seq", num(0))
	ev = edit(t, ev, "/scope/paths/1", str("docs/../x"))
	ev = edit(t, ev, "/body/generation", str("1"))
	ev = edit(t, ev, "/extra", null())
	issues := correspondence.Validate(ev)
	want := []correspondence.Issue{
		{Pointer: "/session_seq", Code: "session_seq_out_of_range"},
		{Pointer: "/scope/paths/1", Code: "path_invalid"},
		{Pointer: "/body/generation", Code: "invalid_type"},
		{Pointer: "/extra", Code: "unknown_field"},
	}
	if len(issues) != len(want) {
		t.Fatalf("issues = %+v", issues)
	}
	for i, w := range want {
		if issues[i].Pointer != w.Pointer || issues[i].Code != w.Code || issues[i].Message == "" {
			t.Errorf("issue %d = %+v, want %s %s", i, issues[i], w.Pointer, w.Code)
		}
	}
}

// TestRules covers every rule of spec §3–§5 and every bound at both edges.
// Each case edits the valid claim.open event (or a body of another kind)
// and expects no issue (ptr == "") or exactly the listed issue.
func TestRules(t *testing.T) {
	base := claimOpenEvent(t)
	type change struct {
		ptr string
		v   *canonicaljson.Value // nil deletes
	}
	ids16 := eventIDs(16)
	ids17 := eventIDs(17)
	paths64 := make([]string, 64)
	for i := range paths64 {
		paths64[i] = "p" + eventID(i)[7:]
	}
	withKind := func(kind string, body string, parents ...string) []change {
		b := mustParse(t, []byte(body))
		if parents == nil {
			parents = []string{}
		}
		return []change{{"/kind", str(kind)}, {"/body", &b}, {"/parents", strArray(parents...)}}
	}
	text := func(n int) string { return strings.Repeat("\u00e9", n) }
	jsonText := func(n int) string { return `"` + text(n) + `"` }
	a, b := eventID(1), eventID(2)
	cases := []struct {
		name    string
		changes []change
		ptr     string
		code    string
	}{
		{"valid", nil, "", ""},
		{"not an object", []change{}, "", ""},
		{"protocol", []change{{"/protocol", str("agent-correspondence/v0.2")}}, "/protocol", "protocol_invalid"},
		{"protocol type", []change{{"/protocol", num(1)}}, "/protocol", "invalid_type"},
		{"protocol missing", []change{{"/protocol", nil}}, "/protocol", "required"},
		{"event_id upper", []change{{"/event_id", str(strings.ToUpper(a))}}, "/event_id", "event_id_invalid"},
		{"event_id short", []change{{"/event_id", str(a[:70])}}, "/event_id", "event_id_invalid"},
		{"event_id missing", []change{{"/event_id", nil}}, "/event_id", "required"},
		{"project_id upper", []change{{"/project_id", str("AAAAAAAA-1111-4111-8111-111111111111")}}, "/project_id", "uuid_invalid"},
		{"repository_id 256", []change{{"/repository_id", str(text(256))}}, "", ""},
		{"repository_id 257", []change{{"/repository_id", str(text(257))}}, "/repository_id", "length_out_of_range"},
		{"repository_id empty", []change{{"/repository_id", str("")}}, "/repository_id", "length_out_of_range"},
		{"repository_id space", []change{{"/repository_id", str("a b")}}, "/repository_id", "opaque_id_invalid"},
		{"thread_id 256", []change{{"/thread_id", str(strings.Repeat("t", 256))}}, "", ""},
		{"thread_id 257", []change{{"/thread_id", str(strings.Repeat("t", 257))}}, "/thread_id", "length_out_of_range"},
		{"thread_id bom", []change{{"/thread_id", str("t\ufeff")}}, "/thread_id", "opaque_id_invalid"},
		{"sender uuid", []change{{"/sender/device_id", str("x")}}, "/sender/device_id", "uuid_invalid"},
		{"sender missing member", []change{{"/sender/session_id", nil}}, "/sender/session_id", "required"},
		{"sender unknown member", []change{{"/sender/key", str("x")}}, "/sender/key", "unknown_field"},
		{"sender not object", []change{{"/sender", str("x")}}, "/sender", "invalid_type"},
		{"kind unknown", []change{{"/kind", str("claim.steal")}}, "/kind", "kind_invalid"},
		{"kind type", []change{{"/kind", num(3)}}, "/kind", "invalid_type"},
		{"parents 16", []change{{"/parents", strArray(ids16...)}}, "", ""},
		{"parents 17", []change{{"/parents", strArray(ids17...)}}, "/parents", "item_count_out_of_range"},
		{"parents duplicate", []change{{"/parents", strArray(a, b, a)}}, "/parents/2", "duplicate_item"},
		{"parents bad id", []change{{"/parents", strArray("sha256:x")}}, "/parents/0", "event_id_invalid"},
		{"parents not array", []change{{"/parents", str(a)}}, "/parents", "invalid_type"},
		{"session_seq max", []change{{"/session_seq", num(canonicaljson.MaxSafeInteger)}}, "", ""},
		{"session_seq 0", []change{{"/session_seq", num(0)}}, "/session_seq", "session_seq_out_of_range"},
		{"session_seq negative", []change{{"/session_seq", num(-1)}}, "/session_seq", "session_seq_out_of_range"},
		{"session_seq string", []change{{"/session_seq", str("1")}}, "/session_seq", "invalid_type"},
		{"issued_at no ms", []change{{"/issued_at", str("2026-07-19T10:00:00Z")}}, "/issued_at", "timestamp_requires_milliseconds"},
		{"base_revision null", []change{{"/scope/base_revision", null()}}, "", ""},
		{"base_revision 64", []change{{"/scope/base_revision", str(strings.Repeat("b", 64))}}, "", ""},
		{"base_revision 41", []change{{"/scope/base_revision", str(strings.Repeat("b", 41))}}, "/scope/base_revision", "git_revision_invalid"},
		{"base_revision upper", []change{{"/scope/base_revision", str(strings.Repeat("B", 40))}}, "/scope/base_revision", "git_revision_invalid"},
		{"base_revision missing", []change{{"/scope/base_revision", nil}}, "/scope/base_revision", "required"},
		{"branch null", []change{{"/scope/branch", null()}}, "", ""},
		{"branch 255", []change{{"/scope/branch", str(text(255))}}, "", ""},
		{"branch 256", []change{{"/scope/branch", str(text(256))}}, "/scope/branch", "length_out_of_range"},
		{"branch empty", []change{{"/scope/branch", str("")}}, "/scope/branch", "length_out_of_range"},
		{"branch space ok", []change{{"/scope/branch", str("a b\u00a0c")}}, "", ""},
		{"branch control", []change{{"/scope/branch", str("a\nb")}}, "/scope/branch", "branch_invalid"},
		{"branch missing", []change{{"/scope/branch", nil}}, "/scope/branch", "required"},
		{"paths 64", []change{{"/scope/paths", strArray(paths64...)}}, "", ""},
		{"paths 65", []change{{"/scope/paths", strArray(append(paths64, "extra")...)}}, "/scope/paths", "item_count_out_of_range"},
		{"paths empty", []change{{"/scope/paths", strArray()}}, "/scope/paths", "item_count_out_of_range"},
		{"paths duplicate", []change{{"/scope/paths", strArray("a", "a")}}, "/scope/paths/1", "duplicate_item"},
		{"path 256", []change{{"/scope/paths", strArray(text(256))}}, "", ""},
		{"path 257", []change{{"/scope/paths", strArray(text(257))}}, "/scope/paths/0", "length_out_of_range"},
		{"path glob", []change{{"/scope/paths", strArray("a/*")}}, "/scope/paths/0", "path_invalid"},
		{"scope unknown", []change{{"/scope/x", null()}}, "/scope/x", "unknown_field"},
		{"body not object", []change{{"/body", strArray()}}, "/body", "invalid_type"},
		{"authority action", []change{{"/authority/automatic_action", str("always")}}, "/authority/automatic_action", "authority_invalid"},
		{"authority grants", []change{{"/authority/grants", strArray("x")}}, "/authority/grants", "authority_invalid"},
		{"authority extra", []change{{"/authority/note", str("x")}}, "/authority/note", "unknown_field"},
		{"authority missing", []change{{"/authority", nil}}, "/authority", "required"},
		{"signature algorithm", []change{{"/signature/algorithm", str("ed25519")}}, "/signature/algorithm", "signature_algorithm_invalid"},
		{"signature extra", []change{{"/signature/key_id", str("x")}}, "/signature/key_id", "unknown_field"},
		{"signature missing", []change{{"/signature", nil}}, "/signature", "required"},
		{"signature value type", []change{{"/signature/value_b64url", num(1)}}, "/signature/value_b64url", "signature_encoding_invalid"},
		{"unknown top-level", []change{{"/x~0y~1z", null()}}, "/x~0y~1z", "unknown_field"},
		{"unknown body member", []change{{"/body/note", str("x")}}, "/body/note", "unknown_body_field"},
		{"open generation 2", []change{{"/body/generation", num(2)}}, "/body/generation", "open_generation_must_be_one"},
		{"open generation string", []change{{"/body/generation", str("1")}}, "/body/generation", "invalid_type"},
		{"open expires_at missing", []change{{"/body/expires_at", nil}}, "/body/expires_at", "expires_at_required"},
		{"open claim_id", []change{{"/body/claim_id", str("x")}}, "/body/claim_id", "uuid_invalid"},
		{"renew generation 1", withKind("claim.renew", `{"claim_id":"66666666-6666-4666-8666-666666666666","generation":1,"predecessor_event_id":"`+a+`","expires_at":"2026-07-19T14:00:00.000Z"}`, a), "/body/generation", "generation_out_of_range"},
		{"renew generation max", withKind("claim.renew", `{"claim_id":"66666666-6666-4666-8666-666666666666","generation":9007199254740991,"predecessor_event_id":"`+a+`","expires_at":"2026-07-19T14:00:00.000Z"}`, a), "", ""},
		{"renew predecessor not in parents", withKind("claim.renew", `{"claim_id":"66666666-6666-4666-8666-666666666666","generation":2,"predecessor_event_id":"`+a+`","expires_at":"2026-07-19T14:00:00.000Z"}`, b), "/parents", "reference_not_in_parents"},
		{"release detail", withKind("claim.release", `{"claim_id":"66666666-6666-4666-8666-666666666666","generation":3,"predecessor_event_id":"`+a+`","detail":"done"}`, a), "", ""},
		{"release with expires_at", withKind("claim.release", `{"claim_id":"66666666-6666-4666-8666-666666666666","generation":3,"predecessor_event_id":"`+a+`","expires_at":"2026-07-19T14:00:00.000Z"}`, a), "/body/expires_at", "unknown_body_field"},
		{"summary 1000", withKind("intent", `{"summary":`+jsonText(1000)+`}`), "", ""},
		{"summary 1001", withKind("intent", `{"summary":`+jsonText(1001)+`}`), "/body/summary", "length_out_of_range"},
		{"summary empty", withKind("progress", `{"summary":""}`), "/body/summary", "length_out_of_range"},
		{"summary missing", withKind("observation", `{}`), "/body/summary", "summary_required"},
		{"summary newline ok", withKind("intent", `{"summary":"a\nb\r\n\u0001"}`), "", ""},
		{"detail 1001", withKind("ack.seen", `{"target_event_id":"`+a+`","detail":`+jsonText(1001)+`}`, a), "/body/detail", "length_out_of_range"},
		{"next_safe_action 1000", withKind("handoff", `{"summary":"s","next_safe_action":`+jsonText(1000)+`}`), "", ""},
		{"next_safe_action 1001", withKind("handoff", `{"summary":"s","next_safe_action":`+jsonText(1001)+`}`), "/body/next_safe_action", "length_out_of_range"},
		{"handoff summary 2000", withKind("handoff", `{"summary":`+jsonText(2000)+`,"next_safe_action":"n"}`), "", ""},
		{"handoff summary 2001", withKind("handoff", `{"summary":`+jsonText(2001)+`,"next_safe_action":"n"}`), "/body/summary", "length_out_of_range"},
		{"handoff_id", withKind("handoff", `{"summary":"s","next_safe_action":"n","handoff_id":"x"}`), "/body/handoff_id", "uuid_invalid"},
		{"handoff missing next", withKind("handoff", `{"summary":"s"}`), "/body/next_safe_action", "next_safe_action_required"},
		{"raise 2", withKind("conflict.raise", `{"target_event_ids":["`+a+`","`+b+`"]}`, a, b), "", ""},
		{"raise 1", withKind("conflict.raise", `{"target_event_ids":["`+a+`"]}`, a), "/body/target_event_ids", "item_count_out_of_range"},
		{"raise 16", withKind("conflict.raise", `{"target_event_ids":["`+strings.Join(ids16, `","`)+`"]}`, ids16...), "", ""},
		{"raise 17", withKind("conflict.raise", `{"target_event_ids":["`+strings.Join(ids17, `","`)+`"]}`, ids16...), "", "multi"},
		{"resolve 1", withKind("conflict.resolve", `{"target_event_ids":["`+a+`"],"summary":"s"}`, a), "", ""},
		{"resolve 0", withKind("conflict.resolve", `{"target_event_ids":[],"summary":"s"}`), "/body/target_event_ids", "item_count_out_of_range"},
		{"resolve 16", withKind("conflict.resolve", `{"target_event_ids":["`+strings.Join(ids16, `","`)+`"],"summary":"s"}`, ids16...), "", ""},
		{"resolve duplicate", withKind("conflict.resolve", `{"target_event_ids":["`+a+`","`+a+`"],"summary":"s"}`, a), "/body/target_event_ids/1", "duplicate_item"},
		{"resolve result_revision", withKind("conflict.resolve", `{"target_event_ids":["`+a+`"],"summary":"s","result_revision":"x"}`, a), "/body/result_revision", "git_revision_invalid"},
		{"repair 17", withKind("repair", `{"target_event_ids":["`+strings.Join(ids17, `","`)+`"],"summary":"s"}`, ids16...), "", "multi"},
		{"repair missing summary", withKind("repair", `{"target_event_ids":["`+a+`"]}`, a), "/body/summary", "summary_required"},
		{"ack.applied 64 hex", withKind("ack.applied", `{"target_event_id":"`+a+`","result_revision":"`+strings.Repeat("c", 64)+`"}`, a), "", ""},
		{"ack.applied missing revision", withKind("ack.applied", `{"target_event_id":"`+a+`"}`, a), "/body/result_revision", "result_revision_required"},
		{"ack target missing", withKind("ack.rejected", `{}`), "/body/target_event_id", "target_event_id_required"},
		{"resume target not in parents", withKind("resume", `{"target_event_id":"`+a+`"}`), "/parents", "reference_not_in_parents"},
		{"refusal target", withKind("refusal", `{"target_event_id":"`+a+`","detail":"no"}`, a), "", ""},
		{"refusal target not in parents", withKind("refusal", `{"target_event_id":"`+a+`"}`), "/parents", "reference_not_in_parents"},
		{"pause until null", withKind("pause", `{"until":null}`), "", ""},
		{"rest until", withKind("rest", `{"until":"2026-07-19T12:00:00.000Z","detail":"lunch"}`), "", ""},
		{"rest until offset", withKind("rest", `{"until":"2026-07-19T12:00:00.000+02:00"}`), "/body/until", "timestamp_offset_not_admitted"},
		{"pause until number", withKind("pause", `{"until":0}`), "/body/until", "invalid_type"},
		{"close summary", withKind("close", `{"summary":"bye"}`), "", ""},
		{"close unknown", withKind("close", `{"reason":"x"}`), "/body/reason", "unknown_body_field"},
		{"artifact patch", withKind("artifact.offer", `{"artifact":{"kind":"git_patch","digest":"`+a+`","locator":"https://x.test/p"},"summary":"s"}`), "", ""},
		{"artifact content", withKind("artifact.offer", `{"artifact":{"kind":"content_digest","digest":"`+a+`"}}`), "", ""},
		{"artifact commit 64", withKind("artifact.offer", `{"artifact":{"kind":"git_commit","revision":"`+strings.Repeat("d", 64)+`"}}`), "", ""},
		{"artifact commit with digest", withKind("artifact.offer", `{"artifact":{"kind":"git_commit","revision":"`+strings.Repeat("d", 40)+`","digest":"`+a+`"}}`), "/body/artifact/digest", "unknown_body_field"},
		{"artifact patch with revision", withKind("artifact.offer", `{"artifact":{"kind":"git_patch","digest":"`+a+`","revision":"`+strings.Repeat("d", 40)+`"}}`), "/body/artifact/revision", "unknown_body_field"},
		{"artifact kind", withKind("artifact.offer", `{"artifact":{"kind":"tarball","digest":"`+a+`"}}`), "/body/artifact/kind", "artifact_kind_invalid"},
		{"artifact no kind", withKind("artifact.offer", `{"artifact":{"digest":"`+a+`"}}`), "/body/artifact/kind", "kind_required"},
		{"artifact digest", withKind("artifact.offer", `{"artifact":{"kind":"git_patch","digest":"sha1:abc"}}`), "/body/artifact/digest", "digest_invalid"},
		{"artifact missing digest", withKind("artifact.offer", `{"artifact":{"kind":"git_patch"}}`), "/body/artifact/digest", "digest_required"},
		{"artifact locator relative", withKind("artifact.offer", `{"artifact":{"kind":"git_patch","digest":"`+a+`","locator":"a/b"}}`), "/body/artifact/locator", "locator_invalid"},
		{"artifact locator 2048", withKind("artifact.offer", `{"artifact":{"kind":"git_patch","digest":"`+a+`","locator":"x:`+strings.Repeat("a", 2046)+`"}}`), "", ""},
		{"artifact locator 2049", withKind("artifact.offer", `{"artifact":{"kind":"git_patch","digest":"`+a+`","locator":"x:`+strings.Repeat("a", 2047)+`"}}`), "/body/artifact/locator", "length_out_of_range"},
		{"artifact missing", withKind("artifact.offer", `{"summary":"s"}`), "/body/artifact", "artifact_required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := base
			if tc.name == "not an object" {
				issues := correspondence.Validate(canonicaljson.ArrayValue())
				if len(issues) != 1 || issues[0].Pointer != "" || issues[0].Code != "invalid_type" {
					t.Errorf("issues = %+v", issues)
				}
				return
			}
			for _, c := range tc.changes {
				ev = edit(t, ev, c.ptr, c.v)
			}
			issues := correspondence.Validate(ev)
			switch {
			case tc.code == "":
				if issues != nil {
					t.Errorf("issues = %+v, want none", issues)
				}
			case tc.code == "multi":
				if len(issues) < 2 {
					t.Errorf("issues = %+v, want several", issues)
				}
			default:
				if len(issues) != 1 || issues[0].Pointer != tc.ptr || issues[0].Code != tc.code {
					t.Errorf("issues = %+v, want exactly %s %s", issues, tc.ptr, tc.code)
				}
			}
			for _, is := range issues {
				if is.Message == "" || strings.Contains(is.Message, "\u00e9") {
					t.Errorf("bad message %+v", is)
				}
			}
			// ParseEvent agrees with Validate.
			raw, err := canonicaljson.Canonical(ev)
			if err != nil {
				t.Fatal(err)
			}
			_, perr := correspondence.ParseEvent(raw)
			if (perr == nil) != (issues == nil) {
				t.Errorf("ParseEvent err = %v, Validate issues = %d", perr, len(issues))
			}
		})
	}
}

// TestBoundMessages: a length or item-count issue keeps its stable code
// and says which member missed which bound, and by how much, without
// quoting the input.
func TestBoundMessages(t *testing.T) {
	base := claimOpenEvent(t)
	summary := func(s string) canonicaljson.Value {
		b := mustParse(t, []byte(`{"summary":"`+s+`"}`))
		return edit(t, edit(t, base, "/kind", str("intent")), "/body", &b)
	}
	for _, tc := range []struct {
		name      string
		ev        canonicaljson.Value
		ptr, code string
		message   string
	}{
		{"summary 70000", summary(strings.Repeat("é", 70000)), "/body/summary", "length_out_of_range",
			"summary: at most 1000 Unicode scalar values, got 70000"},
		{"summary empty", summary(""), "/body/summary", "length_out_of_range",
			"summary: at least 1 Unicode scalar value, got 0"},
		{"repository_id 257", edit(t, base, "/repository_id", str(strings.Repeat("r", 257))), "/repository_id", "length_out_of_range",
			"repository_id: at most 256 Unicode scalar values, got 257"},
		{"path 257", edit(t, base, "/scope/paths", strArray(strings.Repeat("p", 257))), "/scope/paths/0", "length_out_of_range",
			"paths[0]: at most 256 Unicode scalar values, got 257"},
		{"paths none", edit(t, base, "/scope/paths", strArray()), "/scope/paths", "item_count_out_of_range",
			"paths: at least 1 item, got 0"},
		{"parents 17", edit(t, base, "/parents", strArray(eventIDs(17)...)), "/parents", "item_count_out_of_range",
			"parents: at most 16 items, got 17"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			issues := correspondence.Validate(tc.ev)
			if len(issues) != 1 || issues[0].Pointer != tc.ptr || issues[0].Code != tc.code || issues[0].Message != tc.message {
				t.Fatalf("issues %+v, want %s %s %q", issues, tc.ptr, tc.code, tc.message)
			}
		})
	}
}
