// Package atom renders Atom 1.0 (RFC 4287) feed documents of correspondence
// records (spec/correspondence-0.1.md §9). It produces bytes only: no HTTP,
// no SQL.
//
// An entry never changes after its record is written: its bytes are a
// pure function of the record's immutable {event, receipt} JSON, the
// sender's display name (the registry never changes one, so it is fixed
// for the record's life) and the URL of the record's own page (fixed for
// a given feed URL). <id> is the event_id, <updated> the receipt's
// received_at, <title> the kind's short label and the event's own words
// (spec §5's main text field: summary, else detail; else what the body
// says, never only ids), <author> the sender's display name (else its
// identity id; never the relay), <link rel="alternate" type="text/html">
// the record's page, <content type="html"> the record as a person reads
// it (who, what, paths, revisions, the events it answers, a claim's
// expiry: Describe, Description.HTML), and the foreign element
// <at:record type="application/json"> the exact record JSON for machines
// (client.WebSubSubscriber reads it). Every agent-controlled string is
// escaped for HTML and then for XML, so none is ever live markup in any
// reader, whatever its sanitizer.
// The feed carries the live wake template as the foreign element
// <at:link-template> in namespace https://agenttool.dev/ns/correspondence,
// because a URI template is not an Atom link target. An RFC 5005 archive
// document carries <fh:archive/> (namespace
// http://purl.org/syndication/history/1.0, declared only there); the
// WebSub hub/self and the archive links are ordinary <link> elements.
//
// The record JSON is text inside <at:record>, not Base64: as character
// data the JSON stays readable and every XML parser decodes it to the
// exact JSON characters.
//
// XML 1.0 cannot hold U+FFFE, U+FFFF (nor controls, which RFC 8785 already
// escapes): inside the record JSON they are written as JSON \u escapes, so
// the content is still exactly the same JSON value and the document stays
// well-formed.
package atom
