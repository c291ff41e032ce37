# Sourced by scripts/provision.sh: builds litewitness and witnessctl
# v0.6.1 (BSD-3-Clause, module filippo.io/torchwood: a C2SP tlog-witness)
# for the verifiable log's witnessing tests into the user cache, reused
# when present, and exports the directory as ACRELAY_LITEWITNESS_BIN. The
# Go test (cmd/acrelay, litewitness_e2e_test.go) starts an ssh-agent,
# litewitness on a loopback port and witnessctl itself, and skips when the
# binaries are absent. litewitness stores its state with crawshaw.io/sqlite,
# which needs cgo: it is built with the system C compiler (the relay
# itself stays CGO_ENABLED=0); never required by go.mod.
provision_litewitness() {
  local v=v0.6.1
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/acrelay/litewitness-$v"
  if [ -x "$dir/litewitness" ] && [ -x "$dir/witnessctl" ]; then
    export ACRELAY_LITEWITNESS_BIN="$dir"
    ACRELAY_PROVISION_NOTES+=("litewitness $v: cached at $dir")
    return
  fi
  if ! command -v cc >/dev/null || ! command -v ssh-agent >/dev/null; then
    ACRELAY_PROVISION_NOTES+=("litewitness $v: SKIPPED - needs a C compiler (cgo SQLite) and ssh-agent; the witnessing tests with litewitness skip")
    return
  fi
  echo "== building litewitness $v (cgo SQLite: about 60 s cold on 2 cores)"
  mkdir -p "$dir"
  if GOBIN="$dir" CGO_ENABLED=1 go install \
      "filippo.io/torchwood/cmd/litewitness@$v" \
      "filippo.io/torchwood/cmd/witnessctl@$v" >"${ACRELAY_TMP:-/tmp}/litewitness-build.log" 2>&1; then
    export ACRELAY_LITEWITNESS_BIN="$dir"
    ACRELAY_PROVISION_NOTES+=("litewitness $v: built into $dir")
  else
    tail -20 "${ACRELAY_TMP:-/tmp}/litewitness-build.log"
    ACRELAY_PROVISION_NOTES+=("litewitness $v: SKIPPED - go install failed (see output above); the witnessing tests with litewitness skip")
  fi
}
