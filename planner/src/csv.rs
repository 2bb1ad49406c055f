//! Usage records as CSV, the exchange format of public memory-allocation benchmark suites.
//!
//! The format is the one of google/minimalloc and cappadokes/idealloc (see
//! `shared/benchmarks/README.md`): a header `id,lower,upper,size` and one buffer per line, live
//! over the **half-open** interval `[lower, upper)`. A [`UsageRecord`] is closed (Pisarchyk & Lee
//! §3, as TFLite), so by default `first_op = lower` and `last_op = upper - 1`; with `inclusive`,
//! the file's interval is read as closed `[lower, upper]` instead.
//!
//! Columns are found by header name, so their order is free; fields and names may carry
//! surrounding whitespace. A plan written back by [`write_records_csv`] carries an extra `offset`
//! column, which [`read_records_csv`] accepts and ignores, so a planned file reads as its input.
//!
//! Every rejection is a [`CsvError`] naming the 1-based line (and the column, where there is one);
//! the reader never panics.

use std::fmt::{self, Write as _};
use std::num::IntErrorKind;

use super::UsageRecord;

/// The columns every file must have, in the order [`write_records_csv`] writes them.
pub const REQUIRED_COLUMNS: [&str; 4] = ["id", "lower", "upper", "size"];
/// The optional column a written plan adds; ignored on read.
pub const OFFSET_COLUMN: &str = "offset";

/// One buffer of a CSV file: its id exactly as written (trimmed) and its closed lifetime and size.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CsvRecord {
    /// The buffer's id. Integers in the public suites, but any non-empty text is kept as given.
    pub id: String,
    pub record: UsageRecord,
}

/// A rejected CSV input: where, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {kind}")]
pub struct CsvError {
    /// 1-based line of the offending header or row (of its start, for a quoted multi-line row).
    pub line: u64,
    pub kind: CsvErrorKind,
}

impl CsvError {
    /// The column the error is about, if it is about one.
    pub fn column(&self) -> Option<&str> {
        use CsvErrorKind::*;
        match &self.kind {
            MissingColumn { column } | EmptyId { column } => Some(column),
            UnknownColumn { column } | DuplicateColumn { column } => Some(column),
            NotAnInteger { column, .. } | Negative { column, .. } | Overflow { column, .. } => {
                Some(column)
            }
            NonPositiveSize { .. } => Some("size"),
            EmptyLifetime { .. } | ClosedUpperTooLarge { .. } => Some("upper"),
            DuplicateId { .. } => Some("id"),
            Empty | Malformed { .. } | FieldCount { .. } => None,
        }
    }
}

/// Why a CSV input was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CsvErrorKind {
    #[error("empty input, expected the header `id,lower,upper,size`")]
    Empty,
    #[error("malformed CSV: {message}")]
    Malformed { message: String },
    #[error("header lacks the column `{column}` (expected `id,lower,upper,size`)")]
    MissingColumn { column: &'static str },
    #[error(
        "unknown column `{}` in the header (expected `id,lower,upper,size[,offset]`)",
        Elided(column)
    )]
    UnknownColumn { column: String },
    #[error("column `{}` appears twice in the header", Elided(column))]
    DuplicateColumn { column: String },
    #[error("expected {expected} fields as in the header, got {found}")]
    FieldCount { expected: usize, found: usize },
    #[error("`{column}` is empty")]
    EmptyId { column: &'static str },
    #[error("`{column}` must be an integer, got {}", Quoted(value))]
    NotAnInteger { column: &'static str, value: String },
    #[error("`{column}` must not be negative, got {}", Elided(value))]
    Negative { column: &'static str, value: String },
    #[error("`{column}` does not fit in 64 bits, got {}", Elided(value))]
    Overflow { column: &'static str, value: String },
    #[error("size must be positive, got {}", Elided(value))]
    NonPositiveSize { value: String },
    #[error("{}", describe_empty_lifetime(*.lower, *.upper, *.inclusive))]
    EmptyLifetime {
        lower: u64,
        upper: u64,
        inclusive: bool,
    },
    /// A closed lifetime ending at the largest index leaves no operator count: the operators
    /// are numbered `0..=upper`, and `upper + 1` does not fit in 64 bits.
    #[error(
        "`upper` must be below {} in a closed interval (the operator count, upper + 1, must fit in 64 bits), got {upper}",
        u64::MAX
    )]
    ClosedUpperTooLarge { upper: u64 },
    #[error("duplicate id {} (first on line {first_line})", Quoted(id))]
    DuplicateId { id: String, first_line: u64 },
}

/// Longest stretch of a field echoed in a message, as `tir_ir::diag` shows at most 100
/// characters of a long source line: a 1 MB field still gives a one-line diagnostic.
const MAX_SHOWN: usize = 100;

/// A field as a message shows it: whole when short, else its first [`MAX_SHOWN`] characters,
/// `...` and how long it is.
struct Elided<'a>(&'a str);

