//! `tirc plan` and `tirc heapmap` from the command line: tables and JSON (snapshots, with the
//! timing columns filtered out), every example and every public benchmark instance, CSV
//! output checked by the independent checker, and refused inputs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tir_passes::planner::checker::check_offsets;
use tir_passes::planner::csv::read_records_csv;
use tir_passes::planner::{OffsetsPlan, UsageRecord};

fn tirc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tirc"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("run tirc")
}

fn ok(args: &[&str]) -> String {
    let out = tirc(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "tirc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Planning times vary from run to run; everything else is deterministic.
fn without_times(f: impl FnOnce()) {
    let mut s = insta::Settings::clone_current();
    s.add_filter(r" +\d+(\.\d+)? (µs|ms|s)\b", "  [time]");
    s.add_filter(r#""time_ms": [0-9.e+-]+"#, r#""time_ms": "[time]""#);
    s.bind(f);
}

fn benchmarks() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/benchmarks")
}

fn csvs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["minimalloc-challenging", "idealloc-traces"] {
        let Ok(entries) = std::fs::read_dir(benchmarks().join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "csv") {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn plan_table_of_a_small_model() {
    without_times(|| insta::assert_snapshot!(ok(&["plan", "tests/fmt/messy.tir"])));
}

#[test]
fn plan_table_of_the_complex_oracle_records() {
    // TFLite's ComplexRecords (closed lifetimes), unaligned: every figure is in the oracle file.
    without_times(|| {
        insta::assert_snapshot!(ok(&[
            "plan",
            "--records",
            "tests/csv/complex.csv",
            "--inclusive",
            "--align",
            "1"
        ]))
    });
}

#[test]
fn plan_json_of_a_csv() {
    without_times(|| {
        insta::assert_snapshot!(ok(&[
            "plan",
            "--records",
            "tests/csv/complex.csv",
            "--inclusive",
            "--align",
            "1",
            "--json",
            "--strategy",
            "greedy_by_size"
        ]))
    });
}

#[test]
fn annotated_profiles() {
    insta::assert_snapshot!(ok(&["plan", "tests/fmt/messy.tir", "--annotate"]));
}

#[test]
fn plan_all_on_every_example() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut n = 0;
    for e in std::fs::read_dir(dir).expect("examples/").flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "tir") {
            let json: serde_json::Value =
                serde_json::from_str(&ok(&["plan", p.to_str().expect("utf-8"), "--json"]))
                    .expect("json");
            check_json(&json);
            n += 1;
        }
    }
    assert!(n > 0);
}

/// The large idealloc traces (18k–62k records) take minutes in a debug build; they are
/// measured by `bench/plan_all.sh` in release instead.
const CI_RECORD_LIMIT: usize = 5000;

#[test]
fn plan_all_on_every_benchmark_instance() {
    let files: Vec<PathBuf> = csvs()
        .into_iter()
        .filter(|p| std::fs::read_to_string(p).map_or(0, |t| t.lines().count()) <= CI_RECORD_LIMIT)
        .collect();
    if files.is_empty() {
        eprintln!("../shared/benchmarks not found; skipping");
        return;
    }
    for p in files {
        let json: serde_json::Value = serde_json::from_str(&ok(&[
            "plan",
            "--records",
            p.to_str().expect("utf-8"),
            "--json",
            "--align",
            "1",
        ]))
        .expect("json");
        check_json(&json);
    }
}

/// Re-checks every offsets plan in a JSON report with the independent checker, and every
/// footprint against its lower bound.
fn check_json(json: &serde_json::Value) {
    let records: Vec<UsageRecord> = json["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| UsageRecord {
            first_op: r["first_op"].as_u64().expect("first") as usize,
            last_op: r["last_op"].as_u64().expect("last") as usize,
            size: r["size"].as_u64().expect("size"),
        })
        .collect();
    let align = json["align"].as_u64().expect("align");
    let bound = json["lower_bounds"]["offsets"].as_u64().expect("bound");
    for row in json["offsets"].as_array().expect("offsets") {
        let plan = OffsetsPlan {
            offsets: row["offsets"]
                .as_array()
                .expect("offsets")
                .iter()
                .map(|o| o.as_u64().expect("u64"))
                .collect(),
            total_size: row["total_size"].as_u64().expect("total"),
        };
        check_offsets(&records, &plan, align)
            .unwrap_or_else(|e| panic!("{}: {:?}", row["strategy"], &e[..e.len().min(3)]));
        assert!(
            plan.total_size >= bound,
            "{} is below the lower bound",
            row["strategy"]
        );
    }
    let sbound = json["lower_bounds"]["shared_objects"]
        .as_u64()
        .expect("bound");
    for row in json["shared_objects"].as_array().expect("objects") {
        assert!(
            row["cost"].as_u64().expect("cost") >= sbound,
            "{} is below its lower bound",
            row["strategy"]
        );
    }
}

