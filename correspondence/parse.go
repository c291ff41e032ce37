package correspondence

import "github.com/acrelay/acrelay/canonicaljson"

// ParseEvent parses raw under the strict profile, validates it and returns
// the typed event. Errors: *canonicaljson.ProfileError, *ValidationError.
// It does not verify the signature or the event id.
func ParseEvent(raw []byte) (*Event, error) {
	v, err := canonicaljson.ParseObject(raw)
	if err != nil {
		return nil, err
	}
	return EventFromValue(v)
}

// EventFromValue validates an already parsed event and returns it typed.
// Error: *ValidationError.
func EventFromValue(v canonicaljson.Value) (*Event, error) {
	if issues := Validate(v); issues != nil {
		return nil, newValidationError(issues)
	}
	e := &Event{}
	for i := range v.Members {
		m := &v.Members[i].Value
		switch v.Members[i].Name {
		case "event_id":
			e.ID = m.Str
		case "project_id":
			e.ProjectID = m.Str
		case "repository_id":
			e.RepositoryID = m.Str
		case "thread_id":
			e.ThreadID = m.Str
		case "sender":
			for _, sm := range m.Members {
				switch sm.Name {
				case "identity_id":
					e.Sender.IdentityID = sm.Value.Str
				case "signing_key_id":
					e.Sender.SigningKeyID = sm.Value.Str
				case "device_id":
					e.Sender.DeviceID = sm.Value.Str
				case "session_id":
					e.Sender.SessionID = sm.Value.Str
				}
			}
		case "kind":
			e.Kind = Kind(m.Str)
		case "parents":
			e.Parents = make([]string, len(m.Elems))
			for j := range m.Elems {
				e.Parents[j] = m.Elems[j].Str
			}
		case "session_seq":
			e.SessionSeq = m.Int
		case "issued_at":
			e.IssuedAt = m.Str
		case "scope":
			for _, sm := range m.Members {
				switch sm.Name {
				case "base_revision":
					if sm.Value.Kind == canonicaljson.String {
						s := sm.Value.Str
						e.Scope.BaseRevision = &s
					}
				case "branch":
					if sm.Value.Kind == canonicaljson.String {
						s := sm.Value.Str
						e.Scope.Branch = &s
					}
				case "paths":
					e.Scope.Paths = make([]string, len(sm.Value.Elems))
					for j := range sm.Value.Elems {
						e.Scope.Paths[j] = sm.Value.Elems[j].Str
					}
				}
			}
		case "body":
			e.Body = *m
		case "signature":
			if s, ok := m.Get("value_b64url"); ok {
				e.Signature = s.Str
			}
		}
	}
	return e, nil
}

// bodyString returns the string member name of the body, or "".
func (e *Event) bodyString(name string) string {
	if m, ok := e.Body.Get(name); ok && m.Kind == canonicaljson.String {
		return m.Str
	}
	return ""
}

// ClaimFields are the lineage members of a claim event's body.
type ClaimFields struct {
	ClaimID            string
	Generation         int64
	PredecessorEventID string // empty for claim.open
	ExpiresAt          string // empty for claim.release
}

// Claim returns the claim fields of a claim.* event; ok is false otherwise.
func (e *Event) Claim() (c ClaimFields, ok bool) {
	if !e.Kind.IsClaim() {
		return c, false
	}
	c.ClaimID = e.bodyString("claim_id")
	if g, ok := e.Body.Get("generation"); ok && g.Kind == canonicaljson.Int {
		c.Generation = g.Int
	}
	c.PredecessorEventID = e.bodyString("predecessor_event_id")
	c.ExpiresAt = e.bodyString("expires_at")
	return c, true
}

// ReferencedEventIDs returns the event ids the body references
// (predecessor_event_id, target_event_id, target_event_ids), in body
// member order; nil when there are none.
func (e *Event) ReferencedEventIDs() []string {
	var ids []string
	for i := range e.Body.Members {
		m := &e.Body.Members[i]
		switch m.Name {
		case "predecessor_event_id", "target_event_id":
			if m.Value.Kind == canonicaljson.String {
				ids = append(ids, m.Value.Str)
			}
		case "target_event_ids":
			for _, t := range m.Value.Elems {
				if t.Kind == canonicaljson.String {
					ids = append(ids, t.Str)
				}
			}
		}
	}
	return ids
}

// HandoffID returns body.handoff_id of a handoff event, or "".
func (e *Event) HandoffID() string {
	if e.Kind != KindHandoff {
		return ""
	}
	return e.bodyString("handoff_id")
}