/// [`Elided`], the shown part quoted and escaped as Rust's `{:?}` does.
struct Quoted<'a>(&'a str);

/// The shown part of `text` and, when it was cut, its length in characters.
fn elide(text: &str) -> (&str, Option<usize>) {
    match text.char_indices().nth(MAX_SHOWN) {
        None => (text, None),
        Some((cut, _)) => (&text[..cut], Some(text.chars().count())),
    }
}

impl fmt::Display for Elided<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match elide(self.0) {
            (shown, None) => f.write_str(shown),
            (shown, Some(n)) => write!(f, "{shown}... ({n} characters)"),
        }
    }
}

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match elide(self.0) {
            (shown, None) => write!(f, "{shown:?}"),
            (shown, Some(n)) => write!(f, "{shown:?}... ({n} characters)"),
        }
    }
}

fn describe_empty_lifetime(lower: u64, upper: u64, inclusive: bool) -> String {
    if inclusive {
        format!("lower must not exceed upper in a closed interval, got [{lower}, {upper}]")
    } else {
        format!("lower must be less than upper in a half-open interval, got [{lower}, {upper})")
    }
}

/// Where each known column sits in a row.
struct Columns {
    id: usize,
    lower: usize,
    upper: usize,
    size: usize,
    count: usize,
}

fn parse_header(fields: &::csv::StringRecord, line: u64) -> Result<Columns, CsvError> {
    let err = |kind| CsvError { line, kind };
    let mut slots: [Option<usize>; 4] = [None; 4];
    let mut offset_seen = false;
    for (index, name) in fields.iter().enumerate() {
        let slot = match REQUIRED_COLUMNS.iter().position(|c| *c == name) {
            Some(slot) => &mut slots[slot],
            None if name == OFFSET_COLUMN => {
                if offset_seen {
                    return Err(err(CsvErrorKind::DuplicateColumn {
                        column: name.to_string(),
                    }));
                }
                offset_seen = true;
                continue;
            }
            None => {
                return Err(err(CsvErrorKind::UnknownColumn {
                    column: name.to_string(),
                }))
            }
        };
        if slot.is_some() {
            return Err(err(CsvErrorKind::DuplicateColumn {
                column: name.to_string(),
            }));
        }
        *slot = Some(index);
    }
    let find = |slot: usize| {
        slots[slot].ok_or(CsvError {
            line,
            kind: CsvErrorKind::MissingColumn {
                column: REQUIRED_COLUMNS[slot],
            },
        })
    };
    Ok(Columns {
        id: find(0)?,
        lower: find(1)?,
        upper: find(2)?,
        size: find(3)?,
        count: fields.len(),
    })
}

/// Parses a non-negative integer field, telling apart the ways it can fail.
fn parse_u64(value: &str, column: &'static str, line: u64) -> Result<u64, CsvError> {
    let err = |kind| CsvError { line, kind };
    value.parse::<u64>().map_err(|e| match e.kind() {
        IntErrorKind::PosOverflow => err(CsvErrorKind::Overflow {
            column,
            value: value.to_string(),
        }),
        _ => match value.strip_prefix('-') {
            Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                if column == "size" {
                    err(CsvErrorKind::NonPositiveSize {
                        value: value.to_string(),
                    })
                } else {
                    err(CsvErrorKind::Negative {
                        column,
                        value: value.to_string(),
                    })
                }
            }
            _ => err(CsvErrorKind::NotAnInteger {
                column,
                value: value.to_string(),
            }),
        },
    })
}

fn parse_op(value: &str, column: &'static str, line: u64) -> Result<usize, CsvError> {
    let n = parse_u64(value, column, line)?;
    usize::try_from(n).map_err(|_| CsvError {
        line,
        kind: CsvErrorKind::Overflow {
            column,
            value: value.to_string(),
        },
    })
}

