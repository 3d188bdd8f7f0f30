#!/usr/bin/env bash
# Builds the images the real node runs, as root, with no registry: docker-archive tarballs in
# $NODE_IMAGES that up.sh imports into containerd (a running node imports them at once).
#   images.sh [base|project|all]   (default: all)
#     base:    pause, CoreDNS and metrics-server (static binaries, FROM scratch); a Python 3.11 base,
#              a Redis and a PostgreSQL image, made from Debian's packages with mmdebstrap
#     project: loadstage's operator, runner-app and injector from the project's own Dockerfile,
#              built on that Python base (build argument PYTHON_IMAGE)
# Cached: root filesystems by their package lists, base images by their references, the project's
# layers by buildah; a project tarball is rewritten only when its image changed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_root
what=${1:-all}
case "$what" in base|project|all) ;; *) die "usage: images.sh [base|project|all]" ;; esac
for tool in buildah mmdebstrap gcc; do command -v "$tool" >/dev/null || die "$tool is missing: run scripts/setup --realnode"; done
BIN=$(bin_dir)
ROOTFS=$NODE_HOME/rootfs
mkdir -p "$NODE_IMAGES" "$ROOTFS"
# a working container left by a failed step is unmounted and removed on the way out
working=""
trap '[ -z "$working" ] || buildah rm "$working" >/dev/null 2>&1' EXIT

# save REF NAME: the image as a docker-archive tarball that keeps its reference
save() {
  rm -f "$NODE_IMAGES/$2.tar"
  buildah push --quiet "$1" "docker-archive:$NODE_IMAGES/$2.tar.tmp:$1" >/dev/null
  mv "$NODE_IMAGES/$2.tar.tmp" "$NODE_IMAGES/$2.tar"
  echo "$1" > "$NODE_IMAGES/$2.ref"
  say "saved $1 ($(du -h "$NODE_IMAGES/$2.tar" | cut -f1))"
}

# scratch_image REF NAME FILE USER ENTRYPOINT...: one static binary in an empty image
scratch_image() {
  local ref=$1 name=$2 file=$3 user=$4 container entrypoint; shift 4
  [ -s "$NODE_IMAGES/$name.tar" ] && return
  entrypoint=$(printf '"%s",' "$@"); entrypoint="[${entrypoint%,}]"
  container=$(buildah from scratch); working=$container
  buildah copy --quiet "$container" "$file" "/$(basename "$file")" >/dev/null
  buildah config --entrypoint "$entrypoint" --cmd '' --user "$user" "$container"
  buildah commit --quiet --rm "$container" "$ref" >/dev/null; working=""
  save "$ref" "$name"
}

