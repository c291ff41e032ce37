package atom

import (
	"bytes"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"
)

// Namespace is the XML namespace of acrelay's foreign Atom elements.
const Namespace = "https://agenttool.dev/ns/correspondence"

// HistoryNamespace is the namespace of RFC 5005's <fh:archive/>.
const HistoryNamespace = "http://purl.org/syndication/history/1.0"

// Link is an Atom <link> element.
type Link struct {
	Rel, Type, Href string
}

// LinkTemplate is the foreign <at:link-template> element.
type LinkTemplate struct {
	Template, Rel, Type string
}

// Entry is one record. Record is the RFC 8785 JSON {event, receipt}.
type Entry struct {
	EventID      string
	Kind         string
	RepositoryID string
	ThreadID     string
	ReceivedAt   time.Time
	Record       []byte
	// Author is the sender identity's display name, "" for its identity
	// id. It must be fixed for the record's life (the registry never
	// changes a display name), or the entry would change.
	Author string
	// Link is the URL of the record's own HTML page (rel="alternate"),
	// reachable by whoever holds the feed's URL; "" for none. It must be
	// fixed for a given feed URL.
	Link string
}

// Feed is one Atom feed document: a page of a project's records.
type Feed struct {
	ID           string
	Title        string
	Updated      time.Time
	Links        []Link
	LinkTemplate *LinkTemplate
	// Archive marks an RFC 5005 §4 archive document: <fh:archive/>, with
	// the history namespace declared on <feed>.
	Archive bool
	Entries []Entry
}

// TimeFormat is the RFC 3339 form used for <updated>: UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Render returns the feed's bytes: UTF-8, with an XML declaration, entries
// in the order given (receipt order). The slice's capacity is its length:
// a caller that keeps the bytes (the couriers' body cache counts len) holds
// no slack.
func Render(f Feed) []byte {
	size := 1024
	for _, e := range f.Entries {
		size += entryEstimate(e)
	}
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(`<?xml version="1.0" encoding="utf-8"?>` + "\n")
	b.WriteString(`<feed xmlns="http://www.w3.org/2005/Atom" xmlns:at="` + Namespace + `"`)
	if f.Archive {
		b.WriteString(` xmlns:fh="` + HistoryNamespace + `"`)
	}
	b.WriteString(">\n")
	element(&b, "  ", "id", f.ID)
	element(&b, "  ", "title", f.Title)
	element(&b, "  ", "updated", f.Updated.UTC().Format(TimeFormat))
	b.WriteString("  <author><name>acrelay</name></author>\n")
	b.WriteString("  <generator>acrelay</generator>\n")
	for _, l := range f.Links {
		b.WriteString(`  <link rel="`)
		attr(&b, l.Rel)
		if l.Type != "" {
			b.WriteString(`" type="`)
			attr(&b, l.Type)
		}
		b.WriteString(`" href="`)
		attr(&b, l.Href)
		b.WriteString("\"/>\n")
	}
	if t := f.LinkTemplate; t != nil {
		b.WriteString(`  <at:link-template template="`)
		attr(&b, t.Template)
		b.WriteString(`" rel="`)
		attr(&b, t.Rel)
		b.WriteString(`" type="`)
		attr(&b, t.Type)
		b.WriteString("\"/>\n")
	}
	if f.Archive {
		b.WriteString("  <fh:archive/>\n")
	}
	for _, e := range f.Entries {
		writeEntry(&b, e)
	}
	b.WriteString("</feed>\n")
	if out := b.Bytes(); cap(out)-len(out) > len(out)/8 {
		return bytes.Clone(out)
	}
	return b.Bytes()
}

// entryEstimate is a generous size of e's bytes: its record JSON (escaped
// at most a little), the content HTML (bounded by ContentMaxValues values
// per fact, so rarely more than half the record) and the rest.
func entryEstimate(e Entry) int {
	return 2048 + len(e.EventID) + len(e.Author) + len(e.Link) + len(e.Record)*3/2
}

// EntryBytes returns one entry's bytes, a pure function of e: the same
// record always renders identically.
//
// Title: the kind's label and the event's own words (Description.Title);
// author: e.Author, else the sender's identity id; link: e.Link as
// rel="alternate" type="text/html"; content type="html": the record as a
// person reads it (Description.HTML), escaped twice (HTML, then XML), so
// no agent-controlled string is ever live markup; <at:record>: the exact
// {event, receipt} JSON, for machines.
func EntryBytes(e Entry) []byte {
	var b bytes.Buffer
	b.Grow(entryEstimate(e))
	writeEntry(&b, e)
	return b.Bytes()
}

