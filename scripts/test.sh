#!/usr/bin/env bash
# The whole test suite: provisions what integration tests need, then runs
# `go test` over every package. Prints what it skipped and why.
#   - PostgreSQL: a throwaway cluster (initdb in a temp dir, free port on
#     127.0.0.1), removed at exit; ACRELAY_TEST_DATABASE_URL points at it.
#   - jing (Atom RELAX NG validation): installed from Debian when missing.
#   - staticcheck (pinned, scripts/provision_staticcheck.sh): built once with
#     go install into ${XDG_CACHE_HOME:-$HOME/.cache}/acrelay/bin; any finding
#     fails the run, as gofmt and go vet do.
# Extra arguments go to `go test` (default: ./...).
set -uo pipefail
cd "$(dirname "$0")/.."
# The tree as it was before the suite: every test, benchmark and trial
# writes only under temporary directories, so the suite must leave
# `git status --porcelain` as it found it (a developer's uncommitted work
# is in both lists and does not fail the run; each listed file carries a
# hash of its content, so a change to an already modified file shows too).
tree_status() {
  git status --porcelain --untracked-files=all 2>/dev/null | LC_ALL=C sort | while IFS= read -r line; do
    p=${line:3}; h=""
    [ -f "$p" ] && h=$(sha256sum <"$p" | cut -c1-16)
    printf '%s %s\n' "$line" "$h"
  done
}
git rev-parse --is-inside-work-tree >/dev/null 2>&1 && tree_before=$(tree_status)
. scripts/provision.sh

