package sqlite

// SQL of the embedded store, one statement each. Values travel only as
// placeholders. nowMS is the database clock at millisecond precision, UTC;
// SQLite evaluates 'now' once per statement.

const nowMS = `strftime('%Y-%m-%dT%H:%M:%fZ','now')`

// Registry.
const (
	insertProject = `INSERT INTO projects (id, created_at) VALUES (?, ` + nowMS + `) RETURNING created_at`
	selectProject = `SELECT id, created_at FROM projects WHERE id = ?`
	countProjects = `SELECT count(*) FROM projects`

	insertIdentity = `INSERT INTO identities (id, project_id, display_name, status, created_at)
		VALUES (?, ?, ?, ?, ` + nowMS + `) RETURNING created_at`
	selectIdentity     = `SELECT id, project_id, display_name, status, created_at FROM identities WHERE project_id = ? AND id = ?`
	deactivateIdentity = `UPDATE identities SET status = 'inactive', deactivated_at = coalesce(deactivated_at, ` + nowMS + `) WHERE project_id = ? AND id = ?
		RETURNING id, project_id, display_name, status, created_at`
	selectActiveIdentityIDs = `SELECT id FROM identities
		WHERE project_id = ? AND status = 'active' AND id > ? ORDER BY id LIMIT ?`
	listIdentities = `SELECT id, project_id, display_name, status, created_at FROM identities
		WHERE project_id = ? AND id > ? ORDER BY id LIMIT ?`

	insertKey = `INSERT INTO signing_keys (id, identity_id, project_id, public_key, status, created_at)
		VALUES (?, ?, ?, ?, ?, ` + nowMS + `) RETURNING created_at`
	selectKey = `SELECT id, identity_id, project_id, public_key, status, created_at FROM signing_keys WHERE project_id = ? AND id = ?`
	revokeKey = `UPDATE signing_keys SET status = 'revoked', revoked_at = coalesce(revoked_at, ` + nowMS + `) WHERE project_id = ? AND id = ?
		RETURNING id, identity_id, project_id, public_key, status, created_at`
	listKeys = `SELECT id, identity_id, project_id, public_key, status, created_at FROM signing_keys
		WHERE project_id = ? AND identity_id = ? AND id > ? ORDER BY id LIMIT ?`

	insertToken = `INSERT INTO tokens (id, project_id, scopes, hash, revoked, created_at)
		VALUES (?, ?, ?, ?, ?, ` + nowMS + `) RETURNING created_at`
	selectToken = `SELECT id, project_id, scopes, hash, revoked, created_at FROM tokens WHERE id = ?`
	revokeToken = `UPDATE tokens SET revoked = 1 WHERE id = ?`
	listTokens  = `SELECT id, project_id, scopes, revoked, created_at FROM tokens
		WHERE project_id = ? AND id > ? ORDER BY id LIMIT ?`

	selectSetting = `SELECT value FROM settings WHERE name = ?`
	upsertSetting = `INSERT INTO settings (name, value) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`
)

