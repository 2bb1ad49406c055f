//! `tirc plan --json`'s report, written by hand: the same bytes as `serde_json`'s pretty
//! printer (two-space indents, `"key": value`), at a fraction of its cost.
//!
//! At a million records the report is about 125 MB, a million record objects and a million
//! offsets; through serde every one of those values costs a chain of generic calls (key,
//! value, indent, separator), which made writing the report about a quarter of the whole
//! `tirc plan --records` process. Here each record is a few byte copies and integer
//! conversions into one buffer, handed to the output in 1 MiB chunks (one growing buffer of
//! the whole report would fault in 125 MB of fresh pages for nothing). Only the few floats and
//! the strings that need escaping still go through `serde_json`, so their spelling is its own.

use std::io::{self, Write};

use serde::Serialize;

/// Bytes buffered before they go to the output.
const CHUNK: usize = 1 << 20;

/// A pretty-printing JSON writer over `out`, in the layout of `serde_json::to_writer_pretty`.
pub struct Pretty<W: Write> {
    out: W,
    buf: Vec<u8>,
    indent: usize,
    /// No value written yet in the innermost open object or array.
    empty: bool,
}

impl<W: Write> Pretty<W> {
    pub fn new(out: W) -> Self {
        Pretty {
            out,
            buf: Vec::with_capacity(CHUNK + 4096),
            indent: 0,
            empty: true,
        }
    }

    /// Hands the buffer to the output once it holds a chunk; called between values.
    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= CHUNK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes what is buffered and flushes the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        self.out.flush()?;
        Ok(self.out)
    }

    fn newline(&mut self) {
        // A line break and the indent in one copy (a loop of two-space copies was most of
        // the writer's instructions).
        const LINE: &[u8; 65] =
            b"\n                                                                ";
        match LINE.get(..1 + 2 * self.indent) {
            Some(line) => self.buf.extend_from_slice(line),
            None => {
                self.buf.push(b'\n');
                for _ in 0..self.indent {
                    self.buf.extend_from_slice(b"  ");
                }
            }
        }
    }

    /// Starts the next value of the innermost container: a separator and the indent.
    fn next(&mut self) {
        if !self.empty {
            self.buf.push(b',');
        }
        self.newline();
        self.empty = false;
    }

    pub fn begin_object(&mut self) {
        self.open(b'{');
    }

    pub fn end_object(&mut self) -> io::Result<()> {
        self.close(b'}')
    }

    pub fn begin_array(&mut self) {
        self.open(b'[');
    }

    pub fn end_array(&mut self) -> io::Result<()> {
        self.close(b']')
    }

    fn open(&mut self, bracket: u8) {
        self.buf.push(bracket);
        self.indent += 1;
        self.empty = true;
    }

    fn close(&mut self, bracket: u8) -> io::Result<()> {
        self.indent -= 1;
        // An empty container is `[]` or `{}` on one line, as serde_json writes it.
        if !self.empty {
            self.newline();
        }
        self.buf.push(bracket);
        // The container is itself a value of its parent, which is therefore not empty.
        self.empty = false;
        self.spill()
    }

    /// `"key": `, before an object's value. Keys are plain identifiers (no escaping).
    pub fn key(&mut self, key: &str) {
        self.next();
        self.buf.push(b'"');
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\": ");
    }

    /// Before an array's element.
    pub fn element(&mut self) {
        self.next();
    }

    #[inline]
    pub fn u64(&mut self, value: u64) {
        // Two digits at a time from the end, as itoa (which serde_json uses) does.
        const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
            2021222324252627282930313233343536373839\
            4041424344454647484950515253545556575859\
            6061626364656667686970717273747576777879\
            8081828384858687888990919293949596979899";
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut n = value;
        while n >= 100 {
            let pair = (n % 100) as usize * 2;
            n /= 100;
            at -= 2;
            digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        }
        if n >= 10 {
            let pair = n as usize * 2;
            at -= 2;
            digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        } else {
            at -= 1;
            digits[at] = b'0' + n as u8;
        }
        self.buf.extend_from_slice(&digits[at..]);
    }

    /// A string, escaped as serde_json escapes it (control characters, `"` and `\`).
    pub fn str(&mut self, value: &str) {
        if value.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            self.buf.push(b'"');
            self.buf.extend_from_slice(value.as_bytes());
            self.buf.push(b'"');
        } else {
            self.serde(value);
        }
    }

    /// A float (or `null` for one that is not finite) as serde_json spells it.
    pub fn f64(&mut self, value: f64) {
        self.serde(&value);
    }

    /// The newline after the report (serde_json writes none; `tirc` adds it).
    pub fn end_line(&mut self) {
        self.buf.push(b'\n');
    }

    pub fn bool(&mut self, value: bool) {
        self.buf
            .extend_from_slice(if value { b"true" } else { b"false" });
    }

    /// A scalar through serde_json itself.
    fn serde<T: Serialize + ?Sized>(&mut self, value: &T) {
        // Writing a string or a number into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut self.buf, value);
    }

    /// `"key": value` for an unsigned integer.
    pub fn key_u64(&mut self, key: &str, value: u64) {
        self.key(key);
        self.u64(value);
    }

    pub fn key_str(&mut self, key: &str, value: &str) {
        self.key(key);
        self.str(value);
    }

    pub fn key_f64(&mut self, key: &str, value: f64) {
        self.key(key);
        self.f64(value);
    }

    /// `"key": [ ... ]` of unsigned integers, one per line.
    pub fn key_u64s(&mut self, key: &str, values: impl IntoIterator<Item = u64>) -> io::Result<()> {
        self.key(key);
        self.begin_array();
        // The report's integer arrays sit at indent 4: their separator as one constant
        // (a copy of known length, not a call).
        const AT_4: &[u8] = b",\n        ";
        for v in values {
            if self.indent == 4 && !self.empty {
                self.buf.extend_from_slice(AT_4);
            } else {
                self.element();
            }
            self.u64(v);
            self.spill()?;
        }
        self.end_array()
    }

    /// One element of the report's `records` array (an array at indent 2): the object
    /// `{"name", "first_op", "last_op", "size"}` written as whole lines, the hot loop of the
    /// report, with what [`Self::begin_object`] and [`Self::key`] would write.
    pub fn record(&mut self, name: &str, first_op: u64, last_op: u64, size: u64) -> io::Result<()> {
        if self.indent != 2 {
            self.element();
            self.begin_object();
            self.key_str("name", name);
            self.key_u64("first_op", first_op);
            self.key_u64("last_op", last_op);
            self.key_u64("size", size);
            return self.end_object();
        }
        self.buf.extend_from_slice(if self.empty {
            b"\n    {\n      \"name\": "
        } else {
            b",\n    {\n      \"name\": "
        });
        self.str(name);
        self.buf.extend_from_slice(b",\n      \"first_op\": ");
        self.u64(first_op);
        self.buf.extend_from_slice(b",\n      \"last_op\": ");
        self.u64(last_op);
        self.buf.extend_from_slice(b",\n      \"size\": ");
        self.u64(size);
        self.buf.extend_from_slice(b"\n    }");
        self.empty = false;
        self.spill()
    }
}
