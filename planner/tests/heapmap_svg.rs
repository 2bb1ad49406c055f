//! Heap map SVGs are well-formed XML with one titled rectangle per tensor and the bound lines.

use tir_planner::heapmap::{render_heapmap_svg, HeapmapInput};
use tir_planner::UsageRecord;

struct Plan {
    records: Vec<UsageRecord>,
    names: Vec<String>,
    offsets: Vec<u64>,
    slab_size: u64,
    num_ops: usize,
    lower_bound: u64,
}

impl Plan {
    fn render(&self, title: &str) -> String {
        let sizes: Vec<u64> = self.records.iter().map(|r| r.size).collect();
        render_heapmap_svg(&HeapmapInput {
            title,
            records: &self.records,
            names: &self.names,
            sizes: &sizes,
            offsets: &self.offsets,
            slab_size: self.slab_size,
            num_ops: self.num_ops,
            lower_bound: self.lower_bound,
        })
    }
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("%{i}")).collect()
}

/// The chain of the seed paper's figure: each tensor feeds the next operator.
fn chain() -> Plan {
    let records = vec![
        UsageRecord::new(16, 0, 1),
        UsageRecord::new(8, 1, 2),
        UsageRecord::new(64, 2, 3),
        UsageRecord::new(32, 3, 4),
        UsageRecord::new(8, 4, 5),
    ];
    Plan {
        names: names(records.len()),
        records,
        offsets: vec![0, 64, 0, 64, 0],
        slab_size: 96,
        num_ops: 6,
        lower_bound: 96,
    }
}

fn empty() -> Plan {
    Plan {
        records: vec![],
        names: vec![],
        offsets: vec![],
        slab_size: 0,
        num_ops: 0,
        lower_bound: 0,
    }
}

fn one() -> Plan {
    Plan {
        records: vec![UsageRecord::new(4096, 0, 0)],
        names: names(1),
        offsets: vec![0],
        slab_size: 4096,
        num_ops: 1,
        lower_bound: 4096,
    }
}

fn class_is(node: roxmltree::Node<'_, '_>, class: &str) -> bool {
    node.attribute("class") == Some(class)
}

/// The `<rect>`s that carry a `<title>`: one per tensor.
fn tensor_rects<'a, 'i>(doc: &'a roxmltree::Document<'i>) -> Vec<roxmltree::Node<'a, 'i>> {
    doc.descendants()
        .filter(|n| n.has_tag_name("rect"))
        .filter(|n| n.children().any(|c| c.has_tag_name("title")))
        .collect()
}

fn title_of(node: &roxmltree::Node<'_, '_>) -> String {
    node.children()
        .find(|c| c.has_tag_name("title"))
        .and_then(|t| t.text())
        .unwrap_or_default()
        .to_string()
}

/// Checks what every heap map must have, returning the parsed tensor titles.
fn check_structure(svg: &str, tensors: usize) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("not XML: {e}\n{svg}"));
    let root = doc.root_element();
    assert!(root.has_tag_name(("http://www.w3.org/2000/svg", "svg")));
    let view_box = root.attribute("viewBox").expect("viewBox");
    let parts: Vec<f64> = view_box
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(parts.len(), 4);
    assert!(parts[2] > 0.0 && parts[3] > 0.0);

    let rects = tensor_rects(&doc);
    assert_eq!(rects.len(), tensors, "one titled <rect> per tensor");
    for rect in &rects {
        for attr in ["x", "y", "width", "height"] {
            let v: f64 = rect.attribute(attr).unwrap().parse().unwrap();
            assert!(v.is_finite());
        }
        assert!(rect.attribute("fill").unwrap().starts_with('#'));
    }
    let lower_bound = doc
        .descendants()
        .find(|n| n.has_tag_name("line") && class_is(*n, "lower-bound"))
        .expect("lower-bound line");
    assert!(lower_bound.attribute("stroke-dasharray").is_some());
    assert!(doc
        .descendants()
        .any(|n| n.has_tag_name("line") && class_is(n, "slab")));
    assert!(doc
        .descendants()
        .any(|n| n.has_tag_name("text") && class_is(n, "lower-bound-label")));
    rects.iter().map(title_of).collect()
}

#[test]
fn empty_plan_renders_axes_only() {
    let svg = empty().render("empty · greedy_by_size");
    check_structure(&svg, 0);
    assert!(!svg.contains("class=\"breadth\""));
}

#[test]
fn single_tensor_renders_one_rect() {
    let svg = one().render("one");
    let titles = check_structure(&svg, 1);
    assert!(
        titles[0].starts_with("%0\n4,096 B (4.00 KiB)\noperators 0–0"),
        "{}",
        titles[0]
    );
}

#[test]
fn chain_renders_one_rect_per_tensor_with_tooltips() {
    let svg = chain().render("chain · given");
    let titles = check_structure(&svg, 5);
    assert_eq!(titles[2], "%2\n64 B (64 B)\noperators 2–3\noffset 0 (0 B)");
    assert_eq!(
        titles[3],
        "%3\n32 B (32 B)\noperators 3–4\noffset 64 (64 B)"
    );
}

