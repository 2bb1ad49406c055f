//! `tirc plan` on a dynamic model with no values for its dims (issue 18): the usage records
//! with their lifetimes and their sizes as expressions in the dims, and how to get numbers.
//! Each expression, evaluated at a shape, is the size `tirc plan --dim` plans there.

mod common;

use common::dynamic::{ok, tirc};
use tir_ir::DimExpr;

#[test]
fn the_bert_block_lists_its_records_with_symbolic_sizes() {
    insta::assert_snapshot!(ok(tirc(&["plan", "tests/dynamic/bert.tir"]), "plan"));
}

#[test]
fn symbolic_sizes_evaluate_to_the_sizes_planned_at_each_shape() {
    for (model, shapes) in [
        (
            "tests/dynamic/bert.tir",
            vec![
                vec![("batch", 1), ("seq", 24)],
                vec![("batch", 3), ("seq", 7)],
            ],
        ),
        (
            "tests/dynamic/mobilenet_v2.tir",
            vec![vec![("h", 64), ("w", 64)], vec![("h", 45), ("w", 100)]],
        ),
    ] {
        let symbolic: serde_json::Value =
            serde_json::from_str(&ok(tirc(&["plan", model, "--json"]), "symbolic")).expect("json");
        assert!(
            symbolic["note"]
                .as_str()
                .is_some_and(|n| n.contains("--dim-range") && n.contains("--dim-max")),
            "{symbolic}"
        );
        for dims in shapes {
            let at: Vec<String> = dims.iter().map(|(n, v)| format!("{n}={v}")).collect();
            let mut args = vec!["plan", model, "--json", "--strategy", "greedy_by_size"];
            for d in &at {
                args.extend(["--dim", d.as_str()]);
            }
            let planned: serde_json::Value =
                serde_json::from_str(&ok(tirc(&args), "planned")).expect("json");
            let (sym, num) = (
                symbolic["records"].as_array().expect("records"),
                planned["records"].as_array().expect("records"),
            );
            assert_eq!(sym.len(), num.len(), "{model}");
            let env = |s: &str| dims.iter().find(|(n, _)| *n == s).map(|(_, v)| *v);
            let mut naive = 0;
            for (a, b) in sym.iter().zip(num) {
                assert_eq!(a["name"], b["name"]);
                assert_eq!(a["first_op"], b["first_op"]);
                assert_eq!(a["last_op"], b["last_op"]);
                let e = DimExpr::parse(a["size"].as_str().expect("size")).expect("expression");
                let size = e.eval_dim(&env).expect("evaluates");
                assert_eq!(
                    Some(size),
                    b["size"].as_u64(),
                    "{model} {} at {at:?}",
                    a["name"]
                );
                naive += size;
            }
            let total = DimExpr::parse(symbolic["naive_total"].as_str().expect("total"))
                .expect("expression")
                .eval_dim(&env)
                .expect("evaluates");
            assert_eq!(Some(total), planned["naive_total"].as_u64());
            assert_eq!(total, naive);
        }
    }
}

#[test]
fn options_that_need_sizes_are_refused_without_dims() {
    for flag in ["--annotate", "--emit-csv"] {
        let mut args = vec!["plan", "tests/dynamic/bert.tir", flag];
        if flag == "--emit-csv" {
            args.push("unused.csv");
        }
        let out = tirc(&args);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{e}");
        assert!(e.contains(&format!("{flag} needs sizes")), "{e}");
        assert!(e.contains("--dim NAME=N"), "{e}");
    }
}
