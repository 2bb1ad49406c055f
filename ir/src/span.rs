//! Byte spans into the source text. Modules built in code carry `Span::NONE`.

/// A half-open byte range `[start, end)` into the source the module was parsed from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    /// The span of something that did not come from text.
    pub const NONE: Span = Span {
        start: usize::MAX,
        end: usize::MAX,
    };

    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }

    pub fn is_none(&self) -> bool {
        self.start == usize::MAX
    }

    pub fn from_pest(s: pest::Span<'_>) -> Self {
        Span {
            start: s.start(),
            end: s.end(),
        }
    }
}