#[test]
fn chain_rects_sit_where_the_plan_puts_them() {
    let svg = chain().render("chain");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let rects = tensor_rects(&doc);
    let attr = |i: usize, a: &str| -> f64 { rects[i].attribute(a).unwrap().parse().unwrap() };
    // %0 over ops [0, 2) and %2 over [2, 4): equal widths, %2 starting where %0 ends.
    assert!((attr(0, "x") + attr(0, "width") - attr(2, "x")).abs() < 0.02);
    assert!((attr(0, "width") - attr(2, "width")).abs() < 0.02);
    // Address 0 is at the bottom: %1 (offset 64) lies above %0 (offset 0), %2 is 4 times %0's height.
    assert!(attr(1, "y") + attr(1, "height") < attr(0, "y"));
    assert!((attr(2, "height") - 4.0 * attr(0, "height")).abs() < 0.05);
    // %0 and %2 both start at address 0: their bottom edges coincide.
    let bottom = |i| attr(i, "y") + attr(i, "height");
    assert!((bottom(0) - bottom(2)).abs() < 0.02);
}

#[test]
fn chain_breadth_curve_reaches_the_lower_bound() {
    let svg = chain().render("chain");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let curve = doc
        .descendants()
        .find(|n| n.has_tag_name("polyline") && class_is(*n, "breadth"))
        .expect("breadth polyline");
    let ys: Vec<f64> = curve
        .attribute("points")
        .unwrap()
        .split_whitespace()
        .map(|p| p.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    let lower_bound_y: f64 = doc
        .descendants()
        .find(|n| n.has_tag_name("line") && class_is(*n, "lower-bound"))
        .and_then(|n| n.attribute("y1"))
        .unwrap()
        .parse()
        .unwrap();
    // Breadth 96 at operator 3 (%2 + %3), the top of the curve, on the lower-bound line.
    let top = ys.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        (top - lower_bound_y).abs() < 0.02,
        "{top} vs {lower_bound_y}"
    );
}

#[test]
fn caption_gives_slab_lower_bound_and_ratio() {
    let mut plan = chain();
    plan.slab_size = 128;
    let svg = plan.render("chain");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let caption = doc
        .descendants()
        .find(|n| class_is(*n, "caption"))
        .and_then(|n| n.text())
        .unwrap();
    assert!(caption.contains("slab 128 B"), "{caption}");
    assert!(caption.contains("lower bound 96 B"), "{caption}");
    assert!(caption.contains("1.333"), "{caption}");
}

#[test]
fn names_and_title_are_escaped() {
    let mut plan = chain();
    plan.names[0] = r#"<a&b>"q'"#.to_string();
    plan.names[1] = "ctl\u{1}char".to_string();
    let svg = plan.render("m<&>\"odel\" · s");
    assert!(!svg.contains("<a&b>"));
    assert!(svg.contains("&lt;a&amp;b&gt;&quot;q&apos;"));
    let titles = check_structure(&svg, 5);
    assert!(titles[0].starts_with(r#"<a&b>"q'"#), "{}", titles[0]);
    assert!(titles[1].starts_with("ctl\u{fffd}char"), "{}", titles[1]);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let heading = doc
        .descendants()
        .find(|n| class_is(*n, "title"))
        .and_then(|n| n.text())
        .unwrap();
    assert_eq!(heading, "m<&>\"odel\" · s");
}

#[test]
fn mismatched_lengths_draw_the_common_prefix() {
    let mut plan = chain();
    plan.names.truncate(3);
    let svg = plan.render("chain");
    check_structure(&svg, 3);
}

#[test]
fn extreme_values_do_not_panic() {
    let plan = Plan {
        records: vec![
            UsageRecord::new(u64::MAX, 0, usize::MAX),
            UsageRecord::new(1, usize::MAX, usize::MAX),
        ],
        names: names(2),
        offsets: vec![u64::MAX, 0],
        slab_size: u64::MAX,
        num_ops: usize::MAX,
        lower_bound: 0,
    };
    check_structure(&plan.render("extreme"), 2);
}

#[test]
fn many_tensors_stay_small_and_well_formed() {
    // A staircase of 20,000 tensors, each one operator long, stacked pairwise.
    let n = 20_000;
    let records: Vec<UsageRecord> = (0..n)
        .map(|i| UsageRecord::new(1024 + (i as u64 % 7) * 64, i / 2, i / 2 + 1))
        .collect();
    let offsets: Vec<u64> = (0..n).map(|i| (i as u64 % 4) * 2048).collect();
    let plan = Plan {
        names: names(n),
        records,
        offsets,
        slab_size: 8192,
        num_ops: n / 2 + 2,
        lower_bound: 4096,
    };
    let svg = plan.render("staircase");
    check_structure(&svg, n);
    assert!(svg.len() < 220 * n, "{} bytes for {n} tensors", svg.len());
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let points = doc
        .descendants()
        .find(|n| class_is(*n, "breadth"))
        .and_then(|n| n.attribute("points"))
        .unwrap()
        .split_whitespace()
        .count();
    assert!(points < 5000, "breadth curve of {points} points");
}

#[test]
fn rendering_is_deterministic() {
    assert_eq!(chain().render("chain"), chain().render("chain"));
}
