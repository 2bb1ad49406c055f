//! Every committed `examples/*.tir` is exactly what the generator writes today.

use std::path::PathBuf;

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

#[test]
fn committed_examples_are_up_to_date() {
    let dir = examples_dir();
    let mut stale = Vec::new();
    for spec in tir_zoo::models() {
        let path = dir.join(spec.file);
        let expected = tir_zoo::generate_spec(&spec).expect("model generates");
        match std::fs::read_to_string(&path) {
            Ok(text) if text == expected => {}
            Ok(_) => stale.push(format!(
                "{} differs from the generator's output",
                path.display()
            )),
            Err(e) => stale.push(format!("{} cannot be read: {e}", path.display())),
        }
    }
    assert!(
        stale.is_empty(),
        "{}\nregenerate them with `cargo run -- zoo`",
        stale.join("\n")
    );
}

#[test]
fn generation_is_deterministic() {
    for spec in tir_zoo::models() {
        let a = tir_zoo::generate_spec(&spec).expect("model generates");
        let b = tir_zoo::generate_spec(&spec).expect("model generates");
        assert_eq!(a, b, "{} is not deterministic", spec.name);
    }
}

#[test]
fn names_and_files_are_unique() {
    let specs = tir_zoo::models();
    for (i, a) in specs.iter().enumerate() {
        assert_eq!(a.file, format!("{}.tir", a.name));
        for b in &specs[i + 1..] {
            assert_ne!(a.name, b.name);
        }
    }
}
