package canonicaljson

// Kind is the JSON type of a Value. The profile admits no floating-point
// numbers, so there is one number kind, Int.
type Kind uint8

// The kinds of value the profile admits.
const (
	Null Kind = iota
	Bool
	Int
	String
	Array
	Object
)

func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "boolean"
	case Int:
		return "integer"
	case String:
		return "string"
	case Array:
		return "array"
	case Object:
		return "object"
	}
	return "invalid"
}

// MaxSafeInteger is 2^53-1, the largest integer the profile admits
// (its negation is the smallest).
const MaxSafeInteger = 1<<53 - 1

// Value is one JSON value of the strict profile. Exactly the field that
// matches Kind is meaningful. Objects keep their members in input order;
// names are unique (Parse refuses duplicates). The zero Value is null.
type Value struct {
	Kind    Kind
	Bool    bool
	Int     int64
	Str     string
	Elems   []Value  // Array
	Members []Member // Object
}

// Member is one name/value pair of an object.
type Member struct {
	Name  string
	Value Value
}

// NullValue, BoolValue, IntValue, StringValue, ArrayValue and ObjectValue
// build values; they are conveniences for code that constructs documents.
func NullValue() Value              { return Value{} }
func BoolValue(b bool) Value        { return Value{Kind: Bool, Bool: b} }
func IntValue(i int64) Value        { return Value{Kind: Int, Int: i} }
func StringValue(s string) Value    { return Value{Kind: String, Str: s} }
func ArrayValue(e ...Value) Value   { return Value{Kind: Array, Elems: e} }
func ObjectValue(m ...Member) Value { return Value{Kind: Object, Members: m} }

// Get returns the member named name of an object value. ok is false when v
// is not an object or has no such member.
func (v Value) Get(name string) (Value, bool) {
	if v.Kind != Object {
		return Value{}, false
	}
	for i := range v.Members {
		if v.Members[i].Name == name {
			return v.Members[i].Value, true
		}
	}
	return Value{}, false
}

// Equal reports whether a and b are the same JSON value. Object member
// order does not matter; array order does.
func Equal(a, b Value) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case Null:
		return true
	case Bool:
		return a.Bool == b.Bool
	case Int:
		return a.Int == b.Int
	case String:
		return a.Str == b.Str
	case Array:
		if len(a.Elems) != len(b.Elems) {
			return false
		}
		for i := range a.Elems {
			if !Equal(a.Elems[i], b.Elems[i]) {
				return false
			}
		}
		return true
	case Object:
		if len(a.Members) != len(b.Members) {
			return false
		}
		for _, m := range a.Members {
			o, ok := b.Get(m.Name)
			if !ok || !Equal(m.Value, o) {
				return false
			}
		}
		return true
	}
	return false
}
