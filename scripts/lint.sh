#!/usr/bin/env bash
# make lint: gofmt, go vet and the pinned staticcheck over the whole module.
# Fails on any finding, and when staticcheck cannot be provisioned.
set -uo pipefail
cd "$(dirname "$0")/.."
ACRELAY_PROVISION_NOTES=()
. scripts/provision_staticcheck.sh
provision_staticcheck
for note in "${ACRELAY_PROVISION_NOTES[@]}"; do echo "provision: $note"; done

echo "== gofmt -l, go vet, staticcheck"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
# -tags goolm: every build carries it (mautrix's pure-Go olm; see scripts/test.sh)
go vet -tags goolm ./... || exit 1
go vet ./... || exit 1
[ -n "${STATICCHECK:-}" ] || { echo "staticcheck is not available (see the provision note above)"; exit 1; }
"$STATICCHECK" -tags goolm ./... || exit 1
# deploy/kubernetes/validate is a module of its own (k8s.io/api stays out of go.mod)
(cd deploy/kubernetes/validate && go vet . && "$STATICCHECK" .) || exit 1
