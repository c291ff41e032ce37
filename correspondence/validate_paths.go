package correspondence

import "unicode/utf8"

// pathCode returns "" when p is a valid path prefix (spec §4), else the
// issue code: length_out_of_range outside 1–256 scalar values, else
// path_invalid.
func pathCode(p string) string {
	n := 0
	bad := false
	segStart := 0
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			switch {
			case c < 0x20 || c == 0x7f:
				bad = true
			case c == '\\' || c == '*' || c == '?' || c == '[' || c == ']' || c == '{' || c == '}' || c == '!':
				bad = true
			case c == '/':
				if badSegment(p[segStart:i]) {
					bad = true
				}
				segStart = i + 1
			}
			i++
		} else {
			r, size := utf8.DecodeRuneInString(p[i:])
			if r == utf8.RuneError && size == 1 || isCc(r) {
				bad = true
			}
			i += size
		}
		n++
	}
	if n < 1 || n > maxPathScalars {
		return CodeLengthOutOfRange
	}
	if p == "." {
		return ""
	}
	if bad || badSegment(p[segStart:]) {
		return CodePathInvalid
	}
	return ""
}

// badSegment: a path segment may not be empty, "." or "..".
func badSegment(seg string) bool { return seg == "" || seg == "." || seg == ".." }

// ValidPath reports whether p is a valid path prefix (spec §4): "." for
// the whole repository, or 1–256 scalar values of "/"-separated segments,
// none empty, "." or "..", with no backslash, Cc control or any of
// * ? [ ] { } !. Other Unicode (U+2026 included) is admitted.
func ValidPath(p string) bool { return pathCode(p) == "" }

// PathsOverlap reports whether prefixes a and b overlap (spec §4): either
// is ".", they are equal, or one equals the other plus "/" and more
// segments. Comparison is byte for byte and case-sensitive.
func PathsOverlap(a, b string) bool {
	if a == "." || b == "." || a == b {
		return true
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	return len(b) > len(a) && b[len(a)] == '/' && b[:len(a)] == a
}

// locatorCode: 1–2048 scalar values; ASCII scheme [A-Za-z][A-Za-z0-9+.-]*,
// ":", then no Unicode whitespace, U+FEFF or Cc anywhere (spec §4).
func locatorCode(s string) string {
	n, bad := countNoSpaceNoCc(s)
	if n < 1 || n > maxLocatorScalars {
		return CodeLengthOutOfRange
	}
	if bad || !hasScheme(s) {
		return CodeLocatorInvalid
	}
	return ""
}

func hasScheme(s string) bool {
	if s == "" || !(s[0] >= 'A' && s[0] <= 'Z' || s[0] >= 'a' && s[0] <= 'z') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':':
			return true
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '.', c == '-':
		default:
			return false
		}
	}
	return false
}

// ValidLocator reports whether s is a valid artifact locator (spec §4).
func ValidLocator(s string) bool { return locatorCode(s) == "" }