// Append.
const (
	projectExists = `SELECT 1 FROM projects WHERE id = ?`

	// selectSender reads the statuses of the sender identity and key; no row
	// when the key is not a key of that identity in that project.
	selectSender = `SELECT i.status, k.status FROM signing_keys k
		JOIN identities i ON i.project_id = k.project_id AND i.id = k.identity_id
		WHERE k.id = ? AND k.identity_id = ? AND k.project_id = ? AND i.project_id = ?`

	selectCanonical = `SELECT canonical FROM events WHERE project_id = ? AND event_id = ?`

	// selectProjectState reads what the writer remembers of a project
	// (wstate): the receipt counter, the lineage flag, and whether any
	// claim waits for a predecessor.
	selectProjectState = `SELECT last_seq, last_received_at, lineage_incomplete,
		EXISTS (SELECT 1 FROM lineage_waiting WHERE project_id = ?), thread_indexed_seq FROM projects WHERE id = ?`

	// indexThreadTail adds a project's events not yet in thread_events,
	// sorted so that each leaf they land in is written once, and
	// updateThreadIndexed moves the project's mark past them (migration
	// 0005). OR IGNORE: a row already there (the invariant holds "at
	// least") never fails the batch.
	indexThreadTail = `INSERT OR IGNORE INTO thread_events (project_id, repository_id, thread_id, received_seq)
		SELECT project_id, repository_id, thread_id, received_seq FROM events
		WHERE project_id = ?1 AND received_seq > (SELECT thread_indexed_seq FROM projects WHERE id = ?1)
		ORDER BY repository_id, thread_id, received_seq`
	updateThreadIndexed = `UPDATE projects SET thread_indexed_seq =
		coalesce((SELECT max(received_seq) FROM events WHERE project_id = ?1), 0) WHERE id = ?1`

	// updateProjectHead writes a batch's receipt counter back.
	updateProjectHead = `UPDATE projects SET last_seq = ?, last_received_at = ? WHERE id = ?`

	// selectSessionMax is the highest session_seq stored for one
	// (identity, device, session).
	// It walks the session's entries down from the highest and stops at
	// the first of this identity and device.
	selectSessionMax = `SELECT session_seq FROM events INDEXED BY events_session
		WHERE project_id = ? AND session_id = ? AND identity_id = ? AND device_id = ?
		ORDER BY session_seq DESC LIMIT 1`

	// dataVersion reads the writer connection's data_version (it moves
	// when another connection commits) and whether this connection carries
	// writerMark. data_version counts per connection: when database/sql
	// replaces a broken writer connection, the new one's count could equal
	// the old baseline, so a connection without the mark counts as a move.
	dataVersion = `SELECT (SELECT data_version FROM pragma_data_version),
		EXISTS (SELECT 1 FROM temp.sqlite_master WHERE name = 'acrelay_writer_mark')`
	writerMark = `CREATE TEMP TABLE IF NOT EXISTS acrelay_writer_mark (x INTEGER)`

	// selectMissingParents lists the parents of one event not stored in the
	// project, sorted.
	selectMissingParents = `SELECT p.parent_id FROM parents p WHERE p.project_id = ? AND p.event_id = ?
		AND NOT EXISTS (SELECT 1 FROM events x WHERE x.project_id = p.project_id AND x.event_id = p.parent_id)
		ORDER BY p.parent_id`

	// insertEvent stores a new event; it inserts nothing when the event id
	// is already stored (RowsAffected 0), which Append then answers as an
	// exact retry or a collision — one index probe fewer for new events.
	insertEvent = `INSERT INTO events (project_id, received_seq, event_id, received_at, repository_id,
		thread_id, kind, identity_id, device_id, session_id, session_seq, canonical)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (project_id, event_id) DO NOTHING`

	insertParent = `INSERT OR IGNORE INTO parents (project_id, event_id, parent_id) VALUES (?, ?, ?)`

	// selectSessionTuple lists the events sharing one (identity, device,
	// session, session_seq); more than one is a session fork (spec §7).
	// The planner would otherwise walk events_event_id to skip the sort.
	selectSessionTuple = `SELECT event_id FROM events INDEXED BY events_session
		WHERE project_id = ? AND identity_id = ? AND device_id = ? AND session_id = ? AND session_seq = ?
		ORDER BY event_id LIMIT 17`
)

