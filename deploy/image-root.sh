#!/bin/sh
# Assembles the release image's whole file tree in DIR: the static acrelay
# binary, Debian's CA bundle, an /etc/passwd and /etc/group naming the
# non-root user acrelay (65532), the data directory and /tmp. Both image
# recipes run it — deploy/Dockerfile inside its golang build stage,
# deploy/Containerfile on this machine before `podman build` — so both
# images hold the same binary, built by the one command below:
#   CGO_ENABLED=0: static, runs FROM scratch;
#   -tags goolm: the Matrix courier's end-to-end encryption with
#     mautrix's pure-Go olm (without it, encrypted rooms are refused);
#   -trimpath: no build-machine paths in the binary;
#   -buildvcs=false: no VCS stamp (the image build has no .git), so the
#     bytes depend only on the source and the Go release.
# Usage, from anywhere: deploy/image-root.sh DIR
set -eu
dir=${1:?usage: deploy/image-root.sh DIR}
case "$dir" in /*) ;; *) dir="$(pwd)/$dir" ;; esac
cd "$(dirname "$0")/.."
certs=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$certs" ]; then
  echo "image-root.sh: $certs missing: install Debian's ca-certificates" >&2
  exit 1
fi
mkdir -p "$dir/usr/local/bin" "$dir/etc/ssl/certs" "$dir/var/lib/acrelay" "$dir/tmp"
chmod 1777 "$dir/tmp"
chmod 0700 "$dir/var/lib/acrelay"
CGO_ENABLED=0 go build -tags goolm -trimpath -buildvcs=false -o "$dir/usr/local/bin/acrelay" ./cmd/acrelay
cp "$certs" "$dir/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nacrelay:x:65532:65532:acrelay:/var/lib/acrelay:/sbin/nologin\n' >"$dir/etc/passwd"
printf 'root:x:0:\nacrelay:x:65532:\n' >"$dir/etc/group"
