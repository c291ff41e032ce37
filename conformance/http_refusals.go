package conformance

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// refusals checks the stable codes of refused appends and reads.
func (h *httpRun) refusals(ctx context.Context, g *Group) {
	file, err := seedVectors()
	if err != nil {
		g.fail("%v", err)
		return
	}
	intent := func() *correspondence.Event {
		return h.event(h.repo, "intent", canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue("refused")}))
	}
	expect := func(name string, r response, err error, status int, code string) {
		if err == nil {
			err = r.expectError(status, code)
		}
		g.record(name, err)
	}
	canonical := func(e *correspondence.Event) []byte { b, _ := e.CanonicalJSON(); return b }

	// The strict profile's reason codes, on whole request bodies (spec §2).
	var rejections []rejectionVector
	if decodeList(g, file["rejection_vectors"], &rejections) {
		for _, v := range rejections {
			r, err := h.post(ctx, []byte(v.JSON))
			expect("rejection "+v.Name, r, err, http.StatusBadRequest, v.Reason)
		}
	}
	dup := canonical(intent())
	dup = append([]byte(`{"kind":"intent",`), dup[1:]...)
	r, err := h.post(ctx, dup)
	expect("duplicate member", r, err, http.StatusBadRequest, "duplicate_object_name")

	// Bodies the schema refuses: event_invalid with the vector's issue code.
	var invalid []kindBody
	if decodeList(g, file["invalid_body_vectors"], &invalid) {
		for _, v := range invalid {
			body, err := canonicaljson.ParseObject(v.Body)
			if err != nil {
				g.fail("invalid body %s: %v", v.Reason, err)
				continue
			}
			r, err := h.post(ctx, canonical(h.event(h.repo, v.Kind, body)))
			if err == nil {
				err = r.expectError(http.StatusBadRequest, "event_invalid")
			}
			if err == nil {
				var eb struct {
					Issues []struct {
						Pointer string `json:"pointer"`
						Code    string `json:"code"`
					} `json:"issues"`
				}
				_ = json.Unmarshal(r.body, &eb)
				if len(eb.Issues) != 1 || eb.Issues[0].Code != v.Reason || !strings.HasPrefix(eb.Issues[0].Pointer, "/body") {
					err = fmt.Errorf("issues %+v, want exactly one %s under /body", eb.Issues, v.Reason)
				}
			}
			g.record("invalid body "+v.Kind+" "+v.Reason, err)
		}
	}
	noParents := h.event(h.repo, "ack.seen", canonicaljson.ObjectValue(canonicaljson.Member{Name: "target_event_id", Value: canonicaljson.StringValue("sha256:" + strings.Repeat("c", 64))}))
	noParents.Parents = []string{}
	_ = noParents.Sign(h.priv)
	r, err = h.post(ctx, canonical(noParents))
	if err == nil {
		err = r.expectError(http.StatusBadRequest, "event_invalid")
		if err == nil && !bytes.Contains(r.body, []byte(`"reference_not_in_parents"`)) {
			err = errors.New("no reference_not_in_parents issue")
		}
	}
	g.record("reference not in parents", err)

	// Signature, event id and sender (spec §6).
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	forged := intent()
	_ = forged.Sign(other)
	r, err = h.post(ctx, canonical(forged))
	expect("signature by another key", r, err, http.StatusForbidden, "signature_invalid")

	mismatch := intent()
	mismatch.ID = "sha256:" + strings.Repeat("0", 64)
	r, err = h.post(ctx, canonical(mismatch))
	expect("event_id mismatch", r, err, http.StatusBadRequest, "event_id_mismatch")

	enc := intent()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, enc.Signature[85])
	enc.Signature = enc.Signature[:85] + string(alphabet[last|1]) // nonzero padding bits
	r, err = h.post(ctx, canonical(enc))
	expect("non-canonical base64url signature", r, err, http.StatusBadRequest, "signature_encoding_invalid")

	wrongProject := intent()
	wrongProject.ProjectID = newUUID()
	_ = wrongProject.Sign(h.priv)
	r, err = h.post(ctx, canonical(wrongProject))
	expect("project of another bearer", r, err, http.StatusForbidden, "project_mismatch")

	unknownKey := intent()
	unknownKey.Sender.SigningKeyID = newUUID()
	_ = unknownKey.Sign(h.priv)
	r, err = h.post(ctx, canonical(unknownKey))
	expect("unregistered signing key", r, err, http.StatusForbidden, "sender_or_signing_key_not_active")

	// Nesting (spec §2): 64 levels are the content's to judge, 65 are
	// refused before anything else, arrays and objects alike.
	deep := func(n int, open, close string) []byte {
		return []byte(`{"x":` + strings.Repeat(open, n-1) + "null" + strings.Repeat(close, n-1) + `}`)
	}
	r, err = h.post(ctx, deep(64, "[", "]"))
	if err == nil && r.status == http.StatusBadRequest && r.errorCode() == "json_depth_exceeded" {
		err = errors.New("refused as json_depth_exceeded at depth 64, the bound")
	} else if err == nil && r.status < 400 {
		err = fmt.Errorf("status %d, want a refusal", r.status)
	}
	g.record("arrays 64 deep are not json_depth_exceeded", err)
	r, err = h.post(ctx, deep(65, "[", "]"))
	expect("arrays 65 deep", r, err, http.StatusBadRequest, "json_depth_exceeded")
	r, err = h.post(ctx, deep(65, `{"a":`, "}"))
	expect("objects 65 deep", r, err, http.StatusBadRequest, "json_depth_exceeded")
	r, err = h.post(ctx, append([]byte(`{"x":1,`), deep(65, "[", "]")[1:]...))
	expect("65 deep with a duplicate member: depth first", r, err, http.StatusBadRequest, "json_depth_exceeded")

	// Transport refusals (spec §3, §9, §10).
	r, err = h.do(ctx, "POST", "/v1/correspondence/events", h.rw, canonical(intent()), "Content-Type", "text/plain")
	expect("text/plain body", r, err, http.StatusUnsupportedMediaType, "content_type_unsupported")
	big := canonical(h.event(h.repo, "intent", canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue(strings.Repeat("x", 70000))})))
	r, err = h.post(ctx, big)
	expect("body over 65536 bytes", r, err, http.StatusRequestEntityTooLarge, "body_too_large")
	r, err = h.do(ctx, "POST", "/v1/correspondence/events", h.ro, canonical(intent()))
	expect("read-only token appends", r, err, http.StatusForbidden, "scope_insufficient")
	r, err = h.do(ctx, "POST", "/v1/correspondence/events", "", canonical(intent()))
	if err == nil {
		err = r.expectError(http.StatusUnauthorized, "")
		if err == nil && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			err = errors.New("401 without a Bearer WWW-Authenticate challenge")
		}
	}
	g.record("no bearer token", err)
	r, err = h.do(ctx, "GET", "/v1/correspondence/events?"+h.query()+"&bogus=1", h.ro, nil)
	expect("unknown query parameter", r, err, http.StatusBadRequest, "")
	r, err = h.do(ctx, "GET", "/v1/correspondence/events", h.ro, nil)
	expect("read without repository_id", r, err, http.StatusBadRequest, "")
}
