package postgres

// SQL of the PostgreSQL store, one statement each. Values travel only as
// placeholders; pgx prepares and caches each statement per connection.
// nowMS is the database clock at millisecond precision (see doc.go for
// why clock_timestamp()).

const nowMS = `date_trunc('milliseconds', clock_timestamp())`

const lockStreamSQL = `SELECT pg_advisory_xact_lock($1)`

// Registry. Inserts that need a parent row select it, so an unknown parent
// gives no row (store.ErrNotFound) in the same single statement.
const (
	insertProject = `INSERT INTO projects (id, created_at) VALUES ($1, ` + nowMS + `) RETURNING created_at`
	selectProject = `SELECT id, created_at FROM projects WHERE id = $1`
	countProjects = `SELECT count(*) FROM projects`

	insertIdentity = `INSERT INTO identities (id, project_id, display_name, status, created_at)
		SELECT $1, p.id, $3, $4, ` + nowMS + ` FROM projects p WHERE p.id = $2
		RETURNING created_at`
	selectIdentity     = `SELECT id, project_id, display_name, status, created_at FROM identities WHERE project_id = $1 AND id = $2`
	deactivateIdentity = `UPDATE identities SET status = 'inactive', deactivated_at = coalesce(deactivated_at, ` + nowMS + `) WHERE project_id = $1 AND id = $2
		RETURNING id, project_id, display_name, status, created_at`
	selectActiveIdentityIDs = `SELECT id FROM identities
		WHERE project_id = $1 AND status = 'active' AND id > $2 ORDER BY id LIMIT $3`
	listIdentities = `SELECT id, project_id, display_name, status, created_at FROM identities
		WHERE project_id = $1 AND id > $2 ORDER BY id LIMIT $3`

	// insertKey inserts nothing (no row returned) unless the identity
	// exists in the project.
	insertKey = `INSERT INTO signing_keys (id, identity_id, project_id, public_key, status, created_at)
		SELECT $1, i.id, i.project_id, $4, $5, ` + nowMS + ` FROM identities i
		WHERE i.project_id = $3 AND i.id = $2
		RETURNING project_id, created_at`
	selectKey = `SELECT id, identity_id, project_id, public_key, status, created_at FROM signing_keys WHERE project_id = $1 AND id = $2`
	revokeKey = `UPDATE signing_keys SET status = 'revoked', revoked_at = coalesce(revoked_at, ` + nowMS + `) WHERE project_id = $1 AND id = $2
		RETURNING id, identity_id, project_id, public_key, status, created_at`
	listKeys = `SELECT id, identity_id, project_id, public_key, status, created_at FROM signing_keys
		WHERE project_id = $1 AND identity_id = $2 AND id > $3 ORDER BY id LIMIT $4`

	insertToken = `INSERT INTO tokens (id, project_id, scopes, hash, revoked, created_at)
		SELECT $1, p.id, $3::text[], $4::bytea, $5::boolean, ` + nowMS + ` FROM projects p WHERE p.id = $2
		RETURNING created_at`
	selectToken = `SELECT id, project_id, scopes, hash, revoked, created_at FROM tokens WHERE id = $1`
	revokeToken = `UPDATE tokens SET revoked = true WHERE id = $1`
	listTokens  = `SELECT id, project_id, scopes, revoked, created_at FROM tokens
		WHERE project_id = $1 AND id > $2 ORDER BY id LIMIT $3`

	selectSetting = `SELECT value FROM settings WHERE name = $1`
	upsertSetting = `INSERT INTO settings (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`
)

