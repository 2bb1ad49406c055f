//! Heap maps: a memory plan drawn as an SVG picture.
//!
//! The x axis is the operator index, the y axis the address in the slab (0 at the bottom); each
//! tensor is a rectangle over its lifetime `[first_op, last_op + 1)` and its bytes
//! `[offset, offset + size)`, as in the heap maps of Levental's memory-planning thesis (appendix 2).
//! Over the rectangles go the breadth curve (total size live at each operator, Pisarchyk & Lee
//! §3) and dashed lines at the offsets lower bound (max breadth) and at the slab size, so that the
//! gap between the curve and the highest rectangle — fragmentation — can be read off the picture.
//!
//! The breadth curve is computed here from the records rather than taken from the planner, so that
//! the picture does not trust the code it shows. Output is deterministic (colours come from the
//! record index) and stays small for tens of thousands of tensors: coordinates are rounded to two
//! decimals, text labels go only in rectangles large enough to hold them, and a breadth curve with
//! more steps than pixels is drawn as its per-pixel maximum.

use std::fmt::{self, Write as _};

use super::UsageRecord;

/// Everything a heap map shows. Slices are per record and index-aligned with `records`; should
/// their lengths differ, only the common prefix is drawn.
#[derive(Clone, Copy, Debug)]
pub struct HeapmapInput<'a> {
    /// Heading of the picture, e.g. `"resnet50 · greedy_by_size"`.
    pub title: &'a str,
    pub records: &'a [UsageRecord],
    /// Display name of each record: a tensor name such as `%3`, or a CSV id.
    pub names: &'a [String],
    /// Bytes each record occupies in the slab (its size as planned, alignment included).
    pub sizes: &'a [u64],
    /// Offset of each record in the slab.
    pub offsets: &'a [u64],
    /// Size of the slab, the plan's cost.
    pub slab_size: u64,
    /// Number of operators in the execution order; the x axis spans at least `[0, num_ops)`.
    pub num_ops: usize,
    /// The offsets lower bound (max breadth) the plan is measured against.
    pub lower_bound: u64,
}

// Layout of the picture, in SVG user units (px).
const WIDTH: f64 = 1200.0;
const PLOT_LEFT: f64 = 92.0;
const PLOT_RIGHT: f64 = WIDTH - 176.0;
const PLOT_TOP: f64 = 84.0;
const PLOT_BOTTOM: f64 = PLOT_TOP + 520.0;
const HEIGHT: f64 = PLOT_BOTTOM + 58.0;
const PLOT_WIDTH: f64 = PLOT_RIGHT - PLOT_LEFT;
const PLOT_HEIGHT: f64 = PLOT_BOTTOM - PLOT_TOP;

const FONT: &str = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
const INK: &str = "#1f2933";
const MUTED: &str = "#616e7c";
const GRID: &str = "#e4e7eb";
const BREADTH_COLOUR: &str = "#243b53";
const LOWER_BOUND_COLOUR: &str = "#c62828";
const SLAB_COLOUR: &str = "#3e4c59";
/// Below this many tensors, rectangles get a thin white outline that sets neighbours apart; above
/// it the outlines would wash the picture out.
const OUTLINE_MAX_TENSORS: usize = 4000;
const LABEL_FONT_SIZE: f64 = 10.0;

