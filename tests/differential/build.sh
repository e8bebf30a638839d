#!/usr/bin/env bash
# Build the serde_json oracle of the differential tests, offline, from
# Debian's packaged crates; print the path of the binary on stdout.
#
#   SESSIONSTORE_SERDE_ORACLE=$(tests/differential/build.sh)
#
# Installs the -dev packages (and cargo, when there is none) with apt-get
# when they are missing. The build goes to $SESSIONSTORE_DIFFERENTIAL_TARGET
# (default /tmp/sessionstore-differential), outside the repository.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target="${SESSIONSTORE_DIFFERENTIAL_TARGET:-/tmp/sessionstore-differential}"
registry=/usr/share/cargo/registry
packages=(librust-serde-json-dev librust-serde-derive-dev librust-chrono-dev librust-uuid-dev)

missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" \
        || missing+=("$package")
done
export PATH="$PATH:${HOME:-/root}/.cargo/bin"
command -v cargo >/dev/null || missing+=(cargo)
if ((${#missing[@]})); then
    echo "differential: apt-get install ${missing[*]}" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >&2
fi

# Debian's crates stand in for crates.io; the lock file is made here, from
# whatever versions this machine has, so it lives in the target directory.
mkdir -p "$target/src"
for file in Cargo.toml src/main.rs; do  # copied only when changed, so a rebuild is a no-op
    cmp -s "$here/serde_roundtrip/$file" "$target/$file" || cp "$here/serde_roundtrip/$file" "$target/$file"
done
cargo build --offline --release --quiet \
    --manifest-path "$target/Cargo.toml" --target-dir "$target/build" \
    --config "source.crates-io.replace-with=\"debian\"" \
    --config "source.debian.directory=\"$registry\"" >&2
echo "$target/build/release/serde_roundtrip"
