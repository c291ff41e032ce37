package wire

// Media types of the relay's representations (spec §9).
const (
	MediaTypeVendorJSON = "application/vnd.agenttool.correspondence+json"
	MediaTypeJSON       = "application/json"
	MediaTypeAtom       = "application/atom+xml"
)

// Content-Type values the relay serves its JSON and Atom with (spec §9:
// "; charset=utf-8" on both). A WebSub delivery of a topic's bytes uses the
// same strings, so a subscriber sees one Content-Type whichever way the
// bytes came.
const (
	ContentTypeVendorJSON = MediaTypeVendorJSON + "; charset=utf-8"
	ContentTypeJSON       = MediaTypeJSON + "; charset=utf-8"
	ContentTypeAtom       = MediaTypeAtom + "; charset=utf-8"
)

// ContentType returns the Content-Type value for a media type: the
// ContentType* string for the three media types above, mediaType
// unchanged for any other (which then names its own parameters, if any).
func ContentType(mediaType string) string {
	switch mediaType {
	case MediaTypeVendorJSON:
		return ContentTypeVendorJSON
	case MediaTypeJSON:
		return ContentTypeJSON
	case MediaTypeAtom:
		return ContentTypeAtom
	}
	return mediaType
}