/// Renders a plan as a self-contained SVG document.
pub fn render_heapmap_svg(input: &HeapmapInput<'_>) -> String {
    let n = input
        .records
        .len()
        .min(input.names.len())
        .min(input.sizes.len())
        .min(input.offsets.len());
    let records = &input.records[..n];
    let sizes = &input.sizes[..n];
    let offsets = &input.offsets[..n];

    let breadth = breadth_steps(records, sizes);
    let max_breadth = breadth.iter().map(|&(_, b)| b).max().unwrap_or(0);
    let highest_end = (0..n)
        .map(|i| u128::from(offsets[i]) + u128::from(sizes[i]))
        .max()
        .unwrap_or(0);
    let last_op_end = records
        .iter()
        .map(|r| r.last_op as u128 + 1)
        .max()
        .unwrap_or(0);

    let x_max = (input.num_ops as u128).max(last_op_end).max(1) as f64;
    let data_top = [
        u128::from(input.slab_size),
        u128::from(input.lower_bound),
        max_breadth,
        highest_end,
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
    .max(1) as f64;
    // Headroom above the highest line so that its label and the curve's top stay clear of the frame.
    let y_max = data_top * 1.06;
    let scale = Scale { x_max, y_max };

    let mut svg = String::with_capacity(4096 + n * 150);
    let _ = write_document(&mut svg, input, n, &scale, &breadth, max_breadth);
    svg
}

struct Scale {
    x_max: f64,
    y_max: f64,
}

impl Scale {
    fn x(&self, op: f64) -> f64 {
        PLOT_LEFT + op / self.x_max * PLOT_WIDTH
    }
    fn y(&self, address: f64) -> f64 {
        PLOT_BOTTOM - address / self.y_max * PLOT_HEIGHT
    }
}

fn write_document(
    svg: &mut String,
    input: &HeapmapInput<'_>,
    n: usize,
    scale: &Scale,
    breadth: &[(u128, u128)],
    max_breadth: u128,
) -> fmt::Result {
    writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="{FONT}" font-size="12" fill="{INK}">"#,
        w = Px(WIDTH),
        h = Px(HEIGHT),
    )?;
    writeln!(svg, "<title>{}</title>", Escaped(input.title))?;
    writeln!(
        svg,
        "<style>.tensors rect:hover{{stroke:{INK};stroke-width:1.5px}}</style>"
    )?;
    writeln!(
        svg,
        r##"<rect width="100%" height="100%" fill="#ffffff"/>"##
    )?;
    write_header(svg, input, n, max_breadth)?;
    writeln!(
        svg,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#f8f9fb"/>"##,
        Px(PLOT_LEFT),
        Px(PLOT_TOP),
        Px(PLOT_WIDTH),
        Px(PLOT_HEIGHT)
    )?;
    let y_ticks = address_ticks(scale.y_max);
    write_grid(svg, scale, &y_ticks)?;
    write_tensors(svg, input, n, scale)?;
    write_breadth(svg, scale, breadth)?;
    write_bounds(svg, input, scale)?;
    write_axes(svg, scale, &y_ticks)?;
    writeln!(svg, "</svg>")
}

fn write_header(
    svg: &mut String,
    input: &HeapmapInput<'_>,
    n: usize,
    max_breadth: u128,
) -> fmt::Result {
    writeln!(
        svg,
        r#"<text class="title" x="{}" y="30" font-size="17" font-weight="600">{}</text>"#,
        Px(PLOT_LEFT),
        Escaped(input.title)
    )?;
    let ratio = if input.lower_bound > 0 {
        format!("{:.3}", input.slab_size as f64 / input.lower_bound as f64)
    } else {
        "—".to_string()
    };
    let mut caption = format!(
        "slab {} B ({}) · lower bound {} B ({}) · slab / lower bound {ratio} · {} tensors · {} operators",
        Grouped(u128::from(input.slab_size)),
        Human(u128::from(input.slab_size)),
        Grouped(u128::from(input.lower_bound)),
        Human(u128::from(input.lower_bound)),
        Grouped(n as u128),
        Grouped(input.num_ops as u128),
    );
    if max_breadth != u128::from(input.lower_bound) && n > 0 {
        let _ = write!(caption, " · drawn max breadth {} B", Grouped(max_breadth));
    }
    writeln!(
        svg,
        r#"<text class="caption" x="{}" y="52" fill="{MUTED}">{}</text>"#,
        Px(PLOT_LEFT),
        Escaped(&caption)
    )?;

    // Legend, right-aligned above the plot.
    let y = 72.0;
    let mut x = PLOT_RIGHT;
    let items: [(&str, &str, &str); 3] = [
        ("slab", SLAB_COLOUR, "6 3"),
        ("lower bound (max breadth)", LOWER_BOUND_COLOUR, "6 3"),
        ("breadth", BREADTH_COLOUR, ""),
    ];
    writeln!(svg, r#"<g class="legend" font-size="11" fill="{MUTED}">"#)?;
    for (label, colour, dash) in items {
        let text_width = text_width(label, 11.0);
        x -= text_width;
        writeln!(
            svg,
            r#"<text x="{}" y="{}">{label}</text>"#,
            Px(x),
            Px(y + 4.0)
        )?;
        let dash_attr = if dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{dash}""#)
        };
        writeln!(
            svg,
            r#"<line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="{colour}" stroke-width="1.6"{dash_attr}/>"#,
            Px(x - 26.0),
            Px(x - 5.0),
        )?;
        x -= 26.0 + 18.0;
    }
    writeln!(svg, "</g>")
}

