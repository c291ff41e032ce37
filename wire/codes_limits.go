package wire

// Codes of the relay's limits (docs/operating.md "Limits"): a rate answers
// 429 with Retry-After; a cap of the embedded WebSub hub answers 409
// (the topic, host or project holds as many subscriptions as the operator
// allows; one must end before another is made).
const (
	// CodeRateLimited: too many requests from this client address
	// (unauthenticated routes) or with this token (authenticated writes);
	// retry after Retry-After seconds.
	CodeRateLimited = "rate_limited" // 429

	CodeHubTopicSubscriptionsLimit   = "hub_topic_subscriptions_limit"   // 409: the topic has --websub-max-subscriptions-per-topic
	CodeHubHostSubscriptionsLimit    = "hub_host_subscriptions_limit"    // 409: the callback's host has --websub-max-subscriptions-per-host
	CodeHubProjectSubscriptionsLimit = "hub_project_subscriptions_limit" // 409: the project has --websub-max-subscriptions-per-project
	CodeHubHostVerificationsLimit    = "hub_host_verifications_limit"    // 409 with Retry-After: the callback's host has --websub-max-pending-per-host verifications waiting
)
