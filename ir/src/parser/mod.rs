//! Text to [`Module`]: a pest grammar (`tir.pest`), then a lowering that resolves names, reads
//! attributes into typed ops and reports every problem it finds.

mod lower;

use crate::diag::{Diagnostic, ToDiagnostic};
use crate::module::Module;
use crate::span::Span;
use pest::Parser as _;

#[derive(pest_derive::Parser)]
#[grammar = "parser/tir.pest"]
pub(crate) struct TirParser;

pub(crate) use lower::lower;

/// Deepest bracket nesting accepted. The grammar recurses on nested arrays; refusing deeper
/// input up front keeps the parser's stack bounded whatever the file holds.
pub const MAX_NESTING: usize = 64;

/// What stops a file from parsing.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ParseError {
    #[error("the file is not valid UTF-8 (invalid byte 0x{byte:02x})")]
    NotUtf8 { byte: u8, span: Span },
    #[error("brackets nested more than {MAX_NESTING} deep")]
    TooDeep { span: Span },
    #[error("{message}")]
    Syntax { message: String, span: Span },
    #[error("unknown op `{name}`{hint}")]
    UnknownOp {
        name: String,
        hint: String,
        span: Span,
    },
    #[error(transparent)]
    Attr(#[from] crate::attr::AttrError),
    #[error(
        "unknown element type `{name}`; expected one of f32, f16, bf16, i8, u8, i32, i64, bool"
    )]
    UnknownDType { name: String, span: Span },
    #[error("dimension `{text}` does not fit in 64 bits")]
    DimOverflow { text: String, span: Span },
    #[error("dimension `{text}`: {message}")]
    BadDim {
        text: String,
        message: String,
        span: Span,
    },
    #[error("value `%{name}` is defined more than once")]
    Redefined {
        name: String,
        span: Span,
        first: Span,
    },
    #[error("use of undefined value `%{name}`{hint}")]
    Undefined {
        name: String,
        hint: String,
        span: Span,
    },
    #[error("`{op}` has {expected} result(s) but {found} are named")]
    ResultCount {
        op: String,
        expected: usize,
        found: usize,
        span: Span,
    },
    #[error("{found} result type(s) given for {expected} result(s)")]
    TypeCount {
        expected: usize,
        found: usize,
        span: Span,
    },
    #[error("function `@{name}` is defined more than once")]
    DuplicateFunc { name: String, span: Span },
    #[error("function `@{name}` has more than one `return`")]
    DuplicateReturn { name: String, span: Span },
    #[error("statement after `return`")]
    AfterReturn { span: Span },
}

impl ParseError {
    pub fn span(&self) -> Span {
        match self {
            ParseError::Attr(e) => e.span(),
            ParseError::NotUtf8 { span, .. }
            | ParseError::TooDeep { span }
            | ParseError::Syntax { span, .. }
            | ParseError::UnknownOp { span, .. }
            | ParseError::UnknownDType { span, .. }
            | ParseError::DimOverflow { span, .. }
            | ParseError::BadDim { span, .. }
            | ParseError::Redefined { span, .. }
            | ParseError::Undefined { span, .. }
            | ParseError::ResultCount { span, .. }
            | ParseError::TypeCount { span, .. }
            | ParseError::DuplicateFunc { span, .. }
            | ParseError::DuplicateReturn { span, .. }
            | ParseError::AfterReturn { span } => *span,
        }
    }
}

impl ToDiagnostic for ParseError {
    fn to_diagnostic(&self) -> Diagnostic {
        let d = Diagnostic::error(self.to_string(), self.span());
        match self {
            ParseError::Redefined { .. } => {
                d.with_note("each value name may be defined once per function")
            }
            _ => d,
        }
    }
}

/// Parses bytes (checking UTF-8 first) into a module.
pub fn parse_bytes(bytes: &[u8]) -> Result<(String, Module), (String, Vec<ParseError>)> {
    match std::str::from_utf8(bytes) {
        Ok(s) => {
            let s = s.to_string();
            match parse(&s) {
                Ok(m) => Ok((s, m)),
                Err(e) => Err((s, e)),
            }
        }
        Err(e) => {
            let at = e.valid_up_to();
            // Show the valid prefix (and what follows, lossily) so the caret has a line to sit on.
            let text = String::from_utf8_lossy(bytes).into_owned();
            let offset = String::from_utf8_lossy(&bytes[..at]).len();
            let byte = bytes[at];
            Err((
                text,
                vec![ParseError::NotUtf8 {
                    byte,
                    span: Span::new(offset, offset + 1),
                }],
            ))
        }
    }
}

/// Parses a module from text. Returns every error the lowering finds; a syntax error stops at
/// the first, as there is no sound way to resynchronise.
pub fn parse(source: &str) -> Result<Module, Vec<ParseError>> {
    check_nesting(source)?;
    // The grammar needs only bounded lookahead, so parsing is linear in the input; nesting is
    // the one thing that could exhaust the stack, and `check_nesting` bounds it.
    // Detailed attempts let the error name the literal tokens (`)`, `,`) expected at the
    // furthest point reached, not just the rules. The flag is global and only ever set on.
    pest::set_error_detail(true);
    let pairs = TirParser::parse(Rule::file, source).map_err(|e| vec![syntax_error(source, e)])?;
    lower(source, pairs)
}