fn write_grid(svg: &mut String, scale: &Scale, y_ticks: &Ticks) -> fmt::Result {
    writeln!(svg, r#"<g class="grid" stroke="{GRID}" stroke-width="1">"#)?;
    for &value in &y_ticks.values {
        let y = scale.y(value * y_ticks.unit);
        writeln!(
            svg,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}"/>"#,
            Px(PLOT_LEFT),
            Px(y),
            Px(PLOT_RIGHT),
            Px(y)
        )?;
    }
    writeln!(svg, "</g>")
}

fn write_tensors(
    svg: &mut String,
    input: &HeapmapInput<'_>,
    n: usize,
    scale: &Scale,
) -> fmt::Result {
    let outline = if n <= OUTLINE_MAX_TENSORS {
        r##" stroke="#ffffff" stroke-width="0.6""##
    } else {
        ""
    };
    writeln!(svg, r#"<g class="tensors"{outline}>"#)?;
    let mut labels = Vec::new();
    for i in 0..n {
        let record = &input.records[i];
        let (size, offset) = (input.sizes[i], input.offsets[i]);
        let end = u128::from(offset) + u128::from(size);
        let x0 = scale.x(record.first_op as f64);
        let x1 = scale.x(record.last_op as f64 + 1.0);
        let y_top = scale.y(end as f64);
        let y_bottom = scale.y(offset as f64);
        let (width, height) = (x1 - x0, y_bottom - y_top);
        writeln!(
            svg,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}
{} B ({})
operators {}–{}
offset {} ({})</title></rect>"#,
            Px(x0),
            Px(y_top),
            Px(width.max(0.01)),
            Px(height.max(0.01)),
            Colour(i),
            Escaped(&input.names[i]),
            Grouped(u128::from(size)),
            Human(u128::from(size)),
            record.first_op,
            record.last_op,
            Grouped(u128::from(offset)),
            Human(u128::from(offset)),
        )?;
        let name = &input.names[i];
        if width >= text_width(name, LABEL_FONT_SIZE) + 6.0 && height >= LABEL_FONT_SIZE + 3.0 {
            labels.push((i, (x0 + x1) / 2.0, (y_top + y_bottom) / 2.0, width, height));
        }
    }
    writeln!(svg, "</g>")?;

    if labels.is_empty() {
        return Ok(());
    }
    writeln!(
        svg,
        r#"<g class="labels" font-size="{}" text-anchor="middle" fill="{INK}" pointer-events="none">"#,
        Px(LABEL_FONT_SIZE)
    )?;
    for (i, x, y, width, height) in labels {
        let size_text = Human(u128::from(input.sizes[i])).to_string();
        let two_lines = height >= 2.0 * LABEL_FONT_SIZE + 6.0
            && width >= text_width(&size_text, LABEL_FONT_SIZE - 1.0) + 6.0;
        if two_lines {
            writeln!(
                svg,
                r#"<text x="{}" y="{}">{}<tspan x="{}" dy="1.15em" font-size="{}" fill-opacity="0.72">{size_text}</tspan></text>"#,
                Px(x),
                Px(y - 2.0),
                Escaped(&input.names[i]),
                Px(x),
                Px(LABEL_FONT_SIZE - 1.0),
            )?;
        } else {
            writeln!(
                svg,
                r#"<text x="{}" y="{}">{}</text>"#,
                Px(x),
                Px(y + LABEL_FONT_SIZE * 0.35),
                Escaped(&input.names[i])
            )?;
        }
    }
    writeln!(svg, "</g>")
}

fn write_breadth(svg: &mut String, scale: &Scale, breadth: &[(u128, u128)]) -> fmt::Result {
    if breadth.is_empty() {
        return Ok(());
    }
    let mut points = String::new();
    for (k, (op, value)) in breadth_polyline(breadth, scale.x_max).iter().enumerate() {
        if k > 0 {
            points.push(' ');
        }
        write!(points, "{},{}", Px(scale.x(*op)), Px(scale.y(*value)))?;
    }
    // A white halo under the curve keeps it legible over any fill.
    writeln!(
        svg,
        r##"<polyline class="breadth-halo" fill="none" stroke="#ffffff" stroke-opacity="0.85" stroke-width="4" stroke-linejoin="round" points="{points}"/>"##
    )?;
    writeln!(
        svg,
        r#"<polyline class="breadth" fill="none" stroke="{BREADTH_COLOUR}" stroke-width="1.6" stroke-linejoin="round" points="{points}"><title>breadth: bytes live at each operator</title></polyline>"#
    )
}