// Append.
const (
	projectExists = `SELECT EXISTS (SELECT 1 FROM projects WHERE id = $1)`

	// selectAppendState reads, right after the stream lock (pipelined in
	// the lock's round trip, but its own statement and snapshot): the
	// project (no row when unknown), the statuses of the sender identity and
	// key (NULL when the key is not a key of that identity in the project),
	// the bytes already stored under the event id (NULL when new), and the
	// lineage_incomplete flag (false means the ready frontier is empty).
	// The change times (deactivated_at, revoked_at) serve AppendAt.
	selectAppendState = `SELECT s.identity_status, s.key_status, e.canonical, p.lineage_incomplete,
		s.deactivated_at, s.revoked_at
		FROM projects p
		LEFT JOIN LATERAL (
			SELECT i.status, k.status, i.deactivated_at, k.revoked_at FROM signing_keys k
			JOIN identities i ON i.project_id = k.project_id AND i.id = k.identity_id
			WHERE k.id = $2 AND k.identity_id = $3 AND k.project_id = p.id AND i.project_id = p.id
		) s (identity_status, key_status, deactivated_at, revoked_at) ON true
		LEFT JOIN events e ON e.project_id = p.id AND e.event_id = $4
		WHERE p.id = $1`

	// insertEvent takes the project's next received_seq and the database
	// time and stores the event, in one statement (see doc.go for GREATEST).
	insertEvent = `WITH r AS (
			UPDATE projects SET last_seq = last_seq + 1,
				last_received_at = GREATEST(last_received_at, ` + nowMS + `)
			WHERE id = $1 RETURNING last_seq, last_received_at
		)
		INSERT INTO events (project_id, received_seq, event_id, received_at, repository_id,
			thread_id, kind, identity_id, device_id, session_id, session_seq, canonical)
		SELECT $1, r.last_seq, $2, r.last_received_at, $3, $4, $5, $6, $7, $8, $9, $10 FROM r
		RETURNING received_seq`

	insertParent = `INSERT INTO parents (project_id, event_id, parent_id) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`

	// selectSessionTuple lists the events sharing one (identity, device,
	// session, session_seq); more than one is a session fork (spec §7).
	selectSessionTuple = `SELECT event_id FROM events
		WHERE project_id = $1 AND identity_id = $2 AND device_id = $3 AND session_id = $4 AND session_seq = $5
		ORDER BY event_id LIMIT 17`
)

// Lineage (spec §8).
const (
	// insertLineage takes received_seq from the event row just stored.
	insertLineage = `INSERT INTO claim_lineage (project_id, event_id, received_seq, repository_id, thread_id,
		claim_id, identity_id, device_id, session_id, kind, generation, predecessor_event_id, paths,
		expires_at, status, root_identity_id)
		SELECT $1, $2, e.received_seq, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::text[], $13::timestamptz, $14, $15
		FROM events e WHERE e.project_id = $1 AND e.event_id = $2`

	selectLineage = `SELECT repository_id, thread_id, claim_id, identity_id, kind, generation,
		predecessor_event_id, paths, expires_at, status, root_identity_id
		FROM claim_lineage WHERE project_id = $1 AND event_id = $2`

	updateLineage = `UPDATE claim_lineage SET status = $1, root_identity_id = $2 WHERE project_id = $3 AND event_id = $4`

	eventExists = `SELECT EXISTS (SELECT 1 FROM events WHERE project_id = $1 AND event_id = $2)`

	insertWaiting = `INSERT INTO lineage_waiting (project_id, predecessor_event_id, event_id) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`

	// releaseWaiters moves the children waiting on one predecessor to the
	// ready frontier in event id order (identity values follow the ORDER
	// BY of the insert's SELECT).
	releaseWaiters = `WITH moved AS (
			DELETE FROM lineage_waiting WHERE project_id = $1 AND predecessor_event_id = $2
			RETURNING project_id, event_id
		)
		INSERT INTO lineage_frontier (project_id, event_id)
		SELECT project_id, event_id FROM moved ORDER BY event_id
		ON CONFLICT DO NOTHING`

	// popFrontier removes and returns the project's oldest frontier row.
	popFrontier = `DELETE FROM lineage_frontier
		WHERE id = (SELECT id FROM lineage_frontier WHERE project_id = $1 ORDER BY id LIMIT 1)
		RETURNING event_id`
	frontierRemains = `SELECT EXISTS (SELECT 1 FROM lineage_frontier WHERE project_id = $1)`

	// updateLineageFlags persists the incomplete flag and, when the
	// reconciliation changed a lineage or tip row, the watermark.
	updateLineageFlags = `UPDATE projects SET lineage_incomplete = $1,
		lineage_changed_at = CASE WHEN $2::boolean THEN ` + nowMS + ` ELSE lineage_changed_at END
		WHERE id = $3`

	selectLineageFlags = `SELECT lineage_incomplete, lineage_changed_at FROM projects WHERE id = $1`

	insertTip = `INSERT INTO claim_tips (project_id, event_id, received_seq, repository_id, thread_id,
		claim_id, kind, generation, root_identity_id, device_id, session_id, paths, expires_at)
		SELECT project_id, event_id, received_seq, repository_id, thread_id, claim_id, kind, generation,
		$1, device_id, session_id, paths, expires_at
		FROM claim_lineage WHERE project_id = $2 AND event_id = $3
		ON CONFLICT DO NOTHING`
	deleteTip = `DELETE FROM claim_tips WHERE project_id = $1 AND event_id = $2`

	selectTips = `SELECT event_id, received_seq, repository_id, thread_id, claim_id, kind, generation,
		root_identity_id, device_id, session_id, paths, expires_at
		FROM claim_tips WHERE project_id = $1 AND repository_id = $2 ORDER BY event_id`
)

