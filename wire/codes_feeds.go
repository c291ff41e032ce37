package wire

// Codes of public projects and feed capabilities (spec/websub.md "Topics").
const (
	CodeVisibilityInvalid = "visibility_invalid" // 400: not "public" or "private"
)
