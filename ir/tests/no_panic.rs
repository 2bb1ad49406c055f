//! The parser and verifier never panic, whatever the text: random token soups and random
//! mutations of a valid module all end in `Ok` or a list of located errors.

use proptest::prelude::*;

const TOKENS: &[&str] = &[
    "module",
    "@m",
    "func",
    "@main",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "<",
    ">",
    "->",
    ",",
    ":",
    "=",
    "%x",
    "%0",
    "%1",
    "tensor<",
    "1x3x",
    "f32",
    "i8>",
    "x",
    "return",
    "relu",
    "conv2d",
    "add",
    "concat",
    "split",
    "reshape",
    "const",
    "axis",
    "sizes",
    "shape",
    "name",
    "\"w\"",
    "-1",
    "0",
    "7",
    "1.5",
    "1e400",
    "-inf",
    "nan",
    "true",
    "99999999999999999999",
    "// c\n",
    "\n",
    " ",
    "{axis = 1}",
    "[1, 2]",
    "\"",
    "\\",
    "é",
    "\t",
];

const VALID: &str = "module @m {\n  func @main(%x: tensor<1x4x8x8xf32>) -> tensor<1x8x8x8xf32> {\n    %w = const {name = \"w\"} : tensor<4x4x3x3xf32>\n    %0 = conv2d(%x, %w) {pads = [1, 1, 1, 1], activation = relu}\n    %1, %2 = split(%0) {axis = 1, sizes = [2, 2]}\n    %3 = concat(%0, %1, %2) {axis = 1}\n    %4 = reshape(%3) {shape = [1, 8, 8, -1]}\n    return %4\n  }\n}\n";

fn check(text: &str) {
    // Reaching here without a panic is the property; the result itself may be either.
    if let Ok(m) = tir_ir::parse_and_verify(text) {
        let printed = tir_ir::print(&m);
        let again = tir_ir::parse_and_verify(&printed).expect("printed output re-parses");
        assert_eq!(tir_ir::print(&again), printed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn token_soup(tokens in proptest::collection::vec(proptest::sample::select(TOKENS), 0..80)) {
        check(&tokens.concat());
    }

    #[test]
    fn mutated_valid_module(edits in proptest::collection::vec((0usize..400, proptest::sample::select(TOKENS), any::<bool>()), 1..6)) {
        let mut text = VALID.to_string();
        for (pos, tok, delete) in edits {
            let mut at = pos % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            if delete {
                let mut end = (at + tok.len()).min(text.len());
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.replace_range(at..end, "");
            } else {
                text.insert_str(at, tok);
            }
        }
        check(&text);
    }

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = tir_ir::parser::parse_bytes(&bytes);
    }
}

#[test]
fn the_valid_module_is_valid() {
    tir_ir::parse_and_verify(VALID).expect("valid");
}
