// Package matrix is the Matrix courier (spec/matrix.md): out, every record
// of a bound project reaches its room as an
// io.github.acrelay.correspondence.record event plus an m.notice summary
// carrying the same record, in receipt order, from the runner's durable
// cursor; in, a room member's io.github.acrelay.correspondence.submit is
// appended through ingest and answered with exactly one m.notice reply.
//
// Exactly once, as far as the room can tell: each part's transaction id is
// derived from (room, event_id, part); each part that reached the room is
// recorded in the store (store.Matrix); the runner never runs two
// deliveries of one target at once; and after a failure or a restart the
// courier scans the room's recent history for the records it is about to
// send before sending them, because the homeserver's transaction-id
// de-duplication is in memory only (Dendrite loses it on restart).
// Submissions are queued durably by Matrix event id and answered once;
// their retry state (attempts, next attempt, last error) and final outcome
// are in the store too, and the inbox claims due submissions, so any relay
// process can answer any of them and a room that refuses replies holds
// back only its own. A 429 is waited out as long as the homeserver asks
// (Retry-After or retry_after_ms, the longer). The bot's /sync reads a
// limited timeline back with /messages, so a burst of submissions while
// it was away is not cut at the filter's limit.
//
// The Check* functions are `acrelay matrix doctor`'s: homeserver reachable,
// credentials accepted, rooms postable, courier not throttled.
//
// Matrix creates no authority: a submission is accepted only when its
// signature verifies under an active key of the room's project, exactly
// as POST /v1/correspondence/events would accept it. End-to-end encrypted
// rooms (issue 31) go through a Crypto (e2ee.go): in them every part,
// notice and reply is megolm-encrypted and every m.room.encrypted event
// read is decrypted; without a Crypto they are refused, never sent
// plaintext. This package never imports mautrix/crypto (it needs the
// goolm tag to build without cgo); package e2ee does, behind the tag.
//
// It does not serve HTTP: relay serves the application-service routes and
// hands the pushed events to Inbox.Accept; the bot mode's /sync long-poll
// is Inbox.Sync.
package matrix
