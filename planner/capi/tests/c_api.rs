//! The C API from C: compiles `tests/c/plan.c` against `include/tir_planner.h` and the static
//! library with the system C compiler (`cc`), runs it, and checks its plans against the Rust
//! planner and the independent checker.

use std::path::{Path, PathBuf};
use std::process::Command;

use tir_planner::checker::{check_offsets, check_shared_objects};
use tir_planner::{
    lower_bounds, plan_offsets, plan_shared_objects, OffsetStrategy, OffsetsPlan,
    SharedObjectStrategy, SharedObjectsPlan, UsageRecord,
};

/// `libtir_planner_c.a`: `cargo test` builds it beside the test executable in `deps/`,
/// `cargo build` one directory up.
fn static_library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe
        .parent()
        .expect("test executable in target/<profile>/deps");
    let candidates = [deps.to_path_buf(), deps.join("..")];
    candidates
        .iter()
        .map(|d| d.join("libtir_planner_c.a"))
        .find(|lib| lib.exists())
        .unwrap_or_else(|| panic!("libtir_planner_c.a not built in {}", deps.display()))
}

/// Compiles the C program once per test into a fresh directory.
fn compile(dir: &Path) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.join("plan");
    let output = Command::new("cc")
        .arg("-std=c99")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(manifest.join("../include"))
        .arg(manifest.join("tests/c/plan.c"))
        .arg(static_library())
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .expect("run cc");
    assert!(
        output.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tir-planner-c-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

fn run(exe: &Path, offsets: &str, objects: &str, align: u64, records: &[UsageRecord]) -> String {
    let output = Command::new(exe)
        .args([offsets, objects, &align.to_string()])
        .args(
            records
                .iter()
                .map(|r| format!("{}:{}:{}", r.size, r.first_op, r.last_op)),
        )
        .output()
        .expect("run the C program");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

fn values(out: &str, key: &str) -> Vec<u64> {
    out.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .map(|v| v.parse().expect("a number"))
        .collect()
}

/// The seed paper's running example shape: a chain with a skip connection and a wide join.
fn records() -> Vec<UsageRecord> {
    [
        (32, 0, 1),
        (28, 1, 4),
        (36, 2, 5),
        (16, 3, 5),
        (8, 4, 5),
        (64, 5, 7),
        (10, 6, 8),
        (40, 7, 8),
    ]
    .into_iter()
    .map(|(size, first, last)| UsageRecord::new(size, first, last))
    .collect()
}

#[test]
fn c_program_gets_the_planners_plans() {
    let dir = temp_dir("plans");
    let exe = compile(&dir);
    let records = records();
    for (offsets_name, objects_name, align) in [
        ("greedy_by_size", "greedy_by_size_improved", 1),
        ("greedy_by_breadth", "greedy_by_breadth", 64),
        ("best", "best", 8),
    ] {
        let out = run(&exe, offsets_name, objects_name, align, &records);
        let offsets = values(&out, "offset");
        let slab = values(&out, "slab");
        let plan = OffsetsPlan {
            offsets,
            total_size: slab[0],
        };
        check_offsets(&records, &plan, align).expect("the C API's offsets pass the checker");
        let strategy: OffsetStrategy = offsets_name.parse().unwrap();
        assert_eq!(plan, plan_offsets(&records, strategy, align).unwrap());
        let bounds = lower_bounds(&records, align).unwrap();
        assert_eq!(values(&out, "offsets_lower_bound"), [bounds.offsets]);
        assert_eq!(
            values(&out, "shared_objects_lower_bound"),
            [bounds.shared_objects]
        );

        let objects = SharedObjectsPlan {
            object_ids: values(&out, "object")
                .into_iter()
                .map(|v| v as usize)
                .collect(),
            object_sizes: values(&out, "object_size"),
        };
        check_shared_objects(&records, &objects).expect("the C API's objects pass the checker");
        let strategy: SharedObjectStrategy = objects_name.parse().unwrap();
        assert_eq!(
            objects,
            plan_shared_objects(&records, strategy, align).unwrap()
        );
        assert_eq!(values(&out, "cost"), [objects.cost()]);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn c_program_gets_errors_as_codes_and_messages() {
    let dir = temp_dir("errors");
    let exe = compile(&dir);
    let out = run(&exe, "no_such", "greedy_by_size", 64, &records());
    assert!(
        out.contains("offsets error 2: unknown strategy `no_such`; expected one of:"),
        "{out}"
    );
    // The objects half still plans: one failure does not poison the next call.
    assert!(out.contains("cost "), "{out}");
    let inverted = [UsageRecord {
        size: 8,
        first_op: 2,
        last_op: 1,
    }];
    let out = run(&exe, "greedy_by_size", "greedy_by_size", 64, &inverted);
    assert!(
        out.contains("offsets error 3: usage record 0 has first_op 2 after last_op 1"),
        "{out}"
    );
    let out = run(&exe, "naive", "naive", 0, &records());
    assert!(
        out.contains("offsets error 4: alignment must be at least 1"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
