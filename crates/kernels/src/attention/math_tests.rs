//! The attention kernels against Burn's composition, values and gradients.

use super::*;
use crate::accuracy::test_values;

/// The definition in f64, head by head, element by element: `(out, dq, dk, dv)` for the
/// loss `Σ out · w`.
fn by_definition(q: &[f64], k: &[f64], v: &[f64], w: &[f64], s: &AttentionShape) -> [Vec<f64>; 4] {
    let (nq, nk, d, dv, h) = (s.queries, s.keys, s.head_dim, s.value_dim, s.heads);
    let at = |x: &[f64], b: usize, n: usize, tokens: usize, width: usize, head: usize, c| {
        x[(b * tokens + n) * h * width + head * width + c]
    };
    let mut out = vec![0.0; s.out_len()];
    let (mut dq, mut dk, mut dvv) = (vec![0.0; q.len()], vec![0.0; k.len()], vec![0.0; v.len()]);
    let scale = 1.0 / (d as f64).sqrt();
    for b in 0..s.batch {
        for head in 0..h {
            for i in 0..nq {
                let scores: Vec<f64> = (0..nk)
                    .map(|j| {
                        (0..d)
                            .map(|c| at(q, b, i, nq, d, head, c) * at(k, b, j, nk, d, head, c))
                            .sum::<f64>()
                            * scale
                    })
                    .collect();
                let mut max = f64::NEG_INFINITY;
                for &s in &scores {
                    max = if s > max { s } else { max };
                }
                let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = exps.iter().sum();
                let p: Vec<f64> = exps.iter().map(|e| e / total).collect();
                let o = |c: usize| (b * nq + i) * h * dv + head * dv + c;
                for c in 0..dv {
                    out[o(c)] = (0..nk).map(|j| p[j] * at(v, b, j, nk, dv, head, c)).sum();
                }
                // dL/dp_j = Σ_c w_c v_jc; dL/ds_j = p_j (dp_j − Σ p dp).
                let dp: Vec<f64> = (0..nk)
                    .map(|j| {
                        (0..dv)
                            .map(|c| w[o(c)] * at(v, b, j, nk, dv, head, c))
                            .sum()
                    })
                    .collect();
                let dot: f64 = (0..nk).map(|j| p[j] * dp[j]).sum();
                for j in 0..nk {
                    let ds = p[j] * (dp[j] - dot) * scale;
                    for c in 0..d {
                        dq[(b * nq + i) * h * d + head * d + c] += ds * at(k, b, j, nk, d, head, c);
                        dk[(b * nk + j) * h * d + head * d + c] += ds * at(q, b, i, nq, d, head, c);
                    }
                    for c in 0..dv {
                        dvv[(b * nk + j) * h * dv + head * dv + c] += p[j] * w[o(c)];
                    }
                }
            }
        }
    }
    [out, dq, dk, dvv]
}

fn max_relative_error(got: &[f64], want: &[f64]) -> f64 {
    let scale = want.iter().map(|w| w.abs()).sum::<f64>() / want.len() as f64;
    got.iter()
        .zip(want)
        .map(|(g, w)| {
            let e = (g - w).abs() / (scale + 1e-300);
            // NaN compares false: make it the largest error.
            if e.is_nan() {
                f64::INFINITY
            } else {
                e
            }
        })
        .fold(0.0, |a: f64, e| if e > a { e } else { a })
}