/// Turns the byte positions of rows into 1-based line numbers.
///
/// The csv crate's own line count goes astray around skipped blank lines, so lines are counted
/// here from the byte offset where each row starts, once over the text as rows move forward.
struct LineCounter<'t> {
    text: &'t [u8],
    byte: usize,
    line: u64,
}

impl<'t> LineCounter<'t> {
    fn new(text: &'t str) -> Self {
        LineCounter {
            text: text.as_bytes(),
            byte: 0,
            line: 1,
        }
    }

    fn line_at(&mut self, position: Option<&::csv::Position>) -> u64 {
        let Some(position) = position else {
            return self.line;
        };
        let mut target = usize::try_from(position.byte())
            .unwrap_or(usize::MAX)
            .min(self.text.len());
        // A row's recorded start may lie before the blank lines skipped to reach it.
        while matches!(self.text.get(target), Some(b'\r' | b'\n')) {
            target += 1;
        }
        if target > self.byte {
            let skipped = &self.text[self.byte..target];
            self.line += skipped.iter().filter(|&&b| b == b'\n').count() as u64;
            self.byte = target;
        }
        self.line
    }
}

/// A line holding only whitespace reads as one empty field; it is skipped like a blank line.
fn is_blank(row: &::csv::StringRecord) -> bool {
    row.len() == 1 && row.get(0).is_some_and(str::is_empty)
}

/// Reads usage records from CSV text with the header `id,lower,upper,size` (any column order,
/// an optional ignored `offset` column).
///
/// Lifetimes are half-open `[lower, upper)` unless `inclusive`, in which case they are closed
/// `[lower, upper]`. A header with no rows is an empty record set; an input without a header is an
/// error. Blank lines are skipped.
pub fn read_records_csv(text: &str, inclusive: bool) -> Result<Vec<CsvRecord>, CsvError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(::csv::Trim::All)
        .from_reader(text.as_bytes());
    let mut lines = LineCounter::new(text);
    // One row buffer for the whole file: a million rows would otherwise be a million
    // allocations, a large share of reading the file.
    let mut row = ::csv::StringRecord::new();
    let mut next_row = |row: &mut ::csv::StringRecord| loop {
        match reader.read_record(row) {
            Ok(false) => return None,
            Ok(true) if is_blank(row) => continue,
            Ok(true) => return Some(Ok(lines.line_at(row.position()))),
            Err(e) => {
                let line = lines.line_at(e.position());
                let kind = CsvErrorKind::Malformed {
                    message: e.to_string(),
                };
                return Some(Err(CsvError { line, kind }));
            }
        }
    };

    let columns = match next_row(&mut row) {
        None => {
            return Err(CsvError {
                line: 1,
                kind: CsvErrorKind::Empty,
            })
        }
        Some(line) => parse_header(&row, line?)?,
    };

    let mut records = Vec::new();
    let mut record_lines = Vec::new();
    while let Some(line) = next_row(&mut row) {
        let parsed = line.and_then(|line| parse_row(&row, &columns, line, inclusive));
        match parsed {
            Ok((id, record, line)) => {
                records.push(CsvRecord {
                    id: id.to_string(),
                    record,
                });
                record_lines.push(line);
            }
            // Rows are checked in file order: a duplicate id on an earlier line comes first.
            Err(e) => return Err(first_duplicate(&records, &record_lines).unwrap_or(e)),
        }
    }
    match first_duplicate(&records, &record_lines) {
        Some(e) => Err(e),
        None => Ok(records),
    }
}

