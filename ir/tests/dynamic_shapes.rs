//! Dynamic functions: symbolic dims in types, inferred symbolic types (snapshots), the
//! run-time checks the verifier records, and specialization — which must give exactly the
//! static module that the same text with numbers for the dims gives, and evaluating the
//! symbolic types must give the static types (one table of shape rules for both).

use proptest::prelude::*;
use tir_ir::specialize::{bind_shapes, eval_type, symbols};
use tir_ir::{parse_and_verify, print, specialize, Bindings, Diagnostic, Module};

fn read(name: &str) -> String {
    let path = format!("{}/../tests/dynamic/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn messages(ds: &[Diagnostic]) -> String {
    ds.iter()
        .map(|d| d.message.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

fn load(text: &str) -> Module {
    parse_and_verify(text).unwrap_or_else(|ds| panic!("{}", messages(&ds)))
}

/// The printed module and, after it, the dims and run-time checks of `@main`.
fn describe(m: &Module) -> String {
    let f = m.entry().expect("entry");
    let mut out = print(m);
    out.push_str(&format!("// dims: {}\n", symbols(f).join(", ")));
    for c in &f.dynamic.as_ref().expect("dynamic").checks {
        out.push_str(&format!(
            "// check `{}`: {}  ({})\n",
            c.op, c.cond, c.cond.message
        ));
    }
    out
}

fn bind(pairs: &[(&str, u64)]) -> Bindings {
    pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

#[test]
fn cnn_with_symbolic_height_and_width() {
    let m = load(&read("cnn.tir"));
    assert!(m.is_dynamic());
    insta::assert_snapshot!(describe(&m));
}

#[test]
fn bert_like_chain_with_symbolic_batch_and_sequence() {
    let m = load(&read("bert.tir"));
    insta::assert_snapshot!(describe(&m));
}

#[test]
fn shared_and_unnamed_dims() {
    let m = load(&read("shared.tir"));
    insta::assert_snapshot!(describe(&m));
}

#[test]
fn reshape_targets_written_in_dims() {
    let m = load(&read("reshape_dims.tir"));
    insta::assert_snapshot!(describe(&m));
}

#[test]
fn printing_is_a_fixed_point() {
    for name in ["cnn.tir", "bert.tir", "shared.tir", "reshape_dims.tir"] {
        let once = print(&load(&read(name)));
        let twice = print(&load(&once));
        assert_eq!(once, twice, "{name}");
    }
}

#[test]
fn a_failed_run_time_check_names_the_dims_and_both_values() {
    let m = load(&read("shared.tir"));
    let err = specialize(&m, &bind(&[("n", 2), ("a.d1", 3), ("b.d1", 4)])).unwrap_err();
    insta::assert_snapshot!(err[0].message);
    let ok = specialize(&m, &bind(&[("n", 2), ("a.d1", 3), ("b.d1", 3)])).unwrap();
    let f = ok.entry().unwrap();
    assert_eq!(f.result_types[0].shape, vec![2, 6]);
    assert!(!ok.is_dynamic());
}

#[test]
fn an_unbound_dim_is_named() {
    let m = load(&read("bert.tir"));
    let err = specialize(&m, &bind(&[("batch", 2)])).unwrap_err();
    assert_eq!(err[0].message, "the dim `seq` of `@main` has no value");
}

#[test]
fn dims_bind_from_input_shapes() {
    let m = load(&read("bert.tir"));
    let f = m.entry().unwrap();
    let b = bind_shapes(
        f,
        &[Some(vec![2, 7, 64]), Some(vec![2, 1, 7])],
        &Bindings::new(),
    )
    .unwrap();
    assert_eq!(b, bind(&[("batch", 2), ("seq", 7)]));
    let e = bind_shapes(
        f,
        &[Some(vec![2, 7, 64]), Some(vec![2, 1, 8])],
        &Bindings::new(),
    )
    .unwrap_err();
    assert_eq!(
        e,
        "the dim `seq` is 7 in `%x` (dimension 1) but 8 in `%mask` (dimension 2)"
    );
    let e = bind_shapes(f, &[Some(vec![2, 7, 32]), None], &Bindings::new()).unwrap_err();
    assert_eq!(e, "input `%x` has 32 in dimension 2, the model wants 64");
    let e = bind_shapes(f, &[Some(vec![2, 7, 64]), None], &bind(&[("seq", 5)])).unwrap_err();
    assert_eq!(
        e,
        "the dim `seq` is pinned to 5 (--dim) but `%x` has 7 in dimension 1"
    );
}

#[test]
fn refused_texts() {
    let cases = [
        // `?` outside a parameter.
        "module @m { func @main(%x: tensor<{n}xf32>) { %0 = relu(%x) : tensor<?xf32> return %0 } }",
        // A bad expression.
        "module @m { func @main(%x: tensor<{n +}xf32>) { return %x } }",
        // A negative constant.
        "module @m { func @main(%x: tensor<{1 - 2}xf32>) { return %x } }",
        // A declared type the rule does not give.
        "module @m { func @main(%x: tensor<{n}xf32>) { %0 = relu(%x) : tensor<{n + 1}xf32> return %0 } }",
        // A declared result type the body does not give.
        "module @m { func @main(%x: tensor<{n}xf32>) -> tensor<{m}xf32> { return %x } }",
        // Different constants can never broadcast.
        "module @m { func @main(%x: tensor<{n}x3xf32>, %y: tensor<{n}x4xf32>) { %0 = add(%x, %y) return %0 } }",
        // `h + 1` and `h` are never equal.
        "module @m { func @main(%x: tensor<{h}xf32>, %y: tensor<{h + 1}xf32>) { %0 = add(%x, %y) return %0 } }",
        // Buffers need static shapes.
        "module @m { func @main(%x: tensor<{n}xf32>) { %s = alloc_slab() {size = 64, align = 64} return %x } }",
        // A reshape size naming something that is not a dim of the function.
        "module @m { func @main(%x: tensor<{n}x4xf32>) { %0 = reshape(%x) {shape = [{k}, -1]} return %0 } }",
        // A reshape size naming a dim in a static function.
        "module @m { func @main(%x: tensor<8xf32>) { %0 = reshape(%x) {shape = [{n}, -1]} return %0 } }",
        // A bad expression as a reshape size.
        "module @m { func @main(%x: tensor<{n}xf32>) { %0 = reshape(%x) {shape = [{n +}]} return %0 } }",
        // A negative reshape size.
        "module @m { func @main(%x: tensor<{n}xf32>) { %0 = reshape(%x) {shape = [{0 - 2}, -1]} return %0 } }",
    ];
    let mut out = String::new();
    for c in cases {
        let ds = parse_and_verify(c).expect_err(c);
        out.push_str(&format!("{c}\n  => {}\n", messages(&ds)));
    }
    insta::assert_snapshot!(out);
}

#[test]
fn braces_around_a_constant_are_a_static_dim() {
    let m = load("module @m { func @main(%x: tensor<{2*3}xf32>) { return %x } }");
    assert!(!m.is_dynamic());
    assert!(print(&m).contains("tensor<6xf32>"));
}

/// Specializes `text` at `b` and checks it against the static text with the numbers written
/// in: the same verdict, the same printed module, and every symbolic type evaluating to the
/// static type.
fn agrees_with_static(text: &str, b: &Bindings) -> Result<(), TestCaseError> {
    let m = load(text);
    let mut fixed = text.to_string();
    for (name, v) in b {
        fixed = fixed.replace(&format!("{{{name}}}"), &v.to_string());
    }
    let spec = specialize(&m, b);
    let stat = parse_and_verify(&fixed);
    match (spec, stat) {
        (Ok(s), Ok(t)) => {
            prop_assert_eq!(print(&s), print(&t));
            let (fd, fs) = (m.entry().unwrap(), s.entry().unwrap());
            for (v, data) in fd.values.iter() {
                let sym = data.sym.as_ref().expect("typed");
                let want = fs.values[v].ty.clone().expect("typed");
                prop_assert_eq!(
                    eval_type(sym, b).ok(),
                    Some(want),
                    "{} is {}",
                    fd.value_name(v),
                    sym
                );
            }
        }
        (Err(_), Err(_)) => {}
        (Ok(_), Err(e)) => prop_assert!(
            false,
            "specialized, but the static text fails: {}",
            messages(&e)
        ),
        (Err(e), Ok(_)) => prop_assert!(
            false,
            "the static text verifies, specialization fails: {:?}",
            e
        ),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn cnn_specializes_as_the_static_text(h in 0u64..70, w in 0u64..70) {
        agrees_with_static(&read("cnn.tir"), &bind(&[("h", h), ("w", w)]))?;
    }

    #[test]
    fn bert_specializes_as_the_static_text(batch in 0u64..4, seq in 0u64..40) {
        agrees_with_static(&read("bert.tir"), &bind(&[("batch", batch), ("seq", seq)]))?;
    }

    #[test]
    fn ops_with_symbolic_inputs_specialize_as_the_static_text(
        n in 0u64..9, m in 0u64..9, op in 0usize..12,
    ) {
        let body = [
            "%0 = slice(%x) {starts = [1], ends = [-1], axes = [1]}",
            "%0 = slice(%x) {starts = [-3], ends = [9223372036854775807], axes = [1], steps = [2]}",
            "%0 = slice(%x) {starts = [5], ends = [-9223372036854775807], axes = [1], steps = [-2]}",
            "%0 = reshape(%x) {shape = [-1, 2]}",
            "%0 = pad(%x) {pads = [0, 2, 0, 1], mode = reflect}",
            "%0 = avg_pool(%x4) {kernel = [3, 2], strides = [2, 3], pads = [1, 0, 1, 1], ceil_mode = true}",
            "%0 = squeeze(%x) {axes = [0]}",
            "%0 = resize(%x4) {size = [3, 5]}",
            "%0 = flatten(%x4) {axis = 2}",
            "%0 = resize(%x4) {scale = [2, 3], coordinate_transformation_mode = asymmetric, nearest_mode = floor}",
            "%0 = reshape(%x4) {shape = [{n}, -1]}",
            "%0 = reshape(%x) {shape = [{m}, {n}]}",
        ][op];
        let text = format!(
            "module @m {{ func @main(%x: tensor<{{n}}x{{m}}xf32>) {{ %x4 = reshape(%x) {{shape = [1, 1, -1, 1]}} {body} return %0 }} }}"
        );
        agrees_with_static(&text, &bind(&[("n", n), ("m", m)]))?;
    }
}
