// Package atom renders Atom 1.0 (RFC 4287) feed documents of correspondence
// records (spec/correspondence-0.1.md §9). It produces bytes only: no HTTP,
// no SQL.
//
// An entry depends on nothing but its record's immutable {event, receipt}
// JSON, so its bytes never change after the record is written: <id> is the
// event_id, <updated> the receipt's received_at, <content> the record JSON.
// The feed carries the live wake template as the foreign element
// <at:link-template> in namespace https://agenttool.dev/ns/correspondence,
// because a URI template is not an Atom link target. An RFC 5005 archive
// document carries <fh:archive/> (namespace
// http://purl.org/syndication/history/1.0, declared only there); the
// WebSub hub/self and the archive links are ordinary <link> elements.
//
// The content element has type="text": RFC 4287 §4.1.3.3 requires Base64
// for any type that is neither text/*, "text", "html", "xhtml" nor XML, so
// application/json would have to be Base64 and unreadable to people; as a
// text construct the JSON stays readable and every feed reader decodes it
// to the exact JSON characters.
//
// XML 1.0 cannot hold U+FFFE, U+FFFF (nor controls, which RFC 8785 already
// escapes): inside the JSON content they are written as JSON \u escapes, so
// the content is still exactly the same JSON value and the document stays
// well-formed.
package atom
