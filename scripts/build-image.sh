#!/usr/bin/env bash
# The container image's build steps (the Dockerfile only calls this; CI runs it too, since
# these machines have no container engine): build the release binary, check it, and stage
# the image's files under OUT.
# usage: scripts/build-image.sh OUT
#   OUT/usr/local/bin/cyberos-mcp-bridge            the stripped binary
#   OUT/usr/share/doc/cyberos-mcp-bridge/           README, LICENSE, CHANGELOG, example config
#   OUT/var/lib/cyberos-mcp-bridge/                 the data dir (owned by 65532, distroless' nonroot)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/build-image.sh OUT}
target=${CARGO_TARGET_DIR:-target}

# The commit for --version: the image build has no .git unless the context carries it.
if [ -z "${CYBEROS_BUILD_COMMIT:-}" ] && git rev-parse --short=12 HEAD >/dev/null 2>&1; then
  CYBEROS_BUILD_COMMIT=$(git rev-parse --short=12 HEAD)
  export CYBEROS_BUILD_COMMIT
fi
cargo build --release --locked --bin cyberos-mcp-bridge
bin="$target/release/cyberos-mcp-bridge"

# The binary must be stripped, must run, and must name its version.
if readelf -S "$bin" | grep -q '\.symtab'; then
  echo "build-image: $bin carries a symbol table; the release profile must strip it" >&2
  exit 1
fi
version=$("$bin" --version)
case "$version" in
  "cyberos-mcp-bridge $(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1) (commit "*) ;;
  *) echo "build-image: unexpected --version: $version" >&2; exit 1 ;;
esac

rm -rf "$out"
install -D -m 0755 "$bin" "$out/usr/local/bin/cyberos-mcp-bridge"
doc="$out/usr/share/doc/cyberos-mcp-bridge"
install -D -m 0644 -t "$doc" README.md LICENSE CHANGELOG.md examples/cyberos.toml
install -d -m 0700 "$out/var/lib/cyberos-mcp-bridge"
if [ "$(id -u)" -eq 0 ]; then chown 65532:65532 "$out/var/lib/cyberos-mcp-bridge"; fi
echo "build-image: $version, $(stat -c %s "$bin") bytes, staged in $out"