fn write_bounds(svg: &mut String, input: &HeapmapInput<'_>, scale: &Scale) -> fmt::Result {
    let lower_y = scale.y(input.lower_bound as f64);
    let slab_y = scale.y(input.slab_size as f64);
    // Labels sit in the right margin beside their lines; when the lines are close, the labels are
    // pushed apart (the slab is never below the lower bound in a valid plan).
    let min_gap = 26.0;
    let (mut slab_label_y, mut lower_label_y) = (slab_y, lower_y);
    let gap = lower_y - slab_y;
    if gap < min_gap {
        let push = (min_gap - gap) / 2.0;
        slab_label_y -= push;
        lower_label_y += push;
    }
    let lines = [
        ("slab", SLAB_COLOUR, slab_y, slab_label_y, input.slab_size),
        (
            "lower-bound",
            LOWER_BOUND_COLOUR,
            lower_y,
            lower_label_y,
            input.lower_bound,
        ),
    ];
    for (class, colour, y, label_y, bytes) in lines {
        let title = if class == "slab" {
            "slab"
        } else {
            "lower bound"
        };
        writeln!(
            svg,
            r#"<line class="{class}" x1="{}" y1="{}" x2="{}" y2="{}" stroke="{colour}" stroke-width="1.4" stroke-dasharray="6 3"><title>{title}: {} B</title></line>"#,
            Px(PLOT_LEFT),
            Px(y),
            Px(PLOT_RIGHT + 6.0),
            Px(y),
            Grouped(u128::from(bytes)),
        )?;
        writeln!(
            svg,
            r#"<text class="{class}-label" x="{}" y="{}" fill="{colour}" font-size="11.5"><tspan font-weight="600">{title}</tspan><tspan x="{}" dy="1.2em">{}</tspan></text>"#,
            Px(PLOT_RIGHT + 10.0),
            Px(label_y - 3.0),
            Px(PLOT_RIGHT + 10.0),
            Human(u128::from(bytes)),
        )?;
    }
    Ok(())
}

fn write_axes(svg: &mut String, scale: &Scale, y_ticks: &Ticks) -> fmt::Result {
    writeln!(
        svg,
        r#"<g class="axes" stroke="{INK}" stroke-width="1" fill="none">"#
    )?;
    writeln!(
        svg,
        r#"<path d="M{} {}V{}H{}"/>"#,
        Px(PLOT_LEFT),
        Px(PLOT_TOP),
        Px(PLOT_BOTTOM),
        Px(PLOT_RIGHT)
    )?;
    let x_ticks = operator_ticks(scale.x_max);
    for &op in &x_ticks {
        let x = scale.x(op);
        writeln!(
            svg,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}"/>"#,
            Px(x),
            Px(PLOT_BOTTOM),
            Px(x),
            Px(PLOT_BOTTOM + 5.0)
        )?;
    }
    for &value in &y_ticks.values {
        let y = scale.y(value * y_ticks.unit);
        writeln!(
            svg,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}"/>"#,
            Px(PLOT_LEFT - 5.0),
            Px(y),
            Px(PLOT_LEFT),
            Px(y)
        )?;
    }
    writeln!(svg, "</g>")?;

    writeln!(
        svg,
        r#"<g class="tick-labels" font-size="11" fill="{MUTED}">"#
    )?;
    for &op in &x_ticks {
        writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            Px(scale.x(op)),
            Px(PLOT_BOTTOM + 18.0),
            Grouped(op as u128)
        )?;
    }
    for &value in &y_ticks.values {
        writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            Px(PLOT_LEFT - 8.0),
            Px(scale.y(value * y_ticks.unit) + 4.0),
            TickLabel {
                value,
                step: y_ticks.step,
                unit: y_ticks.unit_name
            },
        )?;
    }
    writeln!(svg, "</g>")?;
    writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle" fill="{MUTED}">operator index</text>"#,
        Px(PLOT_LEFT + PLOT_WIDTH / 2.0),
        Px(PLOT_BOTTOM + 42.0)
    )?;
    let mid = PLOT_TOP + PLOT_HEIGHT / 2.0;
    writeln!(
        svg,
        r#"<text x="22" y="{}" text-anchor="middle" fill="{MUTED}" transform="rotate(-90 22 {})">address in slab</text>"#,
        Px(mid),
        Px(mid)
    )
}

