//! Every model parses, verifies, and prints back to exactly its generated text; building it
//! in code gives the same module as parsing it.

#[test]
fn every_model_round_trips() {
    for spec in tir_zoo::models() {
        let text = tir_zoo::generate_spec(&spec).expect("model generates");
        let module = match tir_ir::parse_and_verify(&text) {
            Ok(m) => m,
            Err(diags) => panic!("{} does not verify: {diags:?}", spec.name),
        };
        assert_eq!(
            tir_ir::print(&module),
            text,
            "{} is not a fixed point",
            spec.name
        );
        let spec_module = tir_zoo::build(&spec).expect("model builds");
        let fig_built = tir_zoo::figures(&spec, &spec_module).expect("figures");
        let fig_parsed = tir_zoo::figures(&spec, &module).expect("figures");
        assert_eq!(
            fig_built, fig_parsed,
            "{}: figures differ after parsing",
            spec.name
        );
    }
}

#[test]
fn unknown_model_lists_the_names() {
    let err = tir_zoo::generate("no_such_net").expect_err("unknown");
    let msg = err.to_string();
    assert!(
        msg.contains("no_such_net") && msg.contains("mobilenet_v1"),
        "{msg}"
    );
}
