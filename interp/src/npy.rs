//! NumPy `.npy` files: reading and writing single arrays.
//!
//! The format (numpy.lib.format, versions 1.0, 2.0 and 3.0): the magic `\x93NUMPY`, a major and
//! minor version byte, the header length (a little-endian `u16` in version 1, `u32` in 2 and
//! 3), then an ASCII (3.0: UTF-8) Python dict literal such as
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 224, 224), }`, padded with spaces
//! and a newline, then the raw elements.
//!
//! Supported element types are the IR's: `<f4`, `<f2`, `|i1`, `|u1`, `<i4`, `<i8`, `|b1` (and
//! their big-endian `>` forms when reading). NumPy has no bfloat16, so `bf16` tensors can be
//! neither read nor written. Only C order: `fortran_order: True` is an error. Every malformed
//! file is an [`NpyError`], never a panic; the element count is checked against the data
//! before anything is allocated.

use crate::tensor::{Data, Tensor};
use tir_ir::{DType, TensorType};

const MAGIC: &[u8] = b"\x93NUMPY";

/// Why bytes are not an `.npy` file we can read, or a tensor cannot be written as one.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NpyError {
    #[error("not a .npy file (the magic string \\x93NUMPY is missing)")]
    BadMagic,
    #[error("unsupported .npy format version {0}.{1}")]
    Version(u8, u8),
    #[error("the file ends inside the header")]
    Truncated,
    #[error("malformed .npy header: {0}")]
    Header(String),
    #[error("unsupported dtype `{0}`; supported: <f4, <f2, |i1, |u1, <i4, <i8, |b1")]
    DType(String),
    #[error("fortran_order is True: only C-order arrays are supported")]
    FortranOrder,
    #[error("the shape {shape:?} has {expected} bytes of data but the file holds {found}")]
    DataLength {
        shape: Vec<u64>,
        expected: u64,
        found: u64,
    },
    #[error("NumPy has no {0} dtype; it cannot be stored in a .npy file")]
    Unrepresentable(DType),
    #[error("the tensor is inconsistent: its data does not match {0}")]
    Inconsistent(TensorType),
    #[error("expected {expected}, found {found}")]
    Mismatch {
        expected: TensorType,
        found: TensorType,
    },
    #[error(
        "expected {expected}, found dtype `{descr}`, which tir does not read (it reads <f4, <f2, |i1, |u1, <i4, <i8, |b1)"
    )]
    DTypeFor { descr: String, expected: TensorType },
}

/// The `descr` of an IR element type (little-endian), or `None` for `bf16`.
pub fn descr(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F32 => "<f4",
        DType::F16 => "<f2",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::Bool => "|b1",
        DType::BF16 => return None,
    })
}

/// Parses a `descr` into an element type and whether it is big-endian.
fn parse_descr(d: &str) -> Result<(DType, bool), NpyError> {
    let bad = || NpyError::DType(d.to_string());
    let mut chars = d.chars();
    let order = chars.next().ok_or_else(bad)?;
    let code = chars.as_str();
    let dtype = match code {
        "f4" => DType::F32,
        "f2" => DType::F16,
        "i1" => DType::I8,
        "u1" => DType::U8,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "b1" => DType::Bool,
        _ => return Err(bad()),
    };
    let big = match order {
        '<' | '|' => false,
        '>' => true,
        // Native order: every machine tir runs on is little-endian.
        '=' => cfg!(target_endian = "big"),
        _ => return Err(bad()),
    };
    Ok((dtype, big && dtype.byte_size() > 1))
}

/// Reads a `.npy` file's bytes.
pub fn read(bytes: &[u8]) -> Result<Tensor, NpyError> {
    if bytes.len() < 8 || &bytes[..6] != MAGIC {
        return Err(if bytes.len() < 8 && MAGIC.starts_with(bytes) {
            NpyError::Truncated
        } else {
            NpyError::BadMagic
        });
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (len, start) = match major {
        1 => {
            let b = bytes.get(8..10).ok_or(NpyError::Truncated)?;
            (u64::from(u16::from_le_bytes([b[0], b[1]])), 10usize)
        }
        2 | 3 => {
            let b = bytes.get(8..12).ok_or(NpyError::Truncated)?;
            (
                u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                12usize,
            )
        }
        _ => return Err(NpyError::Version(major, minor)),
    };
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_add(start))
        .ok_or(NpyError::Truncated)?;
    let header = bytes.get(start..end).ok_or(NpyError::Truncated)?;
    let header = std::str::from_utf8(header)
        .map_err(|_| NpyError::Header("the header is not valid text".into()))?;
    let h = parse_header(header)?;
    let (dtype, big_endian) = parse_descr(&h.descr)?;
    if h.fortran_order {
        return Err(NpyError::FortranOrder);
    }
    let data = &bytes[end..];
    let expected = h
        .shape
        .iter()
        .try_fold(dtype.byte_size(), |a, &d| a.checked_mul(d));
    let found = data.len() as u64;
    if expected != Some(found) {
        return Err(NpyError::DataLength {
            shape: h.shape,
            expected: expected.unwrap_or(u64::MAX),
            found,
        });
    }
    let data = Data::from_bytes(dtype, data, big_endian).ok_or(NpyError::DataLength {
        shape: h.shape.clone(),
        expected: found,
        found,
    })?;
    let ty = TensorType::new(h.shape, dtype);
    Tensor::new(ty.clone(), data).ok_or(NpyError::Inconsistent(ty))
}

/// Reads a `.npy` file's bytes as a model input of type `expected`: [`read`], then the file's
/// type must be `expected`. This is the policy of every `.npy` input, `tirc run`'s and the
/// compiled executable's (whose C reader in `tir_codegen`'s `exe_main.c` makes the same
/// decisions with the same messages): big-endian data is read, anything that is not exactly
/// the header's shape of data (truncated, trailing bytes) is refused, and a refusal names what
/// was found and what was expected.
pub fn read_input(bytes: &[u8], expected: &TensorType) -> Result<Tensor, NpyError> {
    let t = read(bytes).map_err(|e| match e {
        NpyError::DType(descr) => NpyError::DTypeFor {
            descr,
            expected: expected.clone(),
        },
        e => e,
    })?;
    if t.ty != *expected {
        return Err(NpyError::Mismatch {
            expected: expected.clone(),
            found: t.ty,
        });
    }
    Ok(t)
}

/// Writes a tensor as a `.npy` file: version 1.0 when the header fits, else 2.0.
pub fn write(t: &Tensor) -> Result<Vec<u8>, NpyError> {
    let d = descr(t.ty.dtype).ok_or(NpyError::Unrepresentable(t.ty.dtype))?;
    if !t.is_consistent() {
        return Err(NpyError::Inconsistent(t.ty.clone()));
    }
    let shape = match t.ty.shape.as_slice() {
        [] => "()".to_string(),
        [one] => format!("({one},)"),
        s => format!(
            "({})",
            s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let dict = format!("{{'descr': '{d}', 'fortran_order': False, 'shape': {shape}, }}");
    // The data starts at a multiple of 64 bytes (NumPy >= 1.19 aligns so); the header ends
    // with a newline.
    let padded = |prefix: usize| {
        let unpadded = prefix + dict.len() + 1;
        unpadded.div_ceil(64) * 64 - prefix
    };
    let (mut out, header_len) = if padded(10) <= usize::from(u16::MAX) {
        let n = padded(10);
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(n as u16).to_le_bytes());
        (out, n)
    } else {
        let n = padded(12);
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[2, 0]);
        let n32 =
            u32::try_from(n).map_err(|_| NpyError::Header("the header is too long".into()))?;
        out.extend_from_slice(&n32.to_le_bytes());
        (out, n)
    };
    out.extend_from_slice(dict.as_bytes());
    out.resize(out.len() + header_len - dict.len() - 1, b' ');
    out.push(b'\n');
    out.extend_from_slice(&t.data.to_le_bytes());
    Ok(out)
}

struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
}

/// A value of the header's Python literal: the subset NumPy writes.
#[derive(Debug)]
enum Lit {
    Str(String),
    Bool(bool),
    Int(u64),
    Tuple(Vec<Lit>),
}

fn parse_header(text: &str) -> Result<Header, NpyError> {
    let mut p = Lexer {
        s: text.as_bytes(),
        i: 0,
    };
    let err = |m: &str| NpyError::Header(m.to_string());
    p.expect(b'{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        p.skip_ws();
        if p.eat(b'}') {
            break;
        }
        let key = match p.literal(0)? {
            Lit::Str(k) => k,
            _ => return Err(err("dict keys must be strings")),
        };
        p.expect(b':')?;
        let value = p.literal(0)?;
        match (key.as_str(), value) {
            ("descr", Lit::Str(s)) => descr = Some(s),
            ("descr", _) => return Err(NpyError::DType("a structured dtype".into())),
            ("fortran_order", Lit::Bool(b)) => fortran = Some(b),
            ("shape", Lit::Tuple(items)) => {
                let dims = items
                    .into_iter()
                    .map(|l| match l {
                        Lit::Int(n) => Ok(n),
                        _ => Err(err("shape entries must be integers")),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                shape = Some(dims);
            }
            ("fortran_order" | "shape", _) => {
                return Err(err(&format!("`{key}` has the wrong kind of value")))
            }
            _ => return Err(err(&format!("unexpected key `{key}`"))),
        }
        p.skip_ws();
        if !p.eat(b',') {
            p.expect(b'}')?;
            break;
        }
    }
    p.skip_ws();
    if p.i != p.s.len() {
        return Err(err("text after the dict"));
    }
    Ok(Header {
        descr: descr.ok_or_else(|| err("no `descr` key"))?,
        fortran_order: fortran.ok_or_else(|| err("no `fortran_order` key"))?,
        shape: shape.ok_or_else(|| err("no `shape` key"))?,
    })
}

struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
}

impl Lexer<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), NpyError> {
        self.skip_ws();
        if self.eat(c) {
            Ok(())
        } else {
            Err(NpyError::Header(format!(
                "expected `{}` at byte {}",
                c as char, self.i
            )))
        }
    }

    fn literal(&mut self, depth: usize) -> Result<Lit, NpyError> {
        let err = |m: String| Err(NpyError::Header(m));
        if depth > 8 {
            return err("tuples nested too deeply".into());
        }
        self.skip_ws();
        let Some(&c) = self.s.get(self.i) else {
            return err("the header ends early".into());
        };
        match c {
            b'\'' | b'"' => {
                self.i += 1;
                let start = self.i;
                while self.i < self.s.len() && self.s[self.i] != c {
                    if self.s[self.i] == b'\\' {
                        return err("escapes in strings are not supported".into());
                    }
                    self.i += 1;
                }
                if self.i >= self.s.len() {
                    return err("unterminated string".into());
                }
                let text = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                self.i += 1;
                Ok(Lit::Str(text))
            }
            b'(' => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_ws();
                    if self.eat(b')') {
                        break;
                    }
                    items.push(self.literal(depth + 1)?);
                    self.skip_ws();
                    if !self.eat(b',') {
                        self.expect(b')')?;
                        break;
                    }
                }
                Ok(Lit::Tuple(items))
            }
            b'0'..=b'9' => {
                let start = self.i;
                while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                    self.i += 1;
                }
                // Python 2 wrote long integers with an `L` suffix.
                let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
                self.eat(b'L');
                match digits.parse::<u64>() {
                    Ok(n) => Ok(Lit::Int(n)),
                    Err(_) => err(format!("the dimension {digits} does not fit in 64 bits")),
                }
            }
            _ => {
                for (word, b) in [("True", true), ("False", false)] {
                    if self.s[self.i..].starts_with(word.as_bytes()) {
                        self.i += word.len();
                        return Ok(Lit::Bool(b));
                    }
                }
                err(format!(
                    "unexpected `{}` at byte {}",
                    char::from(c).escape_default(),
                    self.i
                ))
            }
        }
    }
}