/// The breadth as a step function: `(op, bytes)` pairs, the value holding from `op` up to the next
/// pair's op. Starts at op 0 and ends with the value 0 after the last lifetime. The records'
/// closed lifetimes `[first_op, last_op]` are live over `[first_op, last_op + 1)` on the x axis.
fn breadth_steps(records: &[UsageRecord], sizes: &[u64]) -> Vec<(u128, u128)> {
    if records.is_empty() {
        return Vec::new();
    }
    // (op, +size) where a lifetime starts, (op, -size) where it has ended.
    let mut events: Vec<(u128, bool, u64)> = Vec::with_capacity(2 * records.len());
    for (record, &size) in records.iter().zip(sizes) {
        events.push((record.first_op as u128, true, size));
        events.push((record.last_op as u128 + 1, false, size));
    }
    events.sort_unstable();
    let mut steps: Vec<(u128, u128)> = vec![(0, 0)];
    let mut live: u128 = 0;
    let mut k = 0;
    while k < events.len() {
        let op = events[k].0;
        while k < events.len() && events[k].0 == op {
            let (_, starts, size) = events[k];
            if starts {
                live += u128::from(size);
            } else {
                live = live.saturating_sub(u128::from(size));
            }
            k += 1;
        }
        match steps.last_mut() {
            Some(last) if last.0 == op => last.1 = live,
            Some(last) if last.1 == live => {}
            _ => steps.push((op, live)),
        }
    }
    steps
}

/// Points of the step polyline, in (op, bytes). With more steps than the plot has room for, each
/// of `2 × PLOT_WIDTH` columns is drawn at the highest breadth within it, so peaks never vanish.
fn breadth_polyline(steps: &[(u128, u128)], x_max: f64) -> Vec<(f64, f64)> {
    let columns = (2.0 * PLOT_WIDTH) as usize;
    let mut points = Vec::new();
    let push_step = |points: &mut Vec<(f64, f64)>, x: f64, value: f64| {
        if let Some(&(_, previous)) = points.last() {
            points.push((x, previous));
        }
        points.push((x, value));
    };
    if steps.len() <= columns {
        for &(op, value) in steps {
            push_step(&mut points, op as f64, value as f64);
        }
    } else {
        let column_width = x_max / columns as f64;
        let mut column_max = vec![0u128; columns];
        for (k, &(op, value)) in steps.iter().enumerate() {
            let start = op as f64;
            let end = steps.get(k + 1).map_or(start, |&(next, _)| next as f64);
            let first = ((start / column_width) as usize).min(columns - 1);
            // A step that ends exactly on a column boundary does not reach into the next one.
            let last = ((end / column_width).ceil() as usize)
                .saturating_sub(1)
                .clamp(first, columns - 1);
            for slot in &mut column_max[first..=last] {
                *slot = (*slot).max(value);
            }
        }
        let mut previous = None;
        for (c, &value) in column_max.iter().enumerate() {
            if previous != Some(value) {
                push_step(&mut points, c as f64 * column_width, value as f64);
                previous = Some(value);
            }
        }
    }
    if let Some(&(_, last)) = points.last() {
        points.push((x_max, last));
    }
    points
}

/// Address ticks in a binary unit chosen for the axis range, at a 1–2–5 step of that unit.
struct Ticks {
    values: Vec<f64>,
    step: f64,
    unit: f64,
    unit_name: &'static str,
}

fn address_ticks(y_max: f64) -> Ticks {
    let (unit, unit_name) = binary_unit(y_max);
    let range = y_max / unit;
    let step = nice_step(range / 6.0);
    let values = (0..)
        .map(|k| k as f64 * step)
        .take_while(|&v| v <= range * (1.0 + 1e-9))
        .take(64)
        .collect();
    Ticks {
        values,
        step,
        unit,
        unit_name,
    }
}

fn operator_ticks(x_max: f64) -> Vec<f64> {
    let step = nice_step(x_max / 10.0).max(1.0);
    (0..)
        .map(|k| k as f64 * step)
        .take_while(|&v| v <= x_max * (1.0 + 1e-9))
        .take(64)
        .collect()
}

/// The smallest of 1, 2, 5 times a power of ten that is at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&step| step >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * magnitude)
}