// writeEntry writes EntryBytes(e) to b.
func writeEntry(b *bytes.Buffer, e Entry) {
	d, _ := Describe(e.Kind, e.Record)
	if d.EventID == "" {
		d.EventID = e.EventID
	}
	author := e.Author
	if author == "" {
		author = d.SenderID
	}
	if author == "" {
		author = "unknown sender"
	}
	title, content := d.Title(), d.HTML(author)
	b.WriteString("  <entry>\n")
	element(b, "    ", "id", e.EventID)
	element(b, "    ", "title", title)
	element(b, "    ", "updated", e.ReceivedAt.UTC().Format(TimeFormat))
	b.WriteString("    <author><name>")
	escape(b, author, false)
	b.WriteString("</name></author>\n")
	if e.Link != "" {
		b.WriteString(`    <link rel="alternate" type="text/html" href="`)
		attr(b, e.Link)
		b.WriteString("\"/>\n")
	}
	b.WriteString(`    <content type="html">`)
	escape(b, content, false)
	b.WriteString("</content>\n")
	b.WriteString(`    <at:record type="application/json">`)
	jsonText(b, e.Record)
	b.WriteString("</at:record>\n")
	b.WriteString("  </entry>\n")
}

func element(b *bytes.Buffer, indent, name, text string) {
	b.WriteString(indent + "<" + name + ">")
	escape(b, text, false)
	b.WriteString("</" + name + ">\n")
}

func attr(b *bytes.Buffer, s string) { escape(b, s, true) }

// isXMLChar reports whether r may appear in an XML 1.0 document (§2.2 Char).
func isXMLChar(r rune) bool {
	return r == 0x9 || r == 0xA || r == 0xD ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

// escape writes s as XML character data (or an attribute value), replacing
// anything XML 1.0 cannot hold with U+FFFD: titles and links are human text.
func escape(b *bytes.Buffer, s string, inAttr bool) {
	for _, r := range s {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '"' && inAttr:
			b.WriteString("&quot;")
		case (r == '\n' || r == '\r' || r == '\t') && inAttr:
			b.WriteString("&#x" + strconv.FormatInt(int64(r), 16) + ";")
		case r == '\r':
			b.WriteString("&#xD;")
		case !isXMLChar(r):
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(r)
		}
	}
}

// jsonText writes RFC 8785 JSON as XML character data. JSON strings cannot
// hold raw controls after canonicalization; characters XML cannot hold
// (U+FFFE, U+FFFF) appear only inside JSON strings, where the equivalent
// JSON escape keeps the value unchanged.
func jsonText(b *bytes.Buffer, js []byte) {
	for i := 0; i < len(js); {
		c := js[i]
		if c < utf8.RuneSelf {
			switch c {
			case '&':
				b.WriteString("&amp;")
			case '<':
				b.WriteString("&lt;")
			case '>':
				b.WriteString("&gt;")
			case '\r':
				b.WriteString("&#xD;")
			default:
				if c < 0x20 && c != '\n' && c != '\t' {
					b.WriteString(`\u00`)
					b.WriteByte("0123456789abcdef"[c>>4])
					b.WriteByte("0123456789abcdef"[c&0xF])
				} else {
					b.WriteByte(c)
				}
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(js[i:])
		if isXMLChar(r) {
			b.Write(js[i : i+n])
		} else {
			b.WriteString(`\u` + strconv.FormatInt(int64(r), 16))
		}
		i += n
	}
}

// RecordPageURL is the URL of a record's HTML page for the readers of a
// topic (its WebSub deliveries, its current document and archives):
// {base}/ui/projects/{project_id}/records/{received_seq}.html?repository_id=R,
// a page of the web view, open to everyone for a public project and
// behind the web view's sign-in otherwise (relay/recordpage.go). A feed
// capability's entries link under the capability instead.
func RecordPageURL(base, projectID, repositoryID string, receivedSeq int64) string {
	return base + "/ui/projects/" + url.PathEscape(projectID) + "/records/" + strconv.FormatInt(receivedSeq, 10) +
		".html?repository_id=" + url.QueryEscape(repositoryID)
}
