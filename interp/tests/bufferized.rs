//! A bufferized module (`alloc_slab`, `alloc_tensor`, `outs`) runs exactly as the module it
//! was made from: buffers say where results live, not what they are.

use tir_interp::{run, weights, Weights};
use tir_passes::pipeline::{parse_pipeline, run_pipeline};

#[test]
fn bufferized_squeezenet_gives_the_same_outputs() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/squeezenet.tir");
    let text = std::fs::read_to_string(path).unwrap();
    let module = tir_ir::parse_and_verify(&text).unwrap();
    let func = module.entry().unwrap();
    let w = Weights::generate(&module, 5).unwrap();
    let inputs: Vec<_> = func
        .params
        .iter()
        .map(|&p| weights::random_input(&func.values[p].name, func.ty(p).unwrap(), 5).unwrap())
        .collect();
    let before = run(&module, &w, &inputs).unwrap();

    let mut buffered = module.clone();
    run_pipeline(
        &mut buffered,
        &parse_pipeline("plan,bufferize").unwrap(),
        true,
        |_, _| {},
    )
    .unwrap();
    let printed = tir_ir::print(&buffered);
    assert!(printed.contains("alloc_slab") && printed.contains("outs("));
    let after = run(&buffered, &w, &inputs).unwrap();
    assert_eq!(before, after);
}