pkgs=("$@")
[ ${#pkgs[@]} -eq 0 ] && pkgs=(./...)

# Every build carries -tags goolm: mautrix's pure-Go olm, so the Matrix
# courier's end-to-end encryption builds with CGO_ENABLED=0 (without the
# tag mautrix's crypto would need libolm through cgo). The build without
# the tag must still compile: it refuses encrypted rooms. (go test -race
# needs cgo for the race runtime only.)
TAGS=(-tags goolm)
echo "== gofmt -l, CGO_ENABLED=0 go build with and without the goolm tag, go vet, staticcheck"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
CGO_ENABLED=0 go build "${TAGS[@]}" ./... || exit 1
CGO_ENABLED=0 go build ./... || exit 1
go vet "${TAGS[@]}" ./... || exit 1
if [ -n "${STATICCHECK:-}" ]; then
  "$STATICCHECK" "${TAGS[@]}" ./... || exit 1
else
  echo "staticcheck: not available (see the provision notes at the end)"
fi
# progress prints, as they come, the lines of the -v log that say a
# package finished (ok, FAIL, a panic) or a test failed; the whole log
# still goes to $ACRELAY_TEST_LOG for the summary below.
progress() { grep --line-buffered -E -- '^(ok|FAIL|panic:)[[:space:]]|^[[:space:]]*--- FAIL' || true; }

# rerun_failed LOG [ENV=VALUE…]: runs once more, alone, each top-level
# test that failed in LOG (a go test -v log), package by package (a
# package that failed without a failing test — a panic, a timeout — is
# run whole). Succeeds only if every rerun passes; the tests that failed
# and then passed are listed as flaky in $ACRELAY_TMP/flaky and counted as
# passed in the closing line, never hidden. The reruns' output goes to
# $ACRELAY_TMP/rerun.log (kept with the full log on failure).
rerun_failed() {
  local log=$1; shift
  local ok=0 pkg names
  while IFS=$'\t' read -r pkg names; do
    [ -n "$pkg" ] || continue
    local run=()
    [ -n "$names" ] && run=(-run "^(${names})\$")
    echo "== rerun once: ${pkg} ${names:-(whole package)}"
    if env "$@" go test "${TAGS[@]}" -race -count=1 -v -timeout 20m "${run[@]}" "$pkg" </dev/null >>"$ACRELAY_TMP/rerun.log" 2>&1; then
      echo "${pkg} ${names:-(whole package)}" >>"$ACRELAY_TMP/flaky"
      echo "   passed on the rerun: flaky"
    else
      echo "   failed again"
      touch "$ACRELAY_TMP/rerun-failed"
      ok=1
    fi
  done < <(awk '
    /^--- FAIL: / { split($3, a, " "); n = n (n == "" ? "" : "|") a[1]; next }
    /^(ok|FAIL)[ \t]/ {
      if ($1 == "FAIL" && $2 != "") { print $2 "\t" n }
      n = ""
    }' "$log")
  return $ok
}

echo "== go test -tags goolm -race -count=1 -v ${pkgs[*]}  (each package as it finishes; full log: kept on failure)"
go test "${TAGS[@]}" -race -count=1 -v -timeout 45m "${pkgs[@]}" 2>&1 | tee "$ACRELAY_TEST_LOG" | progress
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  rerun_failed "$ACRELAY_TEST_LOG" && status=0
fi

# The HTTP suite once more on PostgreSQL: every relay route, both dialects.
if [ -n "${ACRELAY_TEST_DATABASE_URL:-}" ] && [ $# -eq 0 ]; then
  echo "== ACRELAY_RELAY_TEST_STORE=postgres go test -tags goolm -race -count=1 -v ./relay"
  ACRELAY_RELAY_TEST_STORE=postgres go test "${TAGS[@]}" -race -count=1 -v -timeout 20m ./relay 2>&1 | tee "$ACRELAY_TMP/relay-pg.log" | progress
  if [ "${PIPESTATUS[0]}" -ne 0 ]; then
    rerun_failed "$ACRELAY_TMP/relay-pg.log" ACRELAY_RELAY_TEST_STORE=postgres || status=1
  fi
  cat "$ACRELAY_TMP/relay-pg.log" >>"$ACRELAY_TEST_LOG"
fi

# The Kubernetes manifests, decoded strictly against the official API
# types: a module of its own (deploy/kubernetes/validate), so that go.mod
# stays free of k8s.io/api and k8s.io/apimachinery.
if [ $# -eq 0 ]; then
  echo "== deploy/kubernetes/validate: go vet, staticcheck, go test -count=1 -v (its own module)"
  if (cd deploy/kubernetes/validate && go mod download) >"$ACRELAY_TMP/k8s-mod.log" 2>&1; then
    (cd deploy/kubernetes/validate && go vet . && { [ -z "${STATICCHECK:-}" ] || "$STATICCHECK" .; } && go test -count=1 -v .) 2>&1 | tee -a "$ACRELAY_TEST_LOG" | progress
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  else
    ACRELAY_PROVISION_NOTES+=("Kubernetes manifests: SKIPPED - deploy/kubernetes/validate's modules could not be downloaded: $(tail -1 "$ACRELAY_TMP/k8s-mod.log")")
  fi
fi

# acrelay as a C2SP tlog-witness, driven by transparency-dev/witness's
# HTTP client: a module of its own (interop/tlogwitness), so that go.mod
# stays free of transparency-dev/witness and of the newer formats and
# prometheus/common versions it requires.
if [ $# -eq 0 ]; then
  echo "== interop/tlogwitness: go vet, staticcheck, go test -race -count=1 -v (its own module)"
  if (cd interop/tlogwitness && go mod download) >"$ACRELAY_TMP/tlogwitness-mod.log" 2>&1; then
    (cd interop/tlogwitness && go vet "${TAGS[@]}" . && { [ -z "${STATICCHECK:-}" ] || "$STATICCHECK" "${TAGS[@]}" .; } && go test "${TAGS[@]}" -race -count=1 -v .) 2>&1 | tee -a "$ACRELAY_TEST_LOG" | progress
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  else
    ACRELAY_PROVISION_NOTES+=("transparency-dev/witness client interop: SKIPPED - interop/tlogwitness's modules could not be downloaded: $(tail -1 "$ACRELAY_TMP/tlogwitness-mod.log")")
  fi
fi

if [ -n "${tree_before+set}" ]; then
  tree_new=$(LC_ALL=C comm -13 <(printf '%s\n' "$tree_before") <(tree_status) | grep -v '^$' || true)
  if [ -n "$tree_new" ]; then
    echo
    echo "== the suite changed the repository tree (tests must write only under temporary directories):"
    echo "$tree_new"
    status=1
  fi
fi

echo
echo "== packages"
grep -E '^(ok|FAIL|panic:|\?)\s' "$ACRELAY_TEST_LOG" | grep -v 'no test files' || true
if [ "$status" -ne 0 ]; then
  echo
  echo "== failures (with the output before each)"
  grep -n -B40 -E -- '^\s*--- FAIL|^panic:|^FAIL\s' "$ACRELAY_TEST_LOG" | grep -vE 'level=(INFO|DEBUG)' | tail -300
  keep="/tmp/acrelay-test-$(date +%s).log"; cp "$ACRELAY_TEST_LOG" "$keep"
  if [ -f "$ACRELAY_TMP/rerun.log" ]; then echo "== reruns" >>"$keep"; cat "$ACRELAY_TMP/rerun.log" >>"$keep"; fi
  echo "full log: $keep"
fi
echo
echo "== skipped (count, reason)"
# In -v output a test's t.Skip message is the line just before its "--- SKIP".
grep -E -B1 -- '^\s*--- SKIP' "$ACRELAY_TEST_LOG" | grep -vE -- '--- SKIP|^--$' | sed -E 's/^ *[A-Za-z0-9_]+\.go:[0-9]+: //' | sort | uniq -c | sort -rn | head -20
for note in "${ACRELAY_PROVISION_NOTES[@]}"; do echo "provision: $note"; done
passed=$(grep -cE '^\s*--- PASS' "$ACRELAY_TEST_LOG" || true)
failed=$(grep -cE '^\s*--- FAIL' "$ACRELAY_TEST_LOG" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$ACRELAY_TEST_LOG" || true)
if [ -s "$ACRELAY_TMP/flaky" ] && [ ! -e "$ACRELAY_TMP/rerun-failed" ]; then
  # Every test that failed passed when run again alone: each counts once,
  # as passed. The list says which, so a flaky test is seen and mended,
  # not hidden.
  passed=$((passed + failed)); failed=0
  echo
  echo "== FLAKY: failed in the suite, passed when run again alone (mend these):"
  sed 's/^/   /' "$ACRELAY_TMP/flaky"
  cp "$ACRELAY_TEST_LOG" "/tmp/acrelay-test-flaky-$(date +%s).log" && echo "   full log of the first run: $(ls -t /tmp/acrelay-test-flaky-*.log | head -1)"
fi
echo
echo "tests: ${passed} passed, ${failed} failed, ${skipped} skipped"
exit "$status"
