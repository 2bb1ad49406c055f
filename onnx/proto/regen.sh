#!/usr/bin/env bash
# Regenerates onnx/src/proto.rs from onnx/proto/onnx.proto (copied from the `onnx` Python
# package, version in bench/onnx/requirements.txt). Needs no system `protoc`: protox compiles
# the .proto in Rust. The build of tir itself never runs this.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/tmp/target-onnx-proto-gen}" \
    cargo run --quiet --manifest-path "$here/gen/Cargo.toml"
rustfmt --edition 2021 "$here/../src/proto.rs"
