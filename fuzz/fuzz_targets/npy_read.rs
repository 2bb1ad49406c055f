//! `.npy` bytes → `tir_interp::npy::read`, as `tirc run --input NAME=FILE.npy` reads an input
//! (`src/cli/run.rs`). A tensor read must be consistent (its data matches its type), and
//! writing it (as `tirc run -o` does) and reading that back must give the same type and the
//! same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tir_interp::npy;

fuzz_target!(|data: &[u8]| {
    let t = match npy::read(data) {
        Ok(t) => t,
        Err(e) => {
            let _ = format!("fuzz.npy: error: input `%x`: {e}");
            return;
        }
    };
    assert!(t.is_consistent(), "read an inconsistent tensor: {}", t.ty);
    let _ = t.ty.to_string();
    let written = match npy::write(&t) {
        Ok(w) => w,
        Err(e) => panic!("a tensor read from .npy cannot be written back: {e}"),
    };
    let back = match npy::read(&written) {
        Ok(b) => b,
        Err(e) => panic!("a written .npy does not read back: {e}"),
    };
    assert_eq!(back.ty, t.ty, "the type changed through write + read");
    assert!(
        back.data.to_le_bytes() == t.data.to_le_bytes(),
        "the data changed through write + read"
    );
});
