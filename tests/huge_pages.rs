//! The executable's slab on transparent huge pages (issue 20, stable speed): a slab of 2 MiB
//! or more is allocated 2 MiB-aligned and advised to huge pages, `TIR_HUGE_PAGES=0` keeps
//! 4 KiB pages. Either way the program computes the same bits, at 1 and 2 threads, and they
//! are the model's values.

use std::path::PathBuf;
use std::process::Command;
use tir_interp::{npy, Tensor};

/// `a = x + x` lives in the slab (4 MiB: more than one huge page, and not a multiple of one),
/// `y = a + x` is the output.
const MODEL: &str = "module @big {
  func @main(%x: tensor<1x1x1000x1100xf32>) -> tensor<1x1x1000x1100xf32> {
    %a = add(%x, %x)
    %b = sigmoid(%a)
    %y = add(%b, %x)
    return %y
  }
}
";

#[test]
fn huge_and_small_pages_give_the_same_outputs() {
    let dir = std::env::temp_dir().join(format!("tirc-huge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("model.tir"), MODEL).unwrap();
    let n = 1000 * 1100;
    let xs: Vec<f32> = (0..n).map(|i| ((i % 977) as f32 - 488.0) / 97.0).collect();
    let x = Tensor::f32(vec![1, 1, 1000, 1100], xs.clone()).unwrap();
    std::fs::write(dir.join("x.npy"), npy::write(&x).unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tirc"))
        .current_dir(&dir)
        .args(["compile", "model.tir", "-o", "model", "--opt-level", "0"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = |huge: &str, threads: &str| -> Vec<u32> {
        let file: PathBuf = dir.join(format!("y-{huge}-{threads}.npy"));
        let out = Command::new(dir.join("model"))
            .current_dir(&dir)
            .env("TIR_HUGE_PAGES", huge)
            .args(["--input", "x=x.npy", "--threads", threads, "--output"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("slab: 4400000 bytes"), "{stdout}");
        let y = npy::read(&std::fs::read(file).unwrap()).unwrap();
        y.as_f32().unwrap().iter().map(|v| v.to_bits()).collect()
    };
    let huge = run("1", "1");
    assert_eq!(huge, run("0", "1"), "4 KiB pages change the outputs");
    assert_eq!(huge, run("1", "2"), "2 threads change the outputs");
    // The values: sigmoid(2x) + x, against the interpreter.
    let module = tir_ir::parse_and_verify(MODEL).unwrap();
    let weights = tir_interp::Weights::generate(&module, 0).unwrap();
    let want = tir_interp::run(&module, &weights, &[x]).unwrap();
    for (i, (&g, &w)) in huge.iter().zip(want[0].as_f32().unwrap()).enumerate() {
        let g = f32::from_bits(g);
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "element {i}: {g} vs {w}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
