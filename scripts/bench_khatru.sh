#!/usr/bin/env bash
# Side-by-side ingest (issue 36): acrelay (its own relay on SQLite,
# fdatasync before every 201, and its durable bound) against khatru
# v0.19.1 (github.com/fiatjaf/khatru, MIT) on eventstore badger (no fsync)
# and sqlite3 (WAL, synchronous FULL and NORMAL), interleaved in one run.
# Not part of the test command: a measurement, minutes long.
#
#   scripts/bench_khatru.sh                      # 3 rounds, 20,000 events, 8 and 16 clients
#   ROUNDS=5 EVENTS=10000 CLIENTS="8" scripts/bench_khatru.sh
#   OUT=/tmp/khatru.jsonl scripts/bench_khatru.sh  # keep the JSON lines
#
# The khatru side is scripts/khatru-bench (its own module, so acrelay's
# go.mod gains no nostr dependencies), copied into the cache and built
# there with cgo (eventstore's sqlite3 backend is mattn/go-sqlite3): a
# comparison tool, not the relay, which stays CGO_ENABLED=0. Fetched code
# and binaries live only under ${XDG_CACHE_HOME:-$HOME/.cache}/acrelay/.
#
# Each round runs, for each client count: acrelay-bench --json
# --compare-durable-bound (the relay, then the durable bound), then
# khatru-bench run for badger, sqlite3 FULL and sqlite3 NORMAL. Every
# line is a JSON result with events/s, p50/p99 and the server process's
# CPU per event from /proc/PID/stat; the table at the end gives medians
# and each round's ratios (the machine may be shared: compare within a
# round), and the load average before each run.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${ROUNDS:-3}
events=${EVENTS:-20000}
clients=${CLIENTS:-"8 16"}
v=v0.19.1
cache="${XDG_CACHE_HOME:-$HOME/.cache}/acrelay/khatru-$v"
work=$(mktemp -d /tmp/bench-khatru-XXXXXX)
trap 'rm -rf "$work"' EXIT
out=${OUT:-$work/results.jsonl}
: >"$out"

command -v cc >/dev/null || { echo "bench_khatru: no C compiler (cc): eventstore's sqlite3 backend needs cgo" >&2; exit 1; }

# khatru-bench: rebuilt when its sources change.
stamp=$(cat scripts/khatru-bench/go.mod scripts/khatru-bench/go.sum scripts/khatru-bench/main.go | sha256sum | cut -c1-16)
if [ ! -x "$cache/khatru-bench" ] || [ "$(cat "$cache/khatru-bench.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "== building khatru-bench (khatru $v, eventstore badger + sqlite3 with cgo) in $cache" >&2
  mkdir -p "$cache/src"
  cp scripts/khatru-bench/go.mod scripts/khatru-bench/go.sum scripts/khatru-bench/main.go "$cache/src/"
  (cd "$cache/src" && GOWORK=off CGO_ENABLED=1 GOFLAGS=-buildvcs=false go build -o "$cache/khatru-bench" .)
  echo "$stamp" >"$cache/khatru-bench.stamp"
fi
khatru="$cache/khatru-bench"

# acrelay and acrelay-bench from this checkout (acrelay-bench runs the
# acrelay beside it).
echo "== building acrelay and acrelay-bench" >&2
go build -tags goolm -o "$work/acrelay" ./cmd/acrelay
go build -tags goolm -o "$work/acrelay-bench" ./cmd/acrelay-bench

load() { echo "# load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out" >&2; }

for r in $(seq 1 "$rounds"); do
  for c in $clients; do
    echo "== round $r/$rounds, $c clients" >&2
    load; "$work/acrelay-bench" --json --events "$events" --clients "$c" --compare-durable-bound | tee -a "$out"
    load; "$khatru" run --backend badger --events "$events" --clients "$c" | tee -a "$out"
    load; "$khatru" run --backend sqlite3 --synchronous FULL --events "$events" --clients "$c" | tee -a "$out"
    load; "$khatru" run --backend sqlite3 --synchronous NORMAL --events "$events" --clients "$c" | tee -a "$out"
  done
done
load
echo
"$khatru" table <"$out"