#[test]
fn forward_and_backward_match_the_definition() {
    for shape in [
        AttentionShape {
            batch: 2,
            queries: 5,
            keys: 7,
            heads: 3,
            head_dim: 4,
            value_dim: 2,
        },
        AttentionShape {
            batch: 1,
            queries: 1,
            keys: 1,
            heads: 1,
            head_dim: 1,
            value_dim: 1,
        },
        AttentionShape {
            batch: 3,
            queries: 33,
            keys: 10,
            heads: 8,
            head_dim: 16,
            value_dim: 16,
        },
        // Five tiles of query rows (131 rows against 2000 keys), the last one short.
        AttentionShape {
            batch: 1,
            queries: 600,
            keys: 2000,
            heads: 2,
            head_dim: 8,
            value_dim: 4,
        },
    ] {
        let s = shape;
        let q: Vec<f64> = test_values(s.batch * s.queries * s.heads * s.head_dim, 3)
            .iter()
            .map(|v| 3.0 * v)
            .collect();
        let k: Vec<f64> = test_values(s.batch * s.keys * s.heads * s.head_dim, 5)
            .iter()
            .map(|v| 3.0 * v)
            .collect();
        let v = test_values(s.batch * s.keys * s.heads * s.value_dim, 7);
        let w = test_values(s.out_len(), 11);
        let want = by_definition(&q, &k, &v, &w, &s);
        let rows = |x, width| TokenRows::packed(x, width);
        let (q_rows, k_rows) = (
            rows(&q, s.heads * s.head_dim),
            rows(&k, s.heads * s.head_dim),
        );
        let v_rows = rows(&v, s.heads * s.value_dim);
        let (out, stats) = attention_forward(q_rows, k_rows, v_rows, &s);
        let [dq, dk, dv] = attention_backward(q_rows, k_rows, v_rows, &stats, &w, &s);
        for (what, got, want) in [
            ("out", &out, &want[0]),
            ("dq", &dq, &want[1]),
            ("dk", &dk, &want[2]),
            ("dv", &dv, &want[3]),
        ] {
            let e = max_relative_error(got, want);
            assert!(e <= 1e-13, "{what} {s:?}: {e:e}");
        }
        // Each row's statistics: a finite maximum, and the inverse of a sum that holds at
        // least the maximum's own exp(0) = 1.
        assert_eq!(stats.len(), s.batch * s.heads * s.queries * 2);
        for row in stats.chunks(2) {
            assert!(
                row[0].is_finite() && row[1] > 0.0 && row[1] <= 1.0,
                "{row:?}"
            );
        }
    }
}

/// Values and gradients of the dispatch (our kernels on `Autodiff<Flex>` and on plain
/// `Flex`) against [`attention_by_burn`] on `Autodiff<Flex>`: in f64 to rounding, in f32
/// within 3× the f32 error of Burn's composition (both against the f64 result).
#[test]
fn dispatch_matches_burns_ops_values_and_gradients() {
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::{DType, TensorData};

    use crate::accuracy::assert_as_accurate_as_burn;
    use crate::accuracy::tensor_values;
    use crate::multi_head_attention as dispatched;

    type Ad = Autodiff<Flex>;
    let tensor = |shape: [usize; 3], seed: u64, dtype: DType| {
        let values: Vec<f64> = test_values(shape.iter().product(), seed)
            .iter()
            .map(|v| 2.0 * v)
            .collect();
        Tensor::<Ad, 3>::from_data(TensorData::new(values, shape), &Default::default()).cast(dtype)
    };
    // `(out, dq, dk, dv)` for the loss `Σ out · w`.
    let run = |s: AttentionShape, dtype: DType, own: bool| {
        let q = tensor([s.batch, s.queries, s.heads * s.head_dim], 51, dtype).require_grad();
        let k = tensor([s.batch, s.keys, s.heads * s.head_dim], 53, dtype).require_grad();
        let v = tensor([s.batch, s.keys, s.heads * s.value_dim], 57, dtype).require_grad();
        let w = tensor([s.batch, s.queries, s.heads * s.value_dim], 59, dtype);
        let out = if own {
            dispatched(q.clone(), k.clone(), v.clone(), s.heads)
        } else {
            attention_by_burn(q.clone(), k.clone(), v.clone(), s.heads)
        };
        let grads = (out.clone() * w).sum().backward();
        if own {
            // Inference (plain Flex) gives the same output.
            let plain = dispatched(
                q.clone().inner(),
                k.clone().inner(),
                v.clone().inner(),
                s.heads,
            );
            assert_eq!(tensor_values(plain), tensor_values(out.clone().inner()));
        }
        let grad = |x: &Tensor<Ad, 3>| tensor_values(x.grad(&grads).expect("tracked"));
        [tensor_values(out.inner()), grad(&q), grad(&k), grad(&v)]
    };
    for s in [
        // SAM2's token→image and image→token attentions, and an odd one.
        AttentionShape {
            batch: 2,
            queries: 10,
            keys: 64,
            heads: 8,
            head_dim: 16,
            value_dim: 16,
        },
        AttentionShape {
            batch: 2,
            queries: 64,
            keys: 10,
            heads: 8,
            head_dim: 16,
            value_dim: 16,
        },
        AttentionShape {
            batch: 3,
            queries: 7,
            keys: 5,
            heads: 3,
            head_dim: 5,
            value_dim: 2,
        },
        // Two tiles of query rows (291 rows against 900 keys).
        AttentionShape {
            batch: 1,
            queries: 300,
            keys: 900,
            heads: 2,
            head_dim: 8,
            value_dim: 8,
        },
    ] {
        let exact = run(s, DType::F64, false);
        let ours64 = run(s, DType::F64, true);
        let ours32 = run(s, DType::F32, true);
        let burn32 = run(s, DType::F32, false);
        for i in 0..4 {
            let what = ["out", "dq", "dk", "dv"][i];
            assert_as_accurate_as_burn(
                &format!("{what} {s:?}"),
                [&exact[i], &ours64[i], &ours32[i], &burn32[i]],
            );
        }
    }
}

