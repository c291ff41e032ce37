package hub

import "context"

// DenyRevokedAll runs one periodic revoked-token check now.
func (h *Hub) DenyRevokedAll(ctx context.Context) error { return h.denyRevokedAll(ctx) }