/// One data row: its id, its record and its line, or why it is rejected (every check but the
/// one for duplicate ids, which [`first_duplicate`] makes once over the whole file).
fn parse_row<'r>(
    row: &'r ::csv::StringRecord,
    columns: &Columns,
    line: u64,
    inclusive: bool,
) -> Result<(&'r str, UsageRecord, u64), CsvError> {
    let err = |kind| CsvError { line, kind };
    if row.len() != columns.count {
        return Err(err(CsvErrorKind::FieldCount {
            expected: columns.count,
            found: row.len(),
        }));
    }
    let field = |index: usize| row.get(index).unwrap_or("");

    let id = field(columns.id);
    if id.is_empty() {
        return Err(err(CsvErrorKind::EmptyId { column: "id" }));
    }
    let lower = parse_op(field(columns.lower), "lower", line)?;
    let upper = parse_op(field(columns.upper), "upper", line)?;
    let size_text = field(columns.size);
    let size = parse_u64(size_text, "size", line)?;
    if size == 0 {
        return Err(err(CsvErrorKind::NonPositiveSize {
            value: size_text.to_string(),
        }));
    }
    if inclusive && upper == usize::MAX {
        return Err(err(CsvErrorKind::ClosedUpperTooLarge {
            upper: upper as u64,
        }));
    }
    let last_op = if inclusive {
        (lower <= upper).then_some(upper)
    } else {
        (lower < upper).then(|| upper - 1)
    };
    let Some(last_op) = last_op else {
        return Err(err(CsvErrorKind::EmptyLifetime {
            lower: lower as u64,
            upper: upper as u64,
            inclusive,
        }));
    };
    let record = UsageRecord {
        first_op: lower,
        last_op,
        size,
    };
    Ok((id, record, line))
}

/// The earliest row whose id an earlier row already has, as the error for it.
///
/// Sorting (hash, id, row) keys finds every repeated id in O(n log n) without a hash map of
/// owned strings; the hash only makes most comparisons integer ones, and equal hashes fall back
/// to comparing the ids, so colliding ids cost time, never a wrong answer.
fn first_duplicate(records: &[CsvRecord], lines: &[u64]) -> Option<CsvError> {
    // FNV-1a, 64-bit.
    let hash = |id: &str| {
        id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    };
    let mut keys: Vec<(u64, usize)> = records
        .iter()
        .enumerate()
        .map(|(i, r)| (hash(&r.id), i))
        .collect();
    keys.sort_unstable_by(|a, b| {
        (a.0.cmp(&b.0))
            .then_with(|| records[a.1].id.cmp(&records[b.1].id))
            .then(a.1.cmp(&b.1))
    });
    // In each run of equal ids (rows ascending), the second row is the first repetition.
    let repeat = keys
        .windows(2)
        .filter(|w| w[0].0 == w[1].0 && records[w[0].1].id == records[w[1].1].id)
        .map(|w| (w[1].1, w[0].1))
        .min()?;
    let (second, first) = repeat;
    Some(CsvError {
        line: lines[second],
        kind: CsvErrorKind::DuplicateId {
            id: records[second].id.clone(),
            first_line: lines[first],
        },
    })
}

/// Writes records in the format [`read_records_csv`] reads: header `id,lower,upper,size`, plus
/// `offset` when `offsets` is given, lines ending in `\n`.
///
/// With `inclusive` the closed lifetime is written as is, otherwise as half-open
/// `[first_op, last_op + 1)`. Ids that need it are quoted. Should `offsets` be shorter than
/// `records`, the rows without one get an empty `offset` field; extra offsets are ignored.
pub fn write_records_csv(
    records: &[CsvRecord],
    offsets: Option<&[u64]>,
    inclusive: bool,
) -> String {
    let mut out = String::with_capacity(32 * (records.len() + 1));
    out.push_str("id,lower,upper,size");
    if offsets.is_some() {
        out.push(',');
        out.push_str(OFFSET_COLUMN);
    }
    out.push('\n');
    for (index, CsvRecord { id, record }) in records.iter().enumerate() {
        // u128: `last_op + 1` must not wrap even for `usize::MAX`.
        let upper = record.last_op as u128 + u128::from(!inclusive);
        // Writing into a String cannot fail.
        let _ = write!(
            out,
            "{},{},{},{}",
            QuotedField(id),
            record.first_op,
            upper,
            record.size
        );
        if let Some(offsets) = offsets {
            out.push(',');
            if let Some(offset) = offsets.get(index) {
                let _ = write!(out, "{offset}");
            }
        }
        out.push('\n');
    }
    out
}

/// A field as RFC 4180 wants it: quoted (with doubled quotes) when it holds a delimiter, a quote
/// or a line break. (Whitespace at either end is trimmed by the reader, quoted or not.)
struct QuotedField<'a>(&'a str);

impl fmt::Display for QuotedField<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        if s.contains([',', '"', '\n', '\r']) {
            write!(f, "\"{}\"", s.replace('"', "\"\""))
        } else {
            f.write_str(s)
        }
    }
}