#[test]
fn shapes_that_do_not_fit_are_refused() {
    let s = AttentionShape {
        batch: 1,
        queries: 2,
        keys: 3,
        heads: 2,
        head_dim: 2,
        value_dim: 1,
    };
    let rows = |x: &'static [f64], width| TokenRows::packed(x, width);
    assert!(s.fits(rows(&[0.0; 8], 4), rows(&[0.0; 12], 4), rows(&[0.0; 6], 2)));
    // Too short for its rows, or rows narrower than the heads' columns.
    assert!(!s.fits(rows(&[0.0; 8], 4), rows(&[0.0; 11], 4), rows(&[0.0; 6], 2)));
    assert!(!s.fits(rows(&[0.0; 8], 4), rows(&[0.0; 12], 4), rows(&[0.0; 6], 1)));
    // Strided rows: 3 rows 5 apart hold 2 · 5 + 4 elements.
    let strided = |x: &'static [f64]| TokenRows { data: x, stride: 5 };
    assert!(s.fits(strided(&[0.0; 9]), strided(&[0.0; 14]), rows(&[0.0; 6], 2)));
    assert!(!s.fits(strided(&[0.0; 9]), strided(&[0.0; 13]), rows(&[0.0; 6], 2)));
    let empty = AttentionShape { keys: 0, ..s };
    assert!(!empty.fits(rows(&[0.0; 8], 4), rows(&[], 4), rows(&[], 2)));
}

/// q, k and v read in place as column ranges of one `[B, N, 3W]` tensor (Hiera's qkv rows)
/// give the same bits, values and gradients, as row-major copies of them.
#[test]
fn column_ranges_are_read_in_place_with_the_same_bits() {
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::TensorData;

    use crate::accuracy::tensor_values;
    use crate::multi_head_attention as dispatched;

    type Ad = Autodiff<Flex>;
    let [batch, tokens, width, heads] = [2, 300, 24, 3];
    let values: Vec<f32> = test_values(batch * tokens * 3 * width, 61)
        .iter()
        .map(|v| (2.0 * v) as f32)
        .collect();
    let weights = Tensor::<Ad, 3>::from_data(
        TensorData::new(
            test_values(batch * tokens * width, 67),
            [batch, tokens, width],
        ),
        &Default::default(),
    )
    .cast(burn::tensor::DType::F32);
    let qkv = Tensor::<Ad, 3>::from_data(
        TensorData::new(values, [batch, tokens, 3 * width]),
        &Default::default(),
    )
    .require_grad();
    let part = |x: &Tensor<Ad, 3>, i: usize| x.clone().narrow(2, i * width, width);
    let out = dispatched(part(&qkv, 0), part(&qkv, 1), part(&qkv, 2), heads);
    let grads = (out.clone() * weights.clone()).sum().backward();
    let in_place = [
        tensor_values(out.inner()),
        tensor_values(qkv.grad(&grads).expect("tracked")),
    ];

    // The same thirds as separate row-major tensors.
    let copy = |i: usize| {
        Tensor::<Ad, 3>::from_data(part(&qkv, i).inner().into_data(), &Default::default())
            .require_grad()
    };
    let [q, k, v] = [0, 1, 2].map(copy);
    let out = dispatched(q.clone(), k.clone(), v.clone(), heads);
    let grads = (out.clone() * weights).sum().backward();
    let grad = |x: &Tensor<Ad, 3>| x.grad(&grads).expect("tracked");
    let joined = Tensor::cat(vec![grad(&q), grad(&k), grad(&v)], 2);
    let copied = [tensor_values(out.inner()), tensor_values(joined)];
    assert_eq!(in_place[0].len(), batch * tokens * width);
    assert_eq!(in_place, copied);
}