#[test]
fn emitted_csv_holds_a_valid_plan() {
    let out = std::env::temp_dir().join(format!("tir-emit-{}.csv", std::process::id()));
    let input = benchmarks().join("minimalloc-challenging/A.1048576.csv");
    if !input.exists() {
        return;
    }
    ok(&[
        "plan",
        "--records",
        input.to_str().expect("utf-8"),
        "--offsets",
        "--strategy",
        "greedy_by_size",
        "--align",
        "1",
        "--emit-csv",
        out.to_str().expect("utf-8"),
    ]);
    let text = std::fs::read_to_string(&out).expect("written");
    let _ = std::fs::remove_file(&out);
    let rows = read_records_csv(&text, false).expect("re-reads");
    let offsets: Vec<u64> = text
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').next().expect("offset").parse().expect("u64"))
        .collect();
    let records: Vec<UsageRecord> = rows.iter().map(|r| r.record).collect();
    let total = records
        .iter()
        .zip(&offsets)
        .map(|(r, o)| r.size + o)
        .max()
        .unwrap_or(0);
    check_offsets(
        &records,
        &OffsetsPlan {
            offsets,
            total_size: total,
        },
        1,
    )
    .expect("valid plan");
}

#[test]
fn heapmap_writes_a_valid_svg() {
    let out = std::env::temp_dir().join(format!("tir-heap-{}.svg", std::process::id()));
    ok(&[
        "heapmap",
        "tests/fmt/messy.tir",
        "-o",
        out.to_str().expect("utf-8"),
    ]);
    let svg = std::fs::read_to_string(&out).expect("written");
    let _ = std::fs::remove_file(&out);
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    // One rectangle with a tooltip per intermediate tensor (%c1, %c2, %sum, %p, %s).
    let titles: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| n.text())
        .collect();
    for name in ["%c1", "%c2", "%sum", "%p", "%s"] {
        assert!(
            titles.iter().any(|t| t.starts_with(name)),
            "no tooltip for {name}: {titles:?}"
        );
    }
}

#[test]
fn bad_csv_inputs_are_refused_with_their_line() {
    insta::glob!("csv/*.csv", |path| {
        if path.file_name().is_some_and(|n| n == "complex.csv") {
            return;
        }
        let rel = path
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .expect("in repo");
        let out = tirc(&["plan", "--records", rel.to_str().expect("utf-8")]);
        assert_eq!(out.status.code(), Some(1), "{}", rel.display());
        insta::assert_snapshot!(String::from_utf8_lossy(&out.stderr));
    });
}

#[test]
fn misuse_exits_2() {
    assert_eq!(
        tirc(&["plan", "tests/fmt/messy.tir", "--strategy", "nope"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(tirc(&["plan"]).status.code(), Some(2));
    assert_eq!(
        tirc(&["plan", "tests/fmt/messy.tir", "--align", "0"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        tirc(&["heapmap", "tests/fmt/messy.tir"]).status.code(),
        Some(2)
    );
}

// ---- multi-dimensional sizes (2D/3D textures) -------------------------------------------------

#[test]
fn plan_json_of_2d_textures() {
    without_times(|| {
        insta::assert_snapshot!(ok(&[
            "plan",
            "--records",
            "tests/textures/uint2.csv",
            "--json"
        ]))
    });
}

#[test]
fn plan_table_of_3d_textures() {
    without_times(|| {
        insta::assert_snapshot!(ok(&["plan", "--records", "tests/textures/uint3.csv"]))
    });
}

#[test]
fn textures_plan_as_tflite_and_pass_the_checker() {
    use tir_passes::planner::checker::check_shared_objects_nd;
    use tir_passes::planner::csv::{read_any_records_csv, CsvRecords};
    use tir_passes::planner::multidim::{SharedObjectsPlanNd, UsageRecordNd};
    let json = ok(&[
        "plan",
        "--records",
        "tests/textures/uint2.csv",
        "--strategy",
        "greedy_in_order",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&json).expect("json");
    let row = &report["shared_objects"][0];
    let ids: Vec<usize> = serde_json::from_value(row["object_ids"].clone()).unwrap();
    let sizes: Vec<[u64; 2]> = serde_json::from_value(row["object_sizes"].clone()).unwrap();
    // TFLite's `UInt2Records` expectation.
    assert_eq!(ids, [0, 1, 2, 0, 3, 1, 2, 0, 3]);
    assert_eq!(row["cost"], 60);
    assert_eq!(report["lower_bound"], 48);
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/textures/uint2.csv"),
    )
    .unwrap();
    let Ok(CsvRecords::Dims2(rows)) = read_any_records_csv(&text, false) else {
        panic!("not a 2D file")
    };
    let records: Vec<UsageRecordNd<2>> = rows.iter().map(|r| r.record).collect();
    let plan = SharedObjectsPlanNd {
        object_ids: ids,
        object_sizes: sizes,
    };
    assert_eq!(check_shared_objects_nd(&records, &plan), Ok(()));
}

#[test]
fn textures_refuse_offsets_and_undefined_strategies() {
    let file = "tests/textures/uint3.csv";
    for args in [
        &["plan", "--records", file, "--offsets"][..],
        &["plan", "--records", file, "--strategy", "gergov"],
        &["plan", "--records", file, "--strategy", "greedy_by_size"],
    ] {
        let out = tirc(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("tests/textures/uint3.csv: error: "),
            "{err}"
        );
    }
    let svg = std::env::temp_dir().join(format!("tir-tex-{}.svg", std::process::id()));
    let out = tirc(&[
        "heapmap",
        "--records",
        file,
        "-o",
        svg.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("multi-dimensional"));
    assert!(!svg.exists());
}
