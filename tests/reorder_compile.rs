//! `tirc compile --reorder[=heuristic|exact]`: the reordered program's slab is never larger, and
//! the executable's outputs are bitwise identical to the input order's (the order changes only
//! when each tensor is computed, never what is computed).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Three wide branches computed before any is reduced: in the input order all three 32-channel
/// tensors are live at once; a depth-first order keeps one.
const FANOUT: &str = "module @fanout {
  func @main(%x: tensor<1x4x16x16xf32>) -> tensor<1x12x8x8xf32> {
    %w1 = const {name = \"w1\"} : tensor<32x4x1x1xf32>
    %w2 = const {name = \"w2\"} : tensor<32x4x1x1xf32>
    %w3 = const {name = \"w3\"} : tensor<32x4x1x1xf32>
    %v1 = const {name = \"v1\"} : tensor<4x32x1x1xf32>
    %v2 = const {name = \"v2\"} : tensor<4x32x1x1xf32>
    %v3 = const {name = \"v3\"} : tensor<4x32x1x1xf32>
    %a1 = conv2d(%x, %w1) {activation = relu} : tensor<1x32x16x16xf32>
    %a2 = conv2d(%x, %w2) {activation = relu} : tensor<1x32x16x16xf32>
    %a3 = conv2d(%x, %w3) {activation = relu} : tensor<1x32x16x16xf32>
    %b1 = conv2d(%a1, %v1) {strides = [2, 2]} : tensor<1x4x8x8xf32>
    %b2 = conv2d(%a2, %v2) {strides = [2, 2]} : tensor<1x4x8x8xf32>
    %b3 = conv2d(%a3, %v3) {strides = [2, 2]} : tensor<1x4x8x8xf32>
    %y = concat(%b1, %b2, %b3) {axis = 1} : tensor<1x12x8x8xf32>
    return %y
  }
}
";

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("tirc-reorder-compile-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles `model` with `extra` flags, runs it on its deterministic inputs, returns the output
/// file's bytes, the slab size it printed, and tirc's stderr.
fn build_and_run(dir: &Path, model: &Path, tag: &str, extra: &[&str]) -> (Vec<u8>, String, String) {
    let bin = dir.join(tag);
    let out = Command::new(env!("CARGO_BIN_EXE_tirc"))
        .arg("compile")
        .arg(model)
        .arg("-o")
        .arg(&bin)
        .args(["--opt-level", "1"])
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{tag}: {stderr}");
    let out_dir = dir.join(format!("{tag}.out"));
    std::fs::create_dir_all(&out_dir).unwrap();
    let run = Command::new(&bin)
        .arg("--output")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{tag}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    let slab = stdout
        .lines()
        .find(|l| l.contains("slab"))
        .unwrap_or_else(|| panic!("{tag}: no slab line in {stdout}"))
        .to_string();
    let bytes = std::fs::read(out_dir.join("y.npy")).unwrap();
    (bytes, slab, stderr)
}

fn slab_bytes(line: &str) -> u64 {
    line.split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}

/// `reorder (...): slab B -> A bytes` from tirc's stderr.
fn reorder_slabs(stderr: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains("reorder ("))
        .unwrap_or_else(|| panic!("no reorder line in {stderr}"));
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect();
    (nums[nums.len() - 2], nums[nums.len() - 1])
}

#[test]
fn reordering_lowers_the_slab_and_keeps_outputs_bitwise() {
    let dir = scratch();
    let model = dir.join("fanout.tir");
    std::fs::write(&model, FANOUT).unwrap();
    let (base, base_slab, _) = build_and_run(&dir, &model, "input", &[]);
    for (tag, flag) in [("heuristic", "--reorder"), ("exact", "--reorder=exact")] {
        let (got, slab, stderr) = build_and_run(&dir, &model, tag, &[flag]);
        assert_eq!(got, base, "{tag}: outputs differ from the input order's");
        let (before, after) = reorder_slabs(&stderr);
        assert!(
            after < before,
            "{tag}: reordering did not lower the slab: {stderr}"
        );
        assert!(
            slab_bytes(&slab) <= slab_bytes(&base_slab),
            "{tag}: compiled slab {slab} larger than the input order's {base_slab}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_reorder_mode_is_misuse() {
    let dir = scratch();
    let model = dir.join("fanout_misuse.tir");
    std::fs::write(&model, FANOUT).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tirc"))
        .arg("compile")
        .arg(&model)
        .arg("-o")
        .arg(dir.join("never"))
        .arg("--reorder=bogus")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dir.join("never").exists());
}

/// Two wide branches concatenated and reduced by a 1×1 convolution: compile shares the
/// concat's buffer, so both branches are live at once; partitioned (the conv over the concat
/// as the sum of two partial convs over sliced weights) each branch dies into its partial.
const DENSE: &str = "module @dense {
  func @main(%x: tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32> {
    %wa = const {name = \"wa\"} : tensor<32x4x1x1xf32>
    %wb = const {name = \"wb\"} : tensor<32x4x3x3xf32>
    %wy = const {name = \"wy\"} : tensor<4x64x1x1xf32>
    %a = conv2d(%x, %wa) {activation = relu} : tensor<1x32x16x16xf32>
    %b = conv2d(%x, %wb) {pads = [1, 1, 1, 1], activation = relu} : tensor<1x32x16x16xf32>
    %c = concat(%a, %b) {axis = 1} : tensor<1x64x16x16xf32>
    %y = conv2d(%c, %wy) : tensor<1x4x16x16xf32>
    return %y
  }
}
";

/// The f32 data of a little-endian `.npy` file (version 1 or 2 header).
fn npy_f32(bytes: &[u8]) -> Vec<f32> {
    assert_eq!(&bytes[..6], b"\x93NUMPY", "not an npy file");
    let (len, start) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        )
    };
    let header = String::from_utf8_lossy(&bytes[start..start + len]);
    assert!(header.contains("<f4"), "{header}");
    bytes[start + len..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn egg_rewriting_lowers_the_compiled_slab_and_computes_the_same() {
    // Its own directory: the other tests remove theirs while this one runs.
    let dir = std::env::temp_dir().join(format!("tirc-reorder-egg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("dense.tir");
    std::fs::write(&model, DENSE).unwrap();
    let (base, base_slab, _) = build_and_run(&dir, &model, "dense_input", &[]);
    let (got, slab, stderr) = build_and_run(
        &dir,
        &model,
        "dense_egg",
        &["--reorder=egg", "--time-limit", "5"],
    );
    let (before, after) = {
        let line = stderr
            .lines()
            .find(|l| l.contains("reorder (egg)"))
            .unwrap_or_else(|| panic!("no egg line in {stderr}"));
        // After the model's path, which may hold digits.
        let line = &line[line.find("): slab").expect("a slab report")..];
        let nums: Vec<u64> = line
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|s| s.parse().ok())
            .collect();
        (nums[0], nums[1])
    };
    assert!(after < before, "egg did not lower the slab: {stderr}");
    assert!(stderr.contains("2 sliced weights"), "{stderr}");
    // What the pass judged is what compile planned.
    assert_eq!(slab_bytes(&slab), after, "{stderr}");
    assert!(slab_bytes(&slab) < slab_bytes(&base_slab));
    // Partial sums change the summation order only: equal within 1e-5 of the output's scale.
    let (want, got) = (npy_f32(&base), npy_f32(&got));
    assert_eq!(want.len(), got.len());
    let scale = want.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-6);
    for (w, g) in want.iter().zip(&got) {
        assert!((w - g).abs() <= 1e-5 * scale, "{w} vs {g} (scale {scale})");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stem (conv, max pool) into a MobileNet v2 inverted residual (1×1 expansion, depthwise
/// 3×3, 1×1 projection, residual add): the kernel-wise split (SERENITY §3.3) computes the big
/// conv outputs in output-channel pieces, each pooled or carried through its slice of the
/// depthwise conv into a partial projection before the next piece exists.
const SPLITTABLE: &str = "module @splittable {
  func @main(%x: tensor<1x3x32x32xf32>) -> tensor<1x8x16x16xf32> {
    %conv1.weight = const {name = \"conv1.weight\"} : tensor<32x3x3x3xf32>
    %conv1.bias = const {name = \"conv1.bias\"} : tensor<32xf32>
    %reduce.weight = const {name = \"reduce.weight\"} : tensor<8x32x1x1xf32>
    %expand.weight = const {name = \"expand.weight\"} : tensor<48x8x1x1xf32>
    %dw.weight = const {name = \"dw.weight\"} : tensor<48x1x3x3xf32>
    %dw.bias = const {name = \"dw.bias\"} : tensor<48xf32>
    %project.weight = const {name = \"project.weight\"} : tensor<8x48x1x1xf32>
    %conv1 = conv2d(%x, %conv1.weight, %conv1.bias) {pads = [1, 1, 1, 1], activation = relu} : tensor<1x32x32x32xf32>
    %pool1 = max_pool(%conv1) {kernel = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]} : tensor<1x32x16x16xf32>
    %reduce = conv2d(%pool1, %reduce.weight) {activation = relu} : tensor<1x8x16x16xf32>
    %expand = conv2d(%reduce, %expand.weight) {activation = relu6} : tensor<1x48x16x16xf32>
    %dw = conv2d(%expand, %dw.weight, %dw.bias) {pads = [1, 1, 1, 1], groups = 48, activation = relu6} : tensor<1x48x16x16xf32>
    %project = conv2d(%dw, %project.weight) : tensor<1x8x16x16xf32>
    %y = add(%reduce, %project) : tensor<1x8x16x16xf32>
    return %y
  }
}
";

#[test]
fn kernel_wise_partitioning_lowers_the_compiled_slab_and_computes_the_same() {
    let dir = std::env::temp_dir().join(format!("tirc-reorder-kernel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("splittable.tir");
    std::fs::write(&model, SPLITTABLE).unwrap();
    let (base, base_slab, _) = build_and_run(&dir, &model, "split_input", &[]);
    let (got, slab, stderr) = build_and_run(
        &dir,
        &model,
        "split_egg",
        &["--reorder=egg", "--time-limit", "5"],
    );
    assert!(stderr.contains("kept `kernel`"), "{stderr}");
    assert!(
        slab_bytes(&slab) < slab_bytes(&base_slab),
        "compiled slab {slab} not below the input's {base_slab}: {stderr}"
    );
    // The reference: the interpreter on the original program, same seed as the executable.
    let reference = dir.join("reference.npy");
    let run = Command::new(env!("CARGO_BIN_EXE_tirc"))
        .arg("run")
        .arg(&model)
        .arg("-o")
        .arg(&reference)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let want = npy_f32(&std::fs::read(&reference).unwrap());
    let scale = want.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-6);
    for (tag, out) in [("input", &base), ("egg", &got)] {
        let out = npy_f32(out);
        assert_eq!(want.len(), out.len(), "{tag}");
        for (w, g) in want.iter().zip(&out) {
            assert!(
                (w - g).abs() <= 1e-5 * scale,
                "{tag}: {w} vs {g} (scale {scale})"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// NASNet-A's factorized reduction and DARTS' shifted stride-2 conv, small: the shifted paths
/// pad and copy the whole input before keeping a quarter of it (see `rewrite::shrink`).
const FACTORIZED: &str = include_str!("models/factorized.tir");

#[test]
fn shrinking_a_factorized_reduction_lowers_the_compiled_slab_bitwise() {
    let dir = std::env::temp_dir().join(format!("tirc-reorder-shrink-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("factorized.tir");
    std::fs::write(&model, FACTORIZED).unwrap();
    let (base, base_slab, _) = build_and_run(&dir, &model, "shrink_input", &[]);
    let (got, slab, stderr) = build_and_run(
        &dir,
        &model,
        "shrink_egg",
        &["--reorder=egg", "--time-limit", "5"],
    );
    assert!(
        slab_bytes(&slab) < slab_bytes(&base_slab),
        "compiled slab {slab} not below the input's {base_slab}: {stderr}"
    );
    // Strided slices and pads of the executable read and copy the same elements.
    assert_eq!(got, base, "outputs differ: {stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
