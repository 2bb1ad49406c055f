//! One BERT-base encoder layer at sequence length 128 (Devlin et al. 2019).

use crate::nn::{Net, NetResult};
use crate::ModelSpec;
use tir_ir::{Module, UnaryOp};

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "bert_base_layer",
        file: "bert_base_layer.tir",
        architecture: "BERT-base encoder layer (hidden 768, 12 heads, FFN 3072, GELU)",
        paper: "Devlin et al., \"BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding\", 2019",
        input: "sequence 128 x hidden 768, plus an additive attention mask 1x1x1x128",
        notes: &[
            "Post-norm transformer layer: Q, K, V projections (fully connected with bias), split",
            "into 12 heads of 64, scaled dot-product attention (matmul, scale, + mask, softmax,",
            "matmul), merge heads, output projection, residual add, layer norm; FFN 768 -> 3072",
            "(GELU) -> 768, residual add, layer norm (the output).",
        ],
        reference: None,
        size: 128,
        // Not the smallest meaningful sequence (2, for the softmax over keys to weigh more than
        // one token): every dense layer is a GEMM with M = the sequence, and 16 rows cover two
        // full 6-row register tiles of the micro-kernel plus a remainder. The 768/3072-wide layers
        // and the 12 heads, the architecture, are unchanged.
        test_size: 16,
        build,
    }
}

const HIDDEN: u64 = 768;
const HEADS: u64 = 12;
const HEAD_DIM: u64 = HIDDEN / HEADS;

fn build(size: u64) -> NetResult<Module> {
    // The sequence length.
    let seq = size;
    let mut net = Net::new("bert_base_layer");
    let hidden = net.input("hidden_states", &[1, seq, HIDDEN])?;
    let mask = net.input("attention_mask", &[1, 1, 1, seq])?;
    let x = net.reshape("tokens", hidden, &[seq as i64, HIDDEN as i64])?;
    let heads = |net: &mut Net, name: &str, perm: &[u64]| -> NetResult<_> {
        let p = net.dense(name, x, HIDDEN, None)?;
        let p = net.reshape(
            &format!("{name}.heads"),
            p,
            &[1, seq as i64, HEADS as i64, HEAD_DIM as i64],
        )?;
        net.transpose(&format!("{name}.transpose"), p, perm)
    };
    let q = heads(&mut net, "attention.query", &[0, 2, 1, 3])?;
    let k = heads(&mut net, "attention.key", &[0, 2, 3, 1])?;
    let v = heads(&mut net, "attention.value", &[0, 2, 1, 3])?;
    let scores = net.matmul("attention.scores", q, k)?;
    let scale = net.weight("attention.scale", &[])?;
    let scores = net.mul("attention.scaled", scores, scale)?;
    let scores = net.add("attention.masked", scores, mask)?;
    let probs = net.softmax("attention.probs", scores, -1)?;
    let ctx = net.matmul("attention.context", probs, v)?;
    let ctx = net.transpose("attention.context.transpose", ctx, &[0, 2, 1, 3])?;
    let ctx = net.reshape("attention.context.merge", ctx, &[seq as i64, HIDDEN as i64])?;
    let attn = net.dense("attention.output", ctx, HIDDEN, None)?;
    let attn = net.add("attention.residual", attn, x)?;
    let attn = net.layer_norm("attention.layer_norm", attn)?;
    let h = net.dense("intermediate", attn, 3072, None)?;
    let h = net.unary("intermediate.gelu", h, UnaryOp::Gelu)?;
    let h = net.dense("output", h, HIDDEN, None)?;
    let h = net.add("output.residual", h, attn)?;
    let h = net.layer_norm("output.layer_norm", h)?;
    let y = net.reshape("layer_output", h, &[1, seq as i64, HIDDEN as i64])?;
    Ok(net.finish(&[y]))
}
