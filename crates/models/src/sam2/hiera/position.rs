//! Hiera's position embedding, added once after the patch embedding:
//!
//! ```text
//! pos = bicubic(pos_embed [1, C, bh, bw] → [h, w]) + tile(pos_embed_window [1, C, ws, ws])
//! ```
//!
//! The bicubic resize is PyTorch's `F.interpolate(mode="bicubic", align_corners=False)`: the
//! cubic convolution kernel with A = −0.75, source coordinate `(i + 0.5)·in/out − 0.5` and the
//! four taps clamped to the border. It is linear in `pos_embed`, so it is applied here as two
//! small interpolation matrices (`out = Mh · P · Mwᵀ`), which also gives its gradient for free.

use burn::tensor::{backend::Backend, Tensor, TensorData};

/// PyTorch's bicubic coefficient A.
const CUBIC_A: f64 = -0.75;

/// The cubic convolution weights of the four taps at fractional offset `t`.
fn cubic_weights(t: f64) -> [f64; 4] {
    let near = |x: f64| ((CUBIC_A + 2.0) * x - (CUBIC_A + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((CUBIC_A * x - 5.0 * CUBIC_A) * x + 8.0 * CUBIC_A) * x - 4.0 * CUBIC_A;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// Row-major `[output, input]` matrix of the 1-D bicubic resize `input → output`.
pub fn bicubic_matrix(input: usize, output: usize) -> Vec<f64> {
    let mut matrix = vec![0.0; output * input];
    let scale = input as f64 / output as f64;
    let last = input as i64 - 1;
    for i in 0..output {
        let source = (i as f64 + 0.5) * scale - 0.5;
        let floor = source.floor();
        let weights = cubic_weights(source - floor);
        for (tap, weight) in weights.iter().enumerate() {
            let j = (floor as i64 - 1 + tap as i64).clamp(0, last) as usize;
            matrix[i * input + j] += weight;
        }
    }
    matrix
}

/// A host matrix as a tensor of `like`'s dtype on its device.
fn matrix_tensor<B: Backend>(
    values: Vec<f64>,
    shape: [usize; 2],
    like: &Tensor<B, 4>,
) -> Tensor<B, 2> {
    Tensor::from_data(
        TensorData::new(values, shape),
        (&like.device(), like.dtype()),
    )
}

/// `pos_embed [1, C, bh, bw]` resized bicubically to `[1, C, h, w]`.
pub fn resize_bicubic<B: Backend>(pos_embed: Tensor<B, 4>, [h, w]: [usize; 2]) -> Tensor<B, 4> {
    let [_, c, bh, bw] = pos_embed.dims();
    let rows = matrix_tensor(bicubic_matrix(bh, h), [h, bh], &pos_embed);
    let cols = matrix_tensor(bicubic_matrix(bw, w), [w, bw], &pos_embed);
    // [C·bh, bw] · [bw, w] → [C, bh, w]; then [C, h, bh] · [C, bh, w] → [C, h, w].
    let along_w = pos_embed
        .reshape([c * bh, bw])
        .matmul(cols.transpose())
        .reshape([c, bh, w]);
    let rows = rows.unsqueeze::<3>().expand([c, h, bh]);
    rows.matmul(along_w).reshape([1, c, h, w])
}

/// `window [1, C, ws, ws]` tiled over `[1, C, h, w]` (`h`, `w` multiples of `ws`).
pub fn tile_window<B: Backend>(window: Tensor<B, 4>, [h, w]: [usize; 2]) -> Tensor<B, 4> {
    let [_, c, ws, _] = window.dims();
    window
        .reshape([c, 1, ws, 1, ws])
        .expand([c, h / ws, ws, w / ws, ws])
        .reshape([1, c, h, w])
}

/// Hiera's whole position embedding for an `h × w` token map, channel-last: `[1, h, w, C]`.
pub fn position_embedding<B: Backend>(
    pos_embed: Tensor<B, 4>,
    pos_embed_window: Tensor<B, 4>,
    size: [usize; 2],
) -> Tensor<B, 4> {
    (resize_bicubic(pos_embed, size) + tile_window(pos_embed_window, size)).permute([0, 2, 3, 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bicubic_rows_sum_to_one_and_identity_at_equal_size() {
        for (input, output) in [(7, 64), (14, 256), (7, 24), (5, 3)] {
            let m = bicubic_matrix(input, output);
            for row in m.chunks(input) {
                assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            }
        }
        let m = bicubic_matrix(4, 4);
        for i in 0..4 {
            for j in 0..4 {
                let expected = if i == j { 1.0 } else { 0.0 };
                assert!(
                    (m[i * 4 + j] - expected).abs() < 1e-12,
                    "{i},{j}: {}",
                    m[i * 4 + j]
                );
            }
        }
    }
}
