# Sourced by scripts/test.sh: provisions integration dependencies and
# exports their locations. Everything it starts is stopped at exit.
ACRELAY_PROVISION_NOTES=()
ACRELAY_TMP=$(mktemp -d /tmp/acrelay-test.XXXXXX)
export ACRELAY_TEST_LOG="$ACRELAY_TMP/go-test.log"
cleanup() {
  if [ -n "${PGBIN:-}" ] && [ -d "$ACRELAY_TMP/pgdata" ]; then
    run_pg "$PGBIN/pg_ctl" -D "$ACRELAY_TMP/pgdata" -m immediate stop >/dev/null 2>&1 || true
  fi
  rm -rf "$ACRELAY_TMP"
}
trap cleanup EXIT

run_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

# --- PostgreSQL -----------------------------------------------------------
provision_postgres() {
  if [ -n "${ACRELAY_TEST_DATABASE_URL:-}" ]; then
    ACRELAY_PROVISION_NOTES+=("PostgreSQL: using ACRELAY_TEST_DATABASE_URL from the environment")
    return
  fi
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  if [ -z "$PGBIN" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing Debian's postgresql (server binaries missing)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) || true
    PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  fi
  if [ -z "$PGBIN" ]; then
    ACRELAY_PROVISION_NOTES+=("PostgreSQL: SKIPPED - no server binaries under /usr/lib/postgresql/*/bin and could not install them; PostgreSQL store tests skip")
    unset PGBIN; return
  fi
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd -r -m postgres
    chown postgres "$ACRELAY_TMP"; chmod 755 "$ACRELAY_TMP"
  fi
  local port; port=$(free_port)
  if ! run_pg "$PGBIN/initdb" -D "$ACRELAY_TMP/pgdata" -U postgres -A trust --no-sync -E UTF8 >"$ACRELAY_TMP/initdb.log" 2>&1; then
    ACRELAY_PROVISION_NOTES+=("PostgreSQL: SKIPPED - initdb failed (see output above)"); cat "$ACRELAY_TMP/initdb.log"; unset PGBIN; return
  fi
  if ! run_pg "$PGBIN/pg_ctl" -D "$ACRELAY_TMP/pgdata" -l "$ACRELAY_TMP/pg.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $ACRELAY_TMP -c max_connections=300 -c fsync=on" start >/dev/null; then
    ACRELAY_PROVISION_NOTES+=("PostgreSQL: SKIPPED - server did not start"); cat "$ACRELAY_TMP/pg.log"; unset PGBIN; return
  fi
  export ACRELAY_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  ACRELAY_PROVISION_NOTES+=("PostgreSQL: throwaway cluster on 127.0.0.1:$port ($PGBIN)")
}

# --- jing (Atom RELAX NG) ---------------------------------------------------
provision_jing() {
  if command -v jing >/dev/null; then
    ACRELAY_PROVISION_NOTES+=("jing: $(command -v jing)"); return
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing Debian's jing (Atom schema validation)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends jing >/dev/null 2>&1) || true
  fi
  if command -v jing >/dev/null; then
    ACRELAY_PROVISION_NOTES+=("jing: installed from Debian")
  else
    ACRELAY_PROVISION_NOTES+=("jing: SKIPPED - not installed and could not be installed; Atom RELAX NG validation tests skip")
  fi
}

# --- outside test data (spec vectors, corpora) ------------------------------
provision_shared() {
  local d="${ACRELAY_SHARED_DIR:-$(pwd)/../shared}"
  if [ -f "$d/spec/agent-correspondence-0.1-vectors.json" ] && [ -d "$d/corpora" ]; then
    export ACRELAY_SHARED_DIR="$(cd "$d" && pwd)"
    ACRELAY_PROVISION_NOTES+=("shared data: $ACRELAY_SHARED_DIR")
  else
    ACRELAY_PROVISION_NOTES+=("shared data: SKIPPED - no spec/ and corpora/ at ${d} (set ACRELAY_SHARED_DIR); the public vector file, JSONTestSuite, JCS, Ed25519 and Atom schema tests skip")
  fi
}

# --- staticcheck (lint; scripts/provision_staticcheck.sh) ------------------
. scripts/provision_staticcheck.sh

# --- Dendrite (Matrix courier tests; scripts/provision_dendrite.sh) ---------
. scripts/provision_dendrite.sh

# --- Synapse (encrypted-room tests on Element's homeserver; scripts/provision_synapse.sh)
. scripts/provision_synapse.sh

# --- npm pubsubhubbub (WebSub interop; scripts/provision_websub_npm.sh) -----
. scripts/provision_websub_npm.sh

# --- npm @modelcontextprotocol/sdk (acrelay mcp interop; scripts/provision_mcp_npm.sh)
. scripts/provision_mcp_npm.sh

# --- Chromium (live web view browser test; scripts/provision_chromium.sh) ---
. scripts/provision_chromium.sh

# --- podman, podman-compose (deploy/ tests; scripts/provision_podman.sh) -----
. scripts/provision_podman.sh

# --- feedparser (capability archive walk; scripts/provision_feedparser.sh) ---
. scripts/provision_feedparser.sh

# --- litewitness (verifiable-log witnessing; scripts/provision_litewitness.sh)
. scripts/provision_litewitness.sh
# --- Miniflux (feed reader end to end; scripts/provision_miniflux.sh) -------
. scripts/provision_miniflux.sh

provision_shared
provision_postgres
provision_jing
provision_staticcheck
provision_dendrite
provision_synapse
provision_websub_npm
provision_mcp_npm
provision_chromium
provision_podman
provision_feedparser
provision_litewitness
provision_miniflux
