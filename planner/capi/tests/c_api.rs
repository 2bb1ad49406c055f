//! The C API from C: compiles `tests/c/plan.c` against `include/tir_planner.h` and the static
//! library with the system C compiler (`cc`), runs it, and checks its plans against the Rust
//! planner and the independent checker.

use std::path::{Path, PathBuf};
use std::process::Command;

use tir_planner::checker::{check_offsets, check_shared_objects, check_shared_objects_nd};
use tir_planner::multidim::{
    lower_bound_nd, plan_shared_objects_nd, SharedObjectsPlanNd, UsageRecord2d, UsageRecord3d,
};
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
    compile_program(dir, "plan")
}

/// Compiles `tests/c/NAME.c` into `dir/NAME`.
fn compile_program(dir: &Path, name: &str) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.join(name);
    let output = Command::new("cc")
        .arg("-std=c99")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(manifest.join("../include"))
        .arg(manifest.join(format!("tests/c/{name}.c")))
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

#[test]
fn c_program_gets_the_texture_plans() {
    let dir = temp_dir("textures");
    let exe = compile_program(&dir, "textures");
    let run = |args: &[String]| {
        let output = Command::new(&exe).args(args).output().expect("run");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).expect("UTF-8 output")
    };
    // TFLite's `UInt2Records` test, and a 3D chain where no object can be reused.
    let flat: Vec<UsageRecord2d> = [
        ([2, 8], 0, 1),
        ([2, 8], 1, 2),
        ([1, 12], 2, 4),
        ([2, 8], 3, 5),
        ([8, 2], 4, 5),
        ([2, 8], 5, 7),
        ([1, 8], 6, 8),
        ([2, 8], 7, 8),
        ([4, 1], 8, 9),
    ]
    .into_iter()
    .map(|(s, f, l)| UsageRecord2d::new(s, f, l))
    .collect();
    for strategy in ["naive", "equality", "greedy_in_order", "best"] {
        let mut args = vec![strategy.to_string(), "2".to_string()];
        args.extend(
            flat.iter()
                .map(|r| format!("{}:{}:{}:{}", r.size[0], r.size[1], r.first_op, r.last_op)),
        );
        let out = run(&args);
        let extents = values(&out, "extent");
        let plan = SharedObjectsPlanNd {
            object_ids: values(&out, "object")
                .into_iter()
                .map(|v| v as usize)
                .collect(),
            object_sizes: extents.chunks(2).map(|c| [c[0], c[1]]).collect(),
        };
        check_shared_objects_nd(&flat, &plan).expect("the C API's textures pass the checker");
        let expected = plan_shared_objects_nd(&flat, strategy.parse().unwrap()).unwrap();
        assert_eq!(plan, expected, "{strategy}");
        assert_eq!(values(&out, "cost"), [expected.cost().unwrap()]);
        assert_eq!(
            values(&out, "lower_bound"),
            [lower_bound_nd(&flat).unwrap()]
        );
    }
    let cubes = [
        UsageRecord3d::new([4, 3, 2], 0, 1),
        UsageRecord3d::new([2, 2, 2], 1, 2),
    ];
    let mut args = vec!["greedy_in_order".to_string(), "3".to_string()];
    args.extend(cubes.iter().map(|r| {
        let [w, h, d] = r.size;
        format!("{w}:{h}:{d}:{}:{}", r.first_op, r.last_op)
    }));
    let out = run(&args);
    assert_eq!(values(&out, "extent"), [4, 3, 2, 2, 2, 2]);
    assert_eq!(values(&out, "cost"), [24 + 8]);

    // Errors are codes with messages: a strategy TFLite does not define for textures, and a
    // dimension count that is neither 2 nor 3.
    let out = run(&["greedy_by_size".into(), "2".into(), "1:1:0:0".into()]);
    assert!(
        out.contains("error 2: strategy `greedy_by_size` is not defined for 2-dimensional sizes"),
        "{out}"
    );
    let out = run(&["naive".into(), "4".into()]);
    assert!(
        out.contains("error 3: `dims` must be 2 or 3, got 4"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
