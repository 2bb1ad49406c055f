//! Buffer assignment's choices under sharing (`buffers::assign_buffers`): which operand an
//! element-wise op writes over, and which concat operands are written into their slices.
//! Each assignment also goes through the independent checker with a plan of its records.

use tir_ir::{Function, Module, Value};
use tir_passes::buffers::{assign_buffers, BufferAssignment, Sharing};
use tir_passes::planner::{self, checker::check_offsets, OffsetStrategy};

fn module(src: &str) -> Module {
    tir_ir::parse_and_verify(src).unwrap_or_else(|e| panic!("test model is valid: {e:?}"))
}

fn main_func(m: &Module) -> &Function {
    m.funcs.iter().find(|f| f.name == "main").expect("@main")
}

fn value(f: &Function, name: &str) -> Value {
    f.values
        .iter()
        .find(|(_, v)| v.name == name)
        .map(|(id, _)| id)
        .unwrap_or_else(|| panic!("no value `{name}`"))
}

fn buffer_of(f: &Function, a: &BufferAssignment, name: &str) -> usize {
    a.place[tir_ir::EntityRef::index(value(f, name))]
        .unwrap_or_else(|| panic!("`{name}` has no buffer"))
        .0
}

fn assigned(f: &Function) -> BufferAssignment {
    let a = assign_buffers(f, Sharing::ALL).expect("assigns");
    let records = a.records();
    let plan = planner::plan_offsets(&records, OffsetStrategy::GreedyBySize, 64).expect("plans");
    check_offsets(&records, &plan, 64).expect("the checker accepts the plan");
    a
}

/// `add` over two operands that both die there writes over the one written last: were it
/// the older one, the sum (and the concat slice it is then moved into) would be live from
/// that older write.
#[test]
fn in_place_writes_over_the_operand_written_last() {
    let m = module(
        r#"
module @m {
  func @main(%x: tensor<1x4x8x8xf32>) -> tensor<1x8x8x8xf32> {
    %a = relu(%x)
    %u = avg_pool(%x) {kernel = [3, 3], pads = [1, 1, 1, 1]}
    %b = avg_pool(%u) {kernel = [3, 3], pads = [1, 1, 1, 1]}
    %s = add(%a, %b)
    %t = avg_pool(%x) {kernel = [3, 3], pads = [1, 1, 1, 1]}
    %cat = concat(%t, %s) {axis = 1}
    %y = relu(%cat)
    return %y
  }
}
"#,
    );
    let f = main_func(&m);
    let a = assigned(f);
    assert_eq!(buffer_of(f, &a, "s"), buffer_of(f, &a, "b"));
    assert_ne!(buffer_of(f, &a, "s"), buffer_of(f, &a, "a"));
    // The sum is written into the concat, which lives from `%b`'s write (step 2), not `%a`'s.
    let cat = buffer_of(f, &a, "cat");
    assert_eq!(buffer_of(f, &a, "s"), cat);
    assert_eq!(a.buffers[cat].record.first_op, 2);
}

/// A concat operand whose buffer was first written long before the concat's operands exist
/// (an in-place `add` over an early value) stays apart and is copied; the operands written
/// close to the concat go into their slices.
#[test]
fn concat_keeps_apart_an_operand_whose_buffer_began_long_before() {
    let body = |early: bool| {
        let (p_early, p_late) = if early {
            ("%p = relu(%x)", "")
        } else {
            ("", "%p = relu(%a3)")
        };
        format!(
            r#"
module @m {{
  func @main(%x: tensor<1x4x8x8xf32>) -> tensor<1x8x8x8xf32> {{
    {p_early}
    %a1 = avg_pool(%x) {{kernel = [3, 3], pads = [1, 1, 1, 1]}}
    %a2 = avg_pool(%a1) {{kernel = [3, 3], pads = [1, 1, 1, 1]}}
    %a3 = avg_pool(%a2) {{kernel = [3, 3], pads = [1, 1, 1, 1]}}
    {p_late}
    %n0 = avg_pool(%a3) {{kernel = [3, 3], pads = [1, 1, 1, 1]}}
    %n1 = add(%p, %n0)
    %cat = concat(%n0, %n1) {{axis = 1}}
    %y = avg_pool(%cat) {{kernel = [3, 3], pads = [1, 1, 1, 1]}}
    return %y
  }}
}}
"#
        )
    };
    let m = module(&body(true));
    let f = main_func(&m);
    let a = assigned(f);
    let cat = buffer_of(f, &a, "cat");
    assert_eq!(buffer_of(f, &a, "n1"), buffer_of(f, &a, "p"));
    assert_eq!(buffer_of(f, &a, "n0"), cat);
    assert_ne!(buffer_of(f, &a, "n1"), cat);
    assert_eq!(a.buffers[cat].record.first_op, 4);

    // `%p` written right before the operands: its buffer goes into the slice.
    let m = module(&body(false));
    let f = main_func(&m);
    let a = assigned(f);
    let cat = buffer_of(f, &a, "cat");
    assert_eq!(buffer_of(f, &a, "n1"), cat);
    assert_eq!(buffer_of(f, &a, "n0"), cat);
}

/// Two views of a view, all in the bytes of the value they reshape, with that value read after
/// them: an aliased view writes nothing, so the independent checker (run after `bufferize`)
/// must accept it (it used to flag every view after the first as clobbering the others).
#[test]
fn views_of_a_view_share_its_bytes_and_pass_the_checker() {
    let mut m = module(
        r#"
module @m {
  func @main(%x: tensor<1x12x1x1xf32>) -> (tensor<1x4x3xf32>, tensor<1x12x1x1xf32>) {
    %a = relu(%x)
    %v = reshape(%a) {shape = [1, 1, 1, 12]}
    %r = reshape(%v) {shape = [1, 4, 3]}
    %r2 = reshape(%v) {shape = [1, 4, 3]}
    %s = add(%r, %r2)
    %b = sigmoid(%a)
    return %s, %b
  }
}
"#,
    );
    let passes = tir_passes::pipeline::parse_pipeline("plan{sharing=true},bufferize").unwrap();
    tir_passes::pipeline::run_pipeline(&mut m, &passes, true, |_, _| {})
        .expect("bufferized and accepted by the checker");
    // The views were placed in %a's bytes (an unaliased view would be a copy, trivially safe).
    let printed = tir_ir::print(&m);
    let buf_of_a = printed
        .lines()
        .find(|l| l.contains("%a = relu"))
        .and_then(|l| l.split("outs(").nth(1))
        .and_then(|l| l.split(')').next())
        .expect("relu has outs")
        .to_string();
    let inside = printed
        .lines()
        .filter(|l| l.contains(&format!("alloc_tensor({buf_of_a}) {{offset = 0}}")))
        .count();
    assert_eq!(inside, 3, "{printed}");
}