// Reads.
const (
	// recordColumns are the columns of one store.Record; missing_parents is
	// the sorted array of the parents with no events row in the project.
	recordColumns = `SELECT e.event_id, e.repository_id, e.thread_id, e.kind, e.canonical,
		e.received_seq, e.received_at, coalesce(l.status, 'not_applicable'),
		coalesce((SELECT array_agg(p.parent_id ORDER BY p.parent_id) FROM parents p
		  WHERE p.project_id = e.project_id AND p.event_id = e.event_id
		  AND NOT EXISTS (SELECT 1 FROM events x WHERE x.project_id = p.project_id AND x.event_id = p.parent_id)),
		  '{}')
		FROM events e LEFT JOIN claim_lineage l ON l.project_id = e.project_id AND l.event_id = e.event_id`

	selectRecord = recordColumns + ` WHERE e.project_id = $1 AND e.event_id = $2`

	selectRecordsAfter = recordColumns + `
		WHERE e.project_id = $1 AND e.repository_id = $2 AND e.received_seq > $3
		ORDER BY e.received_seq LIMIT $4`

	selectThreadRecordsAfter = recordColumns + `
		WHERE e.project_id = $1 AND e.repository_id = $2 AND e.thread_id = $3 AND e.received_seq > $4
		ORDER BY e.received_seq LIMIT $5`

	selectHead = `SELECT last_seq, last_received_at FROM projects WHERE id = $1`
)

// Projection reads (spec §8, §9), run in one REPEATABLE READ, READ ONLY
// transaction; the clock is read once by snapshotHead and passed on.
const (
	snapshotHead = `SELECT last_seq, last_received_at, lineage_incomplete, lineage_changed_at, ` + nowMS + `
		FROM projects WHERE id = $1`

	// lastExpiredTip is evaluated_at input (c): the newest expires_at among
	// the repository's open/renew tips that is not after the clock.
	lastExpiredTip = `SELECT max(expires_at) FROM claim_tips
		WHERE project_id = $1 AND repository_id = $2 AND expires_at IS NOT NULL AND expires_at <= $3`

	// claimCandidates scans the live open/renew tips in claim_tips_live
	// order with the thread ($4) and path ($5) filters applied in the scan,
	// so the LIMIT (the 512-row sentinel) counts only matching rows. The
	// path filter is the overlap rule of spec §4 on characters, which agrees
	// with correspondence.PathsOverlap on bytes because '/' is ASCII.
	claimCandidates = `SELECT t.event_id, t.received_seq, t.thread_id, t.claim_id, t.kind, t.generation,
		t.root_identity_id, t.device_id, t.session_id, t.paths, t.expires_at
		FROM claim_tips t
		WHERE t.project_id = $1 AND t.repository_id = $2 AND t.expires_at > $3
		  AND t.kind IN ('claim.open', 'claim.renew')
		  AND ($4 = '' OR t.thread_id = $4)
		  AND ($5 = '' OR EXISTS (SELECT 1 FROM unnest(t.paths) AS j (value) WHERE
		        $5 = '.' OR j.value = '.' OR j.value = $5
		        OR left(j.value, length($5) + 1) = $5 || '/'
		        OR left($5, length(j.value) + 1) = j.value || '/'))
		ORDER BY t.expires_at, t.event_id
		LIMIT $6`

	// claimCompetitors lists the other tips of one claim (any kind, expired
	// or not), served by claim_tips_claim.
	claimCompetitors = `SELECT event_id FROM claim_tips
		WHERE project_id = $1 AND repository_id = $2 AND claim_id = $3 AND event_id <> $4
		ORDER BY event_id LIMIT $5`

	recentRecords       = recordColumns + ` WHERE e.project_id = $1 AND e.repository_id = $2 ORDER BY e.received_seq DESC LIMIT $3`
	recentThreadRecords = recordColumns + ` WHERE e.project_id = $1 AND e.repository_id = $2 AND e.thread_id = $3
		ORDER BY e.received_seq DESC LIMIT $4`

	recentTuples = `SELECT identity_id, device_id, session_id, session_seq FROM events
		WHERE project_id = $1 AND repository_id = $2 AND ($3 = '' OR thread_id = $3)
		ORDER BY received_seq DESC LIMIT $4`

	selectCanonical = `SELECT canonical FROM events WHERE project_id = $1 AND event_id = $2`

	forkLookup = `SELECT event_id FROM events
		WHERE project_id = $1 AND identity_id = $2 AND device_id = $3 AND session_id = $4 AND session_seq = $5
		ORDER BY event_id LIMIT $6`
)
