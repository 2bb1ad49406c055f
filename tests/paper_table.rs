//! The seed paper's table (naive total and both lower bounds, MiB at three decimals) for its six
//! networks, read through `tirc plan --json` as a user would. MobileNet v1 and v2 match the
//! paper exactly; for the other four the zoo's closest faithful models are pinned, with the
//! remaining difference explained in each model's header (see also zoo/tests/paper_figures.rs).

use std::process::Command;

/// MiB figures: naive total, offsets bound, shared-objects bound.
type Figures = [f64; 3];

/// (model, the paper's figures, ours where they differ).
const TABLE: [(&str, Figures, Option<Figures>); 6] = [
    ("mobilenet_v1", [19.248, 4.594, 4.594], None),
    ("mobilenet_v2", [26.313, 5.742, 6.604], None),
    (
        "deeplab_v3",
        [48.642, 4.320, 6.105],
        Some([50.083, 4.320, 6.105]),
    ),
    (
        "inception_v3",
        [54.010, 7.914, 8.955],
        Some([53.999, 7.913, 8.954]),
    ),
    (
        "posenet",
        [28.556, 6.271, 6.347],
        Some([29.510, 6.094, 6.126]),
    ),
    (
        "blazeface",
        [2.698, 0.492, 0.518],
        Some([7.120, 1.312, 1.337]),
    ),
];

fn mib3(bytes: u64) -> String {
    format!("{:.3}", bytes as f64 / (1u64 << 20) as f64)
}

#[test]
fn paper_networks_through_tirc_plan_json() {
    for (name, paper, ours) in TABLE {
        let path = format!("examples/{name}.tir");
        let out = Command::new(env!("CARGO_BIN_EXE_tirc"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "plan",
                &path,
                "--json",
                "--align",
                "1",
                "--strategy",
                "naive",
            ])
            .output()
            .expect("run tirc");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let got = [
            json["naive_total"].as_u64().expect("naive"),
            json["lower_bounds"]["offsets"]
                .as_u64()
                .expect("offsets bound"),
            json["lower_bounds"]["shared_objects"]
                .as_u64()
                .expect("objects bound"),
        ];
        let expected = ours.unwrap_or(paper);
        for k in 0..3 {
            assert_eq!(
                mib3(got[k]),
                format!("{:.3}", expected[k]),
                "{name} figure {k} (paper {:.3})",
                paper[k]
            );
        }
        // The naive strategy's slab is the naive total rounded to nothing (alignment 1).
        assert_eq!(json["offsets"][0]["total_size"].as_u64(), Some(got[0]));
    }
}

/// `tirc plan --json --align 1` (every strategy) on one of examples/.
fn plan_all(name: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_tirc"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "plan",
            &format!("examples/{name}.tir"),
            "--json",
            "--align",
            "1",
        ])
        .output()
        .expect("run tirc");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// The size one strategy of one approach (`offsets` or `shared_objects`) reached.
fn reached(json: &serde_json::Value, approach: &str, strategy: &str) -> u64 {
    let rows = json[approach].as_array().expect("rows");
    let row = rows
        .iter()
        .find(|r| r["strategy"] == strategy)
        .unwrap_or_else(|| panic!("no {approach} row {strategy}"));
    row["total_size"]
        .as_u64()
        .or_else(|| row["cost"].as_u64())
        .expect("size")
}

/// The paper's Tables 1 and 2 are not in the seed copy, but its §6 text makes claims per
/// strategy that the zoo's records can check (MobileNet v1 and v2 are the paper's records
/// exactly; DeepLab, Inception and PoseNet the closest faithful models, see the table above):
/// "Greedy by Size [offsets] achieves the theoretical lower bound on all selected neural
/// networks, except DeepLab, where it still falls within 8%", "only for DeepLab, Strip Packing
/// Bestfit shows 7.2% better allocation" (the zoo's DeepLab: 7.1%), Greedy by Size Improved
/// reaches the shared-objects bound on MobileNet v1 and PoseNet, and the paper's strategies are
/// within 16% of it elsewhere. (The text's one claim
/// the records contradict, Greedy by Breadth beating Greedy by Size Improved on MobileNet v2, is
/// discussed in docs/planner.md.)
#[test]
fn paper_text_claims_per_strategy() {
    for name in ["mobilenet_v1", "mobilenet_v2", "inception_v3", "posenet"] {
        let json = plan_all(name);
        let bound = json["lower_bounds"]["offsets"].as_u64().expect("bound");
        assert_eq!(
            reached(&json, "offsets", "greedy_by_size"),
            bound,
            "{name}: greedy_by_size offsets at the bound"
        );
    }
    let deeplab = plan_all("deeplab_v3");
    let bound = deeplab["lower_bounds"]["offsets"].as_u64().expect("bound") as f64;
    let gbs = reached(&deeplab, "offsets", "greedy_by_size") as f64;
    let strip = reached(&deeplab, "offsets", "strip_packing_best_fit") as f64;
    assert!(
        gbs > bound && gbs / bound < 1.08,
        "deeplab: {gbs} vs bound {bound}"
    );
    // 7.1% at alignment 1 (7.2% at the default 64 bytes): the zoo's DeepLab is the closest
    // faithful model, not the paper's records, so the figure is checked to about a percent.
    let better = (gbs - strip) / gbs;
    assert!(
        (0.065..0.08).contains(&better),
        "deeplab: strip packing {better} below gbs"
    );
    for name in ["mobilenet_v1", "posenet"] {
        let json = plan_all(name);
        assert_eq!(
            reached(&json, "shared_objects", "greedy_by_size_improved"),
            json["lower_bounds"]["shared_objects"]
                .as_u64()
                .expect("bound"),
            "{name}: greedy_by_size_improved at the shared-objects bound"
        );
    }
    // "Our strategies [...] are within 16% of the lower bound for the other networks": the
    // best of Greedy by Breadth, by Size and by Size Improved.
    for name in ["mobilenet_v2", "deeplab_v3", "inception_v3"] {
        let json = plan_all(name);
        let bound = json["lower_bounds"]["shared_objects"]
            .as_u64()
            .expect("bound") as f64;
        let best = [
            "greedy_by_breadth",
            "greedy_by_size",
            "greedy_by_size_improved",
        ]
        .iter()
        .map(|s| reached(&json, "shared_objects", s))
        .min()
        .expect("three strategies") as f64;
        assert!(best / bound < 1.16, "{name}: {best} vs bound {bound}");
    }
}
