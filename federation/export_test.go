package federation

// StatusSubscription exposes LinkStatus.Subscription to the tests.
func StatusSubscription(v any) string {
	if s, ok := v.(*LinkStatus); ok {
		return s.Subscription
	}
	return ""
}
