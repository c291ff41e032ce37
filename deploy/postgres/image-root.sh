#!/bin/sh
# Assembles, in DIR, the tree of a PostgreSQL image made from this
# machine's Debian packages (postgresql-NN, util-linux, coreutils, dash),
# for machines that cannot pull docker.io/library/postgres: the server
# binaries and every shared library they load (found with ldd), the
# share directory, the time zone data, a shell, and the entry point
# (entrypoint.sh) that honours the subset of the official image's
# contract deploy/compose.yaml uses. Debian's postgresql must be
# installed. Usage: deploy/postgres/image-root.sh DIR; then
#   podman build --format docker -f deploy/postgres/Containerfile -t acrelay-postgres DIR/..
set -eu
dir=${1:?usage: deploy/postgres/image-root.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
pg=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$pg" ]; then
  echo "postgres/image-root.sh: no /usr/lib/postgresql/*/bin: install Debian's postgresql" >&2
  exit 1
fi
pg=$(dirname "$pg")
v=$(basename "$pg")
mkdir -p "$dir"
# binaries and the server's modules (llvmjit left out: it pulls in LLVM)
bins="$pg/bin/postgres $pg/bin/initdb $pg/bin/pg_isready $pg/bin/psql /bin/sh /usr/bin/setpriv /usr/bin/chown"
mods=$(ls "$pg"/lib/*.so | grep -v llvmjit)
for f in $bins $mods; do
  mkdir -p "$dir$(dirname "$f")"
  cp -L "$f" "$dir$f"
done
# every library they load, at the path the loader looks for it
for f in $bins $mods; do ldd "$f" 2>/dev/null; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u |
  while read -r lib; do
    mkdir -p "$dir$(dirname "$lib")"
    cp -L "$lib" "$dir$lib"
  done
mkdir -p "$dir/usr/share/postgresql" "$dir/usr/share" "$dir/etc" "$dir/tmp" \
  "$dir/var/lib/postgresql/data" "$dir/var/run/postgresql" "$dir/usr/local/bin"
cp -r "/usr/share/postgresql/$v" "$dir/usr/share/postgresql/"
cp -r /usr/share/zoneinfo "$dir/usr/share/"
chmod 1777 "$dir/tmp"
printf 'root:x:0:0:root:/root:/bin/sh\npostgres:x:999:999:PostgreSQL:/var/lib/postgresql:/bin/sh\n' >"$dir/etc/passwd"
printf 'root:x:0:\npostgres:x:999:\n' >"$dir/etc/group"
sed "s|@PGBIN@|$pg/bin|" "$here/entrypoint.sh" >"$dir/usr/local/bin/entrypoint.sh"
chmod 755 "$dir/usr/local/bin/entrypoint.sh"
# on the default PATH, as in the official image (compose's healthcheck calls pg_isready)
for b in pg_isready psql; do ln -sf "$pg/bin/$b" "$dir/usr/local/bin/$b"; done
