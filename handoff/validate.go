package handoff

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/acrelay/acrelay/canonicaljson"
)

// SchemaJSON is the seed's JSON Schema for handoff contracts (draft
// 2020-12), byte for byte as the user supplied it.
//
//go:embed contract.schema.json
var SchemaJSON []byte

// SchemaID is the schema's $id.
const SchemaID = "https://ghassan-alhamoud.com/resources/agent-handoff-contract.schema.json"

// Issue is one schema violation: Pointer is the RFC 6901 location of the
// offending value in the instance ("" for the whole document) and Message
// the validator's English explanation of the failed keyword. A message may
// quote the offending value or member name.
type Issue struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

func (i Issue) String() string { return i.Pointer + ": " + i.Message }

var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(SchemaJSON))
	if err != nil {
		return nil, fmt.Errorf("read contract schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat() // uuid and date-time are assertions, not annotations
	if err := c.AddResource(SchemaID, doc); err != nil {
		return nil, fmt.Errorf("add contract schema: %w", err)
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		return nil, fmt.Errorf("compile contract schema: %w", err)
	}
	return s, nil
})

// Validate checks raw as a handoff contract (spec/handoff-contract-1.md
// "Validation"): first the strict JSON profile, then the seed schema with
// format assertions on.
//
// It returns the decoded Contract when raw is valid; the schema violations
// (sorted by pointer, then message; Contract zero) when it is not; and an
// error only when raw is outside the strict profile or not an object
// (*canonicaljson.ProfileError, checked before the schema, so a duplicate
// member is duplicate_object_name and never a schema issue).
func Validate(raw []byte) (Contract, []Issue, error) {
	doc, err := canonicaljson.ParseObject(raw)
	if err != nil {
		return Contract{}, nil, err
	}
	return validateValue(doc)
}

// Check validates a contract built or changed in code (for example the
// result of Transition, whose result lists must still be unique) by the
// same rules as Validate, on its normalized form.
func Check(c Contract) ([]Issue, error) {
	b, err := c.Canonical()
	if err != nil {
		return nil, err
	}
	_, issues, err := Validate(b)
	return issues, err
}

func validateValue(doc canonicaljson.Value) (Contract, []Issue, error) {
	schema, err := compiled()
	if err != nil {
		return Contract{}, nil, err
	}
	if err := schema.Validate(instance(doc)); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return Contract{}, nil, fmt.Errorf("validate contract: %w", err)
		}
		return Contract{}, issuesOf(ve), nil
	}
	b, err := canonicaljson.Canonical(doc)
	if err != nil {
		return Contract{}, nil, err
	}
	var c Contract
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		// The schema is closed and typed, so a valid document decodes.
		return Contract{}, nil, fmt.Errorf("decode valid contract: %w", err)
	}
	return c, nil, nil
}

// instance turns a strict-profile value into what the validator expects:
// map[string]any, []any, string, bool, nil, and json.Number for integers
// (so "integer", "minimum" and "maximum" see exact values).
func instance(v canonicaljson.Value) any {
	switch v.Kind {
	case canonicaljson.Bool:
		return v.Bool
	case canonicaljson.Int:
		return json.Number(strconv.FormatInt(v.Int, 10))
	case canonicaljson.String:
		return v.Str
	case canonicaljson.Array:
		a := make([]any, len(v.Elems))
		for i, e := range v.Elems {
			a[i] = instance(e)
		}
		return a
	case canonicaljson.Object:
		m := make(map[string]any, len(v.Members))
		for _, mem := range v.Members {
			m[mem.Name] = instance(mem.Value)
		}
		return m
	}
	return nil
}

// issuesOf flattens the validator's error tree into its leaves: each is
// one failed keyword at one instance location.
func issuesOf(ve *jsonschema.ValidationError) []Issue {
	var issues []Issue
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		if len(u.Errors) == 0 {
			msg := "invalid"
			if u.Error != nil {
				msg = u.Error.String()
			}
			issues = append(issues, Issue{Pointer: u.InstanceLocation, Message: msg})
			return
		}
		for _, c := range u.Errors {
			walk(c)
		}
	}
	walk(*ve.DetailedOutput())
	slices.SortFunc(issues, func(a, b Issue) int {
		if c := strings.Compare(a.Pointer, b.Pointer); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.Compact(issues)
}
