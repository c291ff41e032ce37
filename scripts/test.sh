#!/usr/bin/env bash
# The whole test suite: provisions what integration tests need, then runs
# `go test` over every package. Prints what it skipped and why.
#   - PostgreSQL: a throwaway cluster (initdb in a temp dir, free port on
#     127.0.0.1), removed at exit; ACRELAY_TEST_DATABASE_URL points at it.
#   - jing (Atom RELAX NG validation): installed from Debian when missing.
# Extra arguments go to `go test` (default: ./...).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/provision.sh

pkgs=("$@")
[ ${#pkgs[@]} -eq 0 ] && pkgs=(./...)

echo "== go vet"
go vet ./... || exit 1
echo "== go test -race -count=1 ${pkgs[*]}"
go test -race -count=1 -timeout 30m "${pkgs[@]}" 2>&1 | tee "$ACRELAY_TEST_LOG"
status=${PIPESTATUS[0]}

echo
echo "== summary"
grep -E '^(ok|FAIL|---)' "$ACRELAY_TEST_LOG" | grep -vE '^--- (PASS|SKIP)' | tail -80 || true
skips=$(grep -E -- '--- SKIP' -A1 "$ACRELAY_TEST_LOG" | grep -vE -- '--- SKIP|^--$' | sed 's/^ *//' | sort | uniq -c | sort -rn | head -20)
[ -n "$skips" ] && { echo "skipped tests (count, reason):"; echo "$skips"; }
for note in "${ACRELAY_PROVISION_NOTES[@]}"; do echo "provision: $note"; done
passed=$(grep -cE '^\s*--- PASS' "$ACRELAY_TEST_LOG" || true)
failed=$(grep -cE '^\s*--- FAIL' "$ACRELAY_TEST_LOG" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$ACRELAY_TEST_LOG" || true)
echo "tests: ${passed} passed, ${failed} failed, ${skipped} skipped"
exit "$status"
