//! RandWire-WS, small regime (Xie et al. 2019): randomly wired stages from a fixed seed.

use crate::nn::{Conv, Net, NetResult};
use crate::ModelSpec;
use tir_ir::{Module, UnaryOp, Value};

pub fn spec() -> ModelSpec {
    ModelSpec {
        name: "randwire_ws",
        file: "randwire_ws.tir",
        architecture: "RandWire-WS small regime (WS(4, 0.75), N = 32 nodes per stage, C = 78)",
        paper: "Xie et al., \"Exploring Randomly Wired Neural Networks for Image Recognition\", 2019",
        input: "224x224x3",
        notes: &[
            "The paper's small regime: conv1 3x3/2 (C/2), conv2 3x3/2 (C), then three random",
            "stages (C, 2C, 4C at 28, 14, 7) and a 1x1 conv 1280, global average pool, fully",
            "connected 1000, softmax. Each stage is a Watts-Strogatz graph WS(k = 4, p = 0.75) on",
            "32 nodes from a fixed seed (splitmix64; seeds 1, 2, 3), edges oriented from lower to",
            "higher node index. A node: weighted sum of its inputs (a scalar weight per edge), ReLU,",
            "3x3 separable conv (depthwise + pointwise, BN folded); input nodes read the stage",
            "input with stride 2; the stage output averages the nodes without successors.",
        ],
        reference: None,
        size: 224,
        // Smallest meaningful input (zoo/tests/test_sizes.rs checks it): stage conv5 runs at 2x2;
        // at 32 it is 1x1 and its 3x3 depthwise convs read only padding off their centre tap.
        test_size: 33,
        build,
    }
}

/// splitmix64 (Steele et al. 2014): a tiny deterministic generator, so the wiring never
/// depends on a library's version.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Watts-Strogatz graph as networkx builds it: a ring lattice where each node links to its
/// `k/2` right neighbours, then each lattice edge is rewired with probability `p` to a
/// uniformly chosen node (no self-loops, no duplicate edges). Returns undirected edges.
#[allow(clippy::needless_range_loop)] // node ids index the adjacency matrix
pub fn watts_strogatz(n: usize, k: usize, p: f64, seed: u64) -> Vec<(usize, usize)> {
    let mut rng = SplitMix64(seed);
    let mut adj = vec![vec![false; n]; n];
    for u in 0..n {
        for j in 1..=k / 2 {
            let v = (u + j) % n;
            adj[u][v] = true;
            adj[v][u] = true;
        }
    }
    for j in 1..=k / 2 {
        for u in 0..n {
            let v = (u + j) % n;
            if rng.unit() < p {
                let degree = adj[u].iter().filter(|&&e| e).count();
                if degree >= n - 1 {
                    continue;
                }
                let mut w = rng.below(n);
                while w == u || adj[u][w] {
                    w = rng.below(n);
                }
                adj[u][v] = false;
                adj[v][u] = false;
                adj[u][w] = true;
                adj[w][u] = true;
            }
        }
    }
    let mut edges = Vec::new();
    for (u, row) in adj.iter().enumerate() {
        for (v, &e) in row.iter().enumerate().skip(u + 1) {
            if e {
                edges.push((u, v));
            }
        }
    }
    edges
}

#[allow(clippy::needless_range_loop)] // node ids index the per-node tables
fn stage(net: &mut Net, name: &str, x: Value, channels: u64, seed: u64) -> NetResult<Value> {
    const N: usize = 32;
    let edges = watts_strogatz(N, 4, 0.75, seed);
    let mut preds = vec![Vec::new(); N];
    let mut has_succ = [false; N];
    for &(u, v) in &edges {
        preds[v].push(u);
        has_succ[u] = true;
    }
    let relu_in = net.unary(&format!("{name}.input.relu"), x, UnaryOp::Relu)?;
    let mut outs: Vec<Value> = Vec::with_capacity(N);
    for node in 0..N {
        let n = format!("{name}.node{node}");
        let (h, stride) = if preds[node].is_empty() {
            (relu_in, 2)
        } else {
            let mut acc: Option<Value> = None;
            for (e, &p) in preds[node].iter().enumerate() {
                let term = if preds[node].len() == 1 {
                    outs[p]
                } else {
                    let w = net.weight(&format!("{n}.edge{e}.weight"), &[])?;
                    net.mul(&format!("{n}.edge{e}"), outs[p], w)?
                };
                acc = Some(match acc {
                    None => term,
                    Some(a) => net.add(&format!("{n}.sum{e}"), a, term)?,
                });
            }
            let Some(sum) = acc else {
                return Err(crate::NetError::Invalid(format!("{n}: no inputs")));
            };
            (net.unary(&format!("{n}.relu"), sum, UnaryOp::Relu)?, 1)
        };
        let h = net.conv(
            &format!("{n}.dw"),
            h,
            &Conv::depthwise(3).stride(stride).no_bias(),
        )?;
        let h = net.conv(&format!("{n}.pw"), h, &Conv::new(channels, 1))?;
        outs.push(h);
    }
    let sinks: Vec<Value> = (0..N).filter(|&i| !has_succ[i]).map(|i| outs[i]).collect();
    let Some(&first) = sinks.first() else {
        return Err(crate::NetError::Invalid(format!("{name}: no output node")));
    };
    let mut acc = first;
    for (i, &s) in sinks.iter().enumerate().skip(1) {
        acc = net.add(&format!("{name}.output.sum{i}"), acc, s)?;
    }
    if sinks.len() > 1 {
        let w = net.weight(&format!("{name}.output.scale"), &[])?;
        acc = net.mul(&format!("{name}.output.mean"), acc, w)?;
    }
    Ok(acc)
}

fn build(size: u64) -> NetResult<Module> {
    const C: u64 = 78;
    let mut net = Net::new("randwire_ws");
    let input = net.input("input", &[1, 3, size, size])?;
    let x = net.conv("conv1", input, &Conv::new(C / 2, 3).stride(2).pad(1).relu())?;
    let x = net.conv("conv2", x, &Conv::new(C, 3).stride(2).pad(1))?;
    let x = stage(&mut net, "conv3", x, C, 1)?;
    let x = stage(&mut net, "conv4", x, 2 * C, 2)?;
    let x = stage(&mut net, "conv5", x, 4 * C, 3)?;
    let x = net.unary("head.relu", x, UnaryOp::Relu)?;
    let x = net.conv("head.conv", x, &Conv::new(1280, 1).relu())?;
    let x = net.global_avg_pool("avgpool", x)?;
    let x = net.reshape("flatten", x, &[1, -1])?;
    let x = net.dense("fc", x, 1000, None)?;
    let y = net.softmax("predictions", x, -1)?;
    Ok(net.finish(&[y]))
}