fn binary_unit(bytes: f64) -> (f64, &'static str) {
    const UNITS: [(f64, &str); 4] = [
        (1024.0 * 1024.0 * 1024.0, "GiB"),
        (1024.0 * 1024.0, "MiB"),
        (1024.0, "KiB"),
        (1.0, "B"),
    ];
    UNITS
        .into_iter()
        .find(|&(unit, _)| bytes >= unit)
        .unwrap_or((1.0, "B"))
}

/// A coordinate rounded to two decimals, without trailing zeros.
struct Px(f64);

impl fmt::Display for Px {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = if self.0.is_finite() {
            (self.0 * 100.0).round() / 100.0
        } else {
            0.0
        };
        // `+ 0.0` turns -0 into 0.
        write!(f, "{}", v + 0.0)
    }
}

/// Text escaped for XML character data and attribute values. Characters XML 1.0 forbids become
/// U+FFFD so that any name still gives a well-formed document.
struct Escaped<'a>(&'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '&' => f.write_str("&amp;")?,
                '<' => f.write_str("&lt;")?,
                '>' => f.write_str("&gt;")?,
                '"' => f.write_str("&quot;")?,
                '\'' => f.write_str("&apos;")?,
                '\t' | '\n' | '\r' => f.write_char(c)?,
                c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                    f.write_char('\u{fffd}')?
                }
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// A byte count in the largest binary unit that keeps it at least 1, e.g. `1.50 MiB`.
struct Human(u128);

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.0 as f64;
        match [(1u128 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
            .into_iter()
            .find(|&(unit, _)| self.0 >= unit)
        {
            Some((unit, name)) => {
                // Three significant digits: 1.50 MiB, 64.0 KiB, 320 MiB.
                let value = bytes / unit as f64;
                let decimals = if value >= 99.95 {
                    0
                } else if value >= 9.995 {
                    1
                } else {
                    2
                };
                write!(f, "{value:.decimals$} {name}")
            }
            None => write!(f, "{} B", self.0),
        }
    }
}

/// An integer with thin grouping: `1,048,576`.
struct Grouped(u128);

impl fmt::Display for Grouped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.0.to_string();
        for (k, c) in digits.chars().enumerate() {
            if k > 0 && (digits.len() - k).is_multiple_of(3) {
                f.write_char(',')?;
            }
            f.write_char(c)?;
        }
        Ok(())
    }
}

/// An axis label such as `512 KiB` or `1.5 MiB`, with as many decimals as the step needs.
struct TickLabel {
    value: f64,
    step: f64,
    unit: &'static str,
}

impl fmt::Display for TickLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value == 0.0 {
            return f.write_str("0");
        }
        let decimals = if self.step >= 1.0 {
            0
        } else {
            (-self.step.log10()).ceil() as usize
        };
        write!(f, "{:.*} {}", decimals.min(6), self.value, self.unit)
    }
}

/// Fill colour of the `index`-th tensor: hues a golden angle apart, so that neighbours in the
/// record order differ clearly, at a soft saturation and lightness that keep labels legible.
struct Colour(usize);

impl fmt::Display for Colour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let index = self.0 as f64;
        let hue = (index * 137.507_764 + 200.0) % 360.0;
        // Alternate lightness a little too, so that equal-hue neighbours far apart stay distinct.
        let lightness = [0.70, 0.62, 0.76][self.0 % 3];
        let (r, g, b) = hsl_to_rgb(hue, 0.58, lightness);
        write!(f, "#{r:02x}{g:02x}{b:02x}")
    }
}

fn hsl_to_rgb(hue: f64, saturation: f64, lightness: f64) -> (u8, u8, u8) {
    let chroma = (1.0 - (2.0 * lightness - 1.0).abs()) * saturation;
    let h = hue / 60.0;
    let x = chroma * (1.0 - (h % 2.0 - 1.0).abs());
    let (r, g, b) = match h as u32 {
        0 => (chroma, x, 0.0),
        1 => (x, chroma, 0.0),
        2 => (0.0, chroma, x),
        3 => (0.0, x, chroma),
        4 => (x, 0.0, chroma),
        _ => (chroma, 0.0, x),
    };
    let m = lightness - chroma / 2.0;
    let channel = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    (channel(r), channel(g), channel(b))
}

/// Rough width of `text` in a sans-serif face, enough to decide whether a label fits.
fn text_width(text: &str, font_size: f64) -> f64 {
    text.chars().count() as f64 * font_size * 0.6
}