# The Debian mirrors apt uses on this machine (deb822 sources).
mirrors() {
  local main security
  main=$(awk '/^URIs:/ {print $2}' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n 1)
  security=$(awk '/^URIs:/ {print $2}' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep security | head -n 1)
  main=${DEBIAN_MIRROR:-${main:-http://deb.debian.org/debian}}
  security=${DEBIAN_SECURITY_MIRROR:-${security:-http://deb.debian.org/debian-security}}
  printf '%s\n' "deb $main bookworm main" "deb $main bookworm-updates main" "deb $security bookworm-security main"
}

# debian_image REF NAME PACKAGES CONFIG...: a bookworm minbase root filesystem with PACKAGES,
# then `buildah config CONFIG...`; ESSENTIAL_HOOK, if set, runs before PACKAGES are installed
debian_image() {
  local ref=$1 name=$2 packages=$3 hook=${ESSENTIAL_HOOK:-} rootfs container mount; shift 3
  [ -s "$NODE_IMAGES/$name.tar" ] && return
  rootfs=$ROOTFS/$name-$(echo "$packages${hook:+ $hook}" | sha256sum | cut -c1-12).tar
  if [ ! -s "$rootfs" ]; then
    say "mmdebstrap $name: $packages"
    local sources=(); mapfile -t sources < <(mirrors)
    mmdebstrap --quiet --variant=minbase --include="$packages" --essential-hook="${hook:-true}" \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
      bookworm "${rootfs%.tar}.partial.tar" "${sources[@]}"   # the suffix tells mmdebstrap: a tarball
    mv "${rootfs%.tar}.partial.tar" "$rootfs"
  fi
  container=$(buildah from scratch); working=$container
  mount=$(buildah mount "$container")
  tar -C "$mount" -xf "$rootfs"
  buildah umount "$container" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --label org.opencontainers.image.description="Debian bookworm with $packages, for loadstage's real-node tests" \
    "$@" "$container"
  buildah commit --quiet --rm "$container" "$ref" >/dev/null; working=""
  save "$ref" "$name"
}

if [ "$what" != project ]; then
  if [ ! -s "$NODE_IMAGES/pause.tar" ]; then
    mkdir -p "$NODE_HOME/src"
    gcc -Os -static -o "$NODE_HOME/src/pause" "$REALNODE_DIR/pause/pause.c"
    strip "$NODE_HOME/src/pause"
  fi
  scratch_image "$PAUSE_IMAGE" pause "$NODE_HOME/src/pause" 65535:65535 /pause
  scratch_image "$COREDNS_IMAGE" coredns "$BIN/coredns" 0:0 /coredns
  scratch_image "$METRICS_SERVER_IMAGE" metrics-server "$BIN/metrics-server" 1000:1000 /metrics-server
  debian_image "$PYTHON_BASE_IMAGE" python python3,python3-venv,ca-certificates,netbase --cmd '["python3"]'
  # no entrypoint: the operator's args (redis-server ...) are the command, as with the official image
  debian_image "$REDIS_IMAGE" redis redis-server --workingdir /data --entrypoint '[]' --cmd '["redis-server"]'
  # the history's database in the real node's tests: its user made first, with a uid the pods name
  pg_user="postgres:x:$POSTGRES_UID:$POSTGRES_UID:PostgreSQL:/var/lib/postgresql:/bin/sh"
  ESSENTIAL_HOOK="echo '$pg_user' >> \"\$1/etc/passwd\"; echo 'postgres:x:$POSTGRES_UID:' >> \"\$1/etc/group\"" \
    debian_image "$POSTGRES_IMAGE" postgres postgresql-15 --user "$POSTGRES_UID:$POSTGRES_UID" \
    --env PATH=/usr/lib/postgresql/15/bin:/usr/sbin:/usr/bin:/sbin:/bin --entrypoint '[]' --cmd '["postgres"]'
fi

if [ "$what" != base ]; then
  [ -s "$NODE_IMAGES/python.tar" ] || die "no Python base image yet: run images.sh base first"
  # pip may have to pass a TLS-intercepting proxy: the build's RUN steps see this machine's CA
  # bundle and pip configuration, mounted read-only; nothing of them lands in an image.
  mounts=()
  for file in /etc/ssl/certs/ca-certificates.crt /etc/pip.conf; do
    [ -f "$file" ] && mounts+=(--volume "$file:$file:ro")
  done
  for target in $PROJECT_TARGETS; do
    ref=$(project_image "$target")
    started=$SECONDS
    (cd "$PROJECT_ROOT" && buildah bud --quiet --layers --pull=never --network=host "${mounts[@]}" \
       --build-arg "PYTHON_IMAGE=$PYTHON_BASE_IMAGE" --target "$target" --tag "$ref" . >/dev/null)
    id=$(buildah images --quiet --no-trunc "$ref" | head -n 1)
    if [ "$(cat "$NODE_IMAGES/loadstage-$target.id" 2>/dev/null)" != "$id" ] || [ ! -s "$NODE_IMAGES/loadstage-$target.tar" ]; then
      save "$ref" "loadstage-$target"
      echo "$id" > "$NODE_IMAGES/loadstage-$target.id"
    fi
    say "$ref built in $(( SECONDS - started ))s"
  done
fi
if [ -S "$NODE_SOCKET" ] && ctr --address "$NODE_SOCKET" version >/dev/null 2>&1; then import_images; fi