// Lineage (spec §8).
const (
	savepointAppend  = `SAVEPOINT append`
	rollbackToAppend = `ROLLBACK TO append`
	releaseAppend    = `RELEASE append`

	insertLineage = `INSERT INTO claim_lineage (project_id, event_id, received_seq, repository_id, thread_id,
		claim_id, identity_id, device_id, session_id, kind, generation, predecessor_event_id, paths,
		expires_at, status, root_identity_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

	selectLineage = `SELECT repository_id, thread_id, claim_id, identity_id, kind, generation,
		predecessor_event_id, paths, expires_at, status, root_identity_id
		FROM claim_lineage WHERE project_id = ? AND event_id = ?`

	updateLineage = `UPDATE claim_lineage SET status = ?, root_identity_id = ? WHERE project_id = ? AND event_id = ?`

	eventExists = `SELECT 1 FROM events WHERE project_id = ? AND event_id = ?`

	insertWaiting = `INSERT OR IGNORE INTO lineage_waiting (project_id, predecessor_event_id, event_id) VALUES (?, ?, ?)`

	// takeWaiters drops the children waiting on one predecessor and returns
	// them; insertFrontier queues each on the ready frontier (in event id
	// order). One statement for the common case of no waiting children.
	takeWaiters    = `DELETE FROM lineage_waiting WHERE project_id = ? AND predecessor_event_id = ? RETURNING event_id`
	insertFrontier = `INSERT OR IGNORE INTO lineage_frontier (project_id, event_id) VALUES (?, ?)`

	selectFrontierHead = `SELECT id, event_id FROM lineage_frontier WHERE project_id = ? ORDER BY id LIMIT 1`
	deleteFrontierRow  = `DELETE FROM lineage_frontier WHERE id = ?`
	frontierRemains    = `SELECT EXISTS (SELECT 1 FROM lineage_frontier WHERE project_id = ?)`

	// updateLineageFlags persists the incomplete flag and, when the
	// reconciliation changed a lineage or tip row, the watermark.
	updateLineageFlags = `UPDATE projects SET lineage_incomplete = ?,
		lineage_changed_at = CASE WHEN ? THEN ` + nowMS + ` ELSE lineage_changed_at END
		WHERE id = ?`

	selectLineageFlags = `SELECT lineage_incomplete, lineage_changed_at FROM projects WHERE id = ?`

	insertTip = `INSERT OR IGNORE INTO claim_tips (project_id, event_id, received_seq, repository_id, thread_id,
		claim_id, kind, generation, root_identity_id, device_id, session_id, paths, expires_at)
		SELECT project_id, event_id, received_seq, repository_id, thread_id, claim_id, kind, generation,
		?, device_id, session_id, paths, expires_at
		FROM claim_lineage WHERE project_id = ? AND event_id = ?`
	deleteTip = `DELETE FROM claim_tips WHERE project_id = ? AND event_id = ?`

	selectTips = `SELECT event_id, received_seq, repository_id, thread_id, claim_id, kind, generation,
		root_identity_id, device_id, session_id, paths, expires_at
		FROM claim_tips INDEXED BY claim_tips_claim WHERE project_id = ? AND repository_id = ? ORDER BY event_id`
)

// Reads.
const (
	// recordColumns are the columns of one store.Record; missing_parents is
	// a JSON array of the parents with no events row in the project.
	recordColumns = `SELECT e.event_id, e.repository_id, e.thread_id, e.kind, e.canonical,
		e.received_seq, e.received_at, coalesce(l.status, 'not_applicable'),
		(SELECT json_group_array(p.parent_id ORDER BY p.parent_id) FROM parents p
		  WHERE p.project_id = e.project_id AND p.event_id = e.event_id
		  AND NOT EXISTS (SELECT 1 FROM events x WHERE x.project_id = p.project_id AND x.event_id = p.parent_id))
		FROM events e LEFT JOIN claim_lineage l ON l.project_id = e.project_id AND l.event_id = e.event_id`

	selectRecord = recordColumns + ` WHERE e.project_id = ? AND e.event_id = ?`

	selectRecordsAfter = recordColumns + `
		WHERE e.project_id = ? AND e.repository_id = ? AND e.received_seq > ?
		ORDER BY e.received_seq LIMIT ?`

	// selectThreadRecordsAfter takes the thread's first ?5 events after ?4
	// from thread_events and from the tail of events not yet in it
	// (migration 0005), in one statement, so from one snapshot.
	selectThreadRecordsAfter = recordColumns + `
		WHERE e.project_id = ?1 AND e.received_seq IN (
			SELECT received_seq FROM (SELECT received_seq FROM thread_events
				WHERE project_id = ?1 AND repository_id = ?2 AND thread_id = ?3 AND received_seq > ?4
				ORDER BY received_seq LIMIT ?5)
			UNION ALL
			SELECT received_seq FROM (SELECT received_seq FROM events
				WHERE project_id = ?1 AND received_seq > max(?4, (SELECT thread_indexed_seq FROM projects WHERE id = ?1))
				AND repository_id = ?2 AND thread_id = ?3
				ORDER BY received_seq LIMIT ?5))
		ORDER BY e.received_seq LIMIT ?5`

	selectHead = `SELECT last_seq, last_received_at FROM projects WHERE id = ?`
)

// vacuumInto writes a snapshot of the database to the file named by ?
// (Backup).
const vacuumInto = `VACUUM INTO ?`