/// Rejects input nested deeper than [`MAX_NESTING`], ignoring brackets in strings and comments.
fn check_nesting(source: &str) -> Result<(), Vec<ParseError>> {
    let bytes = source.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' | b'<' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(vec![ParseError::TooDeep {
                        span: Span::new(i, i + 1),
                    }]);
                }
            }
            b'-' if bytes.get(i + 1) == Some(&b'>') => i += 1,
            b')' | b']' | b'}' | b'>' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

fn rule_name(rule: &Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::EOI => "end of file",
        Rule::module => "`module`",
        Rule::func => "`func`",
        Rule::close_brace => "`}`",
        Rule::params | Rule::param => "a parameter `%name: tensor<...>`",
        Rule::func_results => "`->`",
        Rule::return_op => "`return`",
        Rule::op_stmt | Rule::results => "a statement `%name = op(...)`",
        Rule::operands => "an operand",
        Rule::outs => "`outs(...)`",
        Rule::result_types => "`:` and a result type",
        Rule::attr_dict => "an attribute dictionary `{...}`",
        Rule::attr => "an attribute `name = value`",
        Rule::attr_value | Rule::array | Rule::bool | Rule::word | Rule::int | Rule::float => {
            "an attribute value"
        }
        Rule::string | Rule::string_body => "a string",
        Rule::tensor_type => "a tensor type `tensor<...>`",
        Rule::dim | Rule::sym_dim => "a dimension",
        Rule::dtype => "an element type",
        Rule::symbol => "a symbol `@name`",
        Rule::value_name => "a value `%name`",
        Rule::op_name => "an op name",
        Rule::attr_name => "an attribute name",
        Rule::ident => "an identifier",
        _ => return None,
    })
}

fn syntax_error(source: &str, e: pest::error::Error<Rule>) -> ParseError {
    use pest::error::{ErrorVariant, InputLocation};
    let mut pos = match e.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    let mut names: Vec<String> = Vec::new();
    if let Some(attempts) = e.parse_attempts() {
        pos = attempts.max_position;
        for t in attempts.expected_tokens() {
            // Literal tokens display as themselves; character ranges (`0..9`) and built-in
            // rules are better described by the rule that wanted them, below.
            // Whitespace, comments and identifier characters could always come next; naming
            // them only hides the useful part of the message.
            let token = t.to_string();
            let ident_char = token.chars().count() == 1
                && token
                    .chars()
                    .all(|c| c.is_alphanumeric() || "_.$".contains(c));
            let noise = token.trim().is_empty() || token == "//" || ident_char;
            if !noise && token != "BUILTIN_RULE" && !(token.len() == 4 && token.contains("..")) {
                names.push(format!("`{token}`"));
            }
        }
        for stack in attempts.call_stacks() {
            if let Some(n) = stack.deepest.get_rule().and_then(rule_name) {
                names.push(n.to_string());
            }
        }
    } else if let ErrorVariant::ParsingError { positives, .. } = &e.variant {
        names.extend(positives.iter().filter_map(rule_name).map(String::from));
    }
    let mut seen = Vec::new();
    names.retain(|n| {
        let fresh = !seen.contains(n);
        seen.push(n.clone());
        fresh
    });
    let expected = match names.as_slice() {
        [] => String::from("unexpected input"),
        [one] => format!("expected {one}"),
        [init @ .., last] => format!("expected {} or {last}", init.join(", ")),
    };
    let message = match &e.variant {
        ErrorVariant::CustomError { message } => message.clone(),
        ErrorVariant::ParsingError { .. } => {
            format!("{expected}, found {}", describe_at(source, pos))
        }
    };
    let pos = pos.min(source.len());
    let end = source[pos..]
        .chars()
        .next()
        .map_or(pos, |c| pos + c.len_utf8());
    ParseError::Syntax {
        message,
        span: Span::new(pos, end),
    }
}

/// A short description of the text at `pos`: `end of file`, or the token starting there.
fn describe_at(source: &str, pos: usize) -> String {
    let rest = &source[pos.min(source.len())..];
    let Some(c) = rest.chars().next() else {
        return "end of file".into();
    };
    if c.is_alphanumeric() || c == '_' || c == '%' || c == '@' {
        let tok: String = rest
            .chars()
            .enumerate()
            .take_while(|(i, c)| {
                c.is_alphanumeric() || "_.$".contains(*c) || (*i == 0 && "%@".contains(*c))
            })
            .map(|(_, c)| c)
            .take(40)
            .collect();
        format!("`{tok}`")
    } else if c == '\n' {
        "end of line".into()
    } else {
        format!("`{}`", c.escape_debug())
    }
}
