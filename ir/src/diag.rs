//! Diagnostics: every phase's errors are data carrying spans; this is the one place that turns
//! them into text, as `file:line:col: error: message` followed by the source line and a caret.

use crate::span::Span;
use std::fmt::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// An error or warning ready to render.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    /// `Span::NONE` when the problem has no place in the text.
    pub span: Span,
    /// Extra lines, printed as `note: ...`.
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn error(message: impl Into<String>, span: Span) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span,
            notes: Vec::new(),
        }
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
}

/// Anything that can be shown as a located diagnostic.
pub trait ToDiagnostic {
    fn to_diagnostic(&self) -> Diagnostic;
}

/// Longest stretch of a source line shown around the caret; longer lines are elided so that
/// a 10 MB single-line file still gives a readable message.
const MAX_SHOWN: usize = 100;

/// 1-based line and column (in characters) of a byte offset. Offsets past the end, or inside
/// a UTF-8 sequence, are clamped to the nearest valid position.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = source[line_start..offset].chars().count() + 1;
    (line, col)
}

/// Renders diagnostics for one file.
pub fn render(file: &str, source: &str, diags: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diags {
        render_one(&mut out, file, source, d);
    }
    out
}

fn render_one(out: &mut String, file: &str, source: &str, d: &Diagnostic) {
    let sev = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    if d.span.is_none() {
        let _ = writeln!(out, "{file}: {sev}: {}", d.message);
    } else {
        let (line, col) = line_col(source, d.span.start);
        let _ = writeln!(out, "{file}:{line}:{col}: {sev}: {}", d.message);
        snippet(out, source, d.span, line);
    }
    for n in &d.notes {
        let _ = writeln!(out, "  note: {n}");
    }
}

fn snippet(out: &mut String, source: &str, span: Span, line: usize) {
    let mut start = span.start.min(source.len());
    while !source.is_char_boundary(start) {
        start -= 1;
    }
    let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = source[start..]
        .find('\n')
        .map_or(source.len(), |i| start + i);
    let text = &source[line_start..line_end];
    let text = text.strip_suffix('\r').unwrap_or(text);
    // Columns in characters; tabs shown as one space so the caret lines up.
    let chars: Vec<char> = text
        .chars()
        .map(|c| if c == '\t' { ' ' } else { c })
        .collect();
    let caret_col = source[line_start..start].chars().count();
    let end = span.end.clamp(start, line_end);
    let mut end_b = end;
    while !source.is_char_boundary(end_b) {
        end_b -= 1;
    }
    let width = source[start..end_b].chars().count().max(1);

    // Window of at most MAX_SHOWN chars around the caret.
    let (lo, hi) = if chars.len() <= MAX_SHOWN {
        (0, chars.len())
    } else {
        let lo = caret_col
            .saturating_sub(MAX_SHOWN / 3)
            .min(chars.len().saturating_sub(MAX_SHOWN));
        (lo, (lo + MAX_SHOWN).min(chars.len()))
    };
    let prefix = if lo > 0 { "..." } else { "" };
    let suffix = if hi < chars.len() { "..." } else { "" };
    let shown: String = chars[lo..hi].iter().collect();
    let gutter = line.to_string();
    let pad = " ".repeat(gutter.len());
    let _ = writeln!(out, "{gutter} | {prefix}{shown}{suffix}");
    let caret_at = caret_col.saturating_sub(lo) + prefix.len();
    let caret_width = width.min(hi.saturating_sub(caret_col).max(1));
    let _ = writeln!(
        out,
        "{pad} | {}{}",
        " ".repeat(caret_at),
        "^".repeat(caret_width)
    );
}
