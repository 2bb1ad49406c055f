//! Hostile inputs to `tirc plan --records` and `tirc run` (issue 17): each ends in a diagnostic
//! naming the file that is at fault, exit code 1, never a panic, a wrapped number or a
//! megabyte-long message.

mod support;

use std::path::Path;
use support::*;

// ---- usage records as CSV -------------------------------------------------------------------

#[test]
fn an_inclusive_upper_of_u64_max_is_refused_at_its_line_and_column() {
    let dir = scratch("hostile", "csv-max");
    std::fs::write(
        dir.join("big.csv"),
        "id,lower,upper,size\na,0,3,16\nb,0,18446744073709551615,16\n",
    )
    .unwrap();
    let err = refused(&dir, &["plan", "--records", "big.csv", "--inclusive"]);
    assert!(
        err.starts_with("big.csv:3: error: `upper` must be below 18446744073709551615"),
        "{err}"
    );
}

#[test]
fn a_megabyte_csv_field_is_shortened_in_the_diagnostic() {
    let dir = scratch("hostile", "csv-long");
    let field = "9x".repeat(1 << 19);
    std::fs::write(
        dir.join("long.csv"),
        format!("id,lower,upper,size\na,0,{field},16\n"),
    )
    .unwrap();
    let err = refused(&dir, &["plan", "--records", "long.csv"]);
    assert!(err.starts_with("long.csv:2: error: `upper`"), "{err:.300}");
    assert!(err.len() < 400, "{} bytes: {err:.300}", err.len());
}

// ---- weights files --------------------------------------------------------------------------

const WEIGHTED: &str = "module @weighted {
  func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %w = const {name = \"w\"} : tensor<2x3xf32>
    %y = add(%x, %w)
    return %y
  }
}
";

/// A safetensors file: the 8-byte little-endian header length, the JSON header, the data.
fn safetensors(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// `tirc run` and `tirc compile` on `WEIGHTED` with `bytes` as `--weights w.safetensors`: both
/// must refuse it with the same message, which is returned.
fn weights_refused(test: &str, bytes: &[u8]) -> String {
    let dir = scratch("hostile", test);
    std::fs::write(dir.join("model.tir"), WEIGHTED).unwrap();
    std::fs::write(dir.join("w.safetensors"), bytes).unwrap();
    let by_run = refused(&dir, &["run", "model.tir", "--weights", "w.safetensors"]);
    let by_compile = refused(
        &dir,
        &[
            "compile",
            "model.tir",
            "-o",
            "model",
            "--weights",
            "w.safetensors",
        ],
    );
    assert_eq!(by_run, by_compile, "tirc run and tirc compile disagree");
    assert!(!dir.join("model").exists());
    by_run
}

#[test]
fn a_corrupt_weights_file_is_blamed_in_words() {
    // The offsets span 12 bytes, the shape 2x3 of f32 needs 24.
    let bytes = safetensors(
        r#"{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,12]}}"#,
        &[0; 12],
    );
    let err = weights_refused("weights-corrupt", &bytes);
    assert_eq!(
        err,
        "w.safetensors: error: the weights file is not a valid safetensors file: a tensor's data \
         offsets in the header do not span its shape times its dtype's size\n"
    );
}

#[test]
fn a_weight_of_another_shape_is_blamed_on_the_weights_file_naming_both() {
    let bytes = safetensors(
        r#"{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}"#,
        &[0; 12],
    );
    let err = weights_refused("weights-shape", &bytes);
    assert_eq!(
        err,
        "w.safetensors: error: `%w`: the weight `w` is tensor<3xf32> in the weights file, but \
         the IR declares tensor<2x3xf32>\n"
    );
}

#[test]
fn a_weight_of_another_dtype_is_blamed_on_the_weights_file_naming_both() {
    let bytes = safetensors(
        r#"{"w":{"dtype":"I32","shape":[2,3],"data_offsets":[0,24]}}"#,
        &[0; 24],
    );
    let err = weights_refused("weights-dtype", &bytes);
    assert_eq!(
        err,
        "w.safetensors: error: `%w`: the weight `w` is tensor<2x3xi32> in the weights file, but \
         the IR declares tensor<2x3xf32>\n"
    );
}

/// Runs `tirc args` expecting exit 1, returning its stderr.
fn refused(dir: &Path, args: &[&str]) -> String {
    exits(dir, args, 1)
}
