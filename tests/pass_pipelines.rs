//! Pass tests as files (MLIR's lit habit): each `tests/passes/*.tir` starts with
//! `// RUN: <pipeline>`, holds cases split by `// -----` (or `// include: PATH`), and the insta
//! snapshot holds each case's input, output and pass statistics. Every output re-parses and
//! passes the verifier and the independent buffer checker.

use tir_passes::pipeline::{parse_pipeline, run_pipeline, verify_module};

fn run_case(pipeline: &str, text: &str) -> String {
    let passes = parse_pipeline(pipeline).expect("RUN line parses");
    let mut module =
        tir_ir::parse_and_verify(text).unwrap_or_else(|d| panic!("input invalid: {d:?}"));
    let stats = run_pipeline(&mut module, &passes, true, |_, _| {}).expect("pipeline runs");
    let printed = tir_ir::print(&module);
    let mut again = tir_ir::parse_and_verify(&printed)
        .unwrap_or_else(|d| panic!("output does not re-parse: {d:?}\n{printed}"));
    verify_module(&mut again).expect("output passes the buffer checker");
    assert_eq!(
        tir_ir::print(&again),
        printed,
        "output is not a printing fixed point"
    );
    let mut out = String::new();
    out.push_str(&printed);
    out.push_str("// stats:\n");
    for s in stats {
        out.push_str(&format!("//   {}: {}\n", s.pass, s.report.summary()));
    }
    out
}

#[test]
fn pass_pipelines() {
    insta::glob!("passes/*.tir", |path| {
        let text = std::fs::read_to_string(path).expect("read");
        let first = text.lines().next().unwrap_or_default();
        let pipeline = first
            .strip_prefix("// RUN:")
            .expect("first line is `// RUN: <pipeline>`")
            .trim();
        let mut snapshot = format!("// RUN: {pipeline}\n");
        for case in text.split("// -----\n") {
            let case = case
                .strip_prefix(first)
                .map_or(case, |c| c.trim_start_matches('\n'));
            let input = match case.lines().find_map(|l| l.strip_prefix("// include: ")) {
                Some(p) => {
                    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(p.trim()))
                        .expect("included file")
                }
                None => case.to_string(),
            };
            snapshot.push_str("// ----- input\n");
            snapshot.push_str(case);
            snapshot.push_str("// ----- output\n");
            snapshot.push_str(&run_case(pipeline, &input));
        }
        insta::assert_snapshot!(snapshot);
    });
}
