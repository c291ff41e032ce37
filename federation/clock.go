package federation

import "time"

// ClockTolerance is how much earlier than the previous record's from the
// same remote a record's received_at may be: a remote's receipts only
// grow, so a record dated earlier than that is refused for good
// (ReasonReceiptBackdated), and a lying remote cannot backdate a record
// into a revoked key's active window ("Revoked keys") by more than this.
const ClockTolerance = 2 * time.Second

// remoteClock is the newest remote receipt a link has seen: the highest
// received_seq taken and the latest received_at up to it.
type remoteClock struct {
	seq int64
	at  time.Time
}

// clockOK checks a record's remote receipt against the receipts seen
// before it: against the newest (the highest received_seq taken, pushed
// or fetched) when the record follows it, and against its predecessor in
// its page (prev, zero for none). It remembers a record that follows the
// newest. Not checked: the first record a link sees after it starts (the
// clock is not stored), and a record fetched behind the newest whose page
// predecessor is missing.
func (l *link) clockOK(seq int64, at time.Time, prev time.Time) bool {
	if !prev.IsZero() && at.Before(prev.Add(-ClockTolerance)) {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq <= l.clock.seq {
		return true
	}
	if !l.clock.at.IsZero() && at.Before(l.clock.at.Add(-ClockTolerance)) {
		return false
	}
	l.clock = remoteClock{seq: seq, at: maxTime(l.clock.at, at)}
	return true
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
