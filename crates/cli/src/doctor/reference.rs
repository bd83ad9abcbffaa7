//! Plain-Rust CPU references for the kernel sanity check: loops that anyone can read and that
//! share no code with any Burn backend, so a wrong kernel cannot agree with them by accident.
//! Layouts are row-major and contiguous, as `TensorData` stores them.

/// `len` deterministic values in `[-1, 1)` (xorshift64*), identical on every machine.
pub fn pseudo_random(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let bits = state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
            (bits as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The largest absolute element-wise difference (infinite when a value is NaN or the lengths
/// differ, so that a broken kernel can never pass).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    a.iter().zip(b).fold(0.0f32, |worst, (x, y)| {
        let d = (x - y).abs();
        if d.is_nan() {
            f32::INFINITY
        } else {
            worst.max(d)
        }
    })
}

/// The largest absolute value (the scale the error is judged against).
pub fn max_abs(a: &[f32]) -> f32 {
    a.iter().fold(0.0f32, |m, x| m.max(x.abs()))
}

/// Batched matrix product `[batch, m, k] × [batch, k, n] -> [batch, m, n]`, accumulated in f64.
pub fn matmul(a: &[f32], b: &[f32], [batch, m, k, n]: [usize; 4]) -> Vec<f32> {
    let mut out = vec![0.0f32; batch * m * n];
    for p in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let mut sum = 0.0f64;
                for l in 0..k {
                    sum += a[(p * m + i) * k + l] as f64 * b[(p * k + l) * n + j] as f64;
                }
                out[(p * m + i) * n + j] = sum as f32;
            }
        }
    }
    out
}

/// The shape of a 2-D convolution (square stride and padding, dilation 1, one group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv2dShape {
    pub batch: usize,
    pub channels_in: usize,
    pub height: usize,
    pub width: usize,
    pub channels_out: usize,
    pub kernel: usize,
    pub stride: usize,
    pub padding: usize,
}

impl Conv2dShape {
    /// `[height, width]` of the output.
    pub fn output_hw(&self) -> [usize; 2] {
        let out = |size: usize| (size + 2 * self.padding - self.kernel) / self.stride + 1;
        [out(self.height), out(self.width)]
    }

    pub fn input_len(&self) -> usize {
        self.batch * self.channels_in * self.height * self.width
    }

    pub fn weight_len(&self) -> usize {
        self.channels_out * self.channels_in * self.kernel * self.kernel
    }

    pub fn output_len(&self) -> usize {
        let [oh, ow] = self.output_hw();
        self.batch * self.channels_out * oh * ow
    }

    /// Calls `f(output index, input index, weight index)` for every multiply of the convolution
    /// (padding taps skipped): forward and backward share this one walk.
    fn for_each_tap(&self, mut f: impl FnMut(usize, usize, usize)) {
        let [oh, ow] = self.output_hw();
        let (k, s, p) = (self.kernel, self.stride, self.padding);
        for b in 0..self.batch {
            for co in 0..self.channels_out {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let out = ((b * self.channels_out + co) * oh + oy) * ow + ox;
                        for ci in 0..self.channels_in {
                            for ky in 0..k {
                                let Some(iy) = (oy * s + ky).checked_sub(p) else {
                                    continue;
                                };
                                if iy >= self.height {
                                    continue;
                                }
                                for kx in 0..k {
                                    let Some(ix) = (ox * s + kx).checked_sub(p) else {
                                        continue;
                                    };
                                    if ix >= self.width {
                                        continue;
                                    }
                                    let input = ((b * self.channels_in + ci) * self.height + iy)
                                        * self.width
                                        + ix;
                                    let weight = ((co * self.channels_in + ci) * k + ky) * k + kx;
                                    f(out, input, weight);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Cross-correlation as PyTorch's `conv2d`: `x [N, Cin, H, W]`, `w [Cout, Cin, k, k]`,
/// `bias [Cout]`.
pub fn conv2d(x: &[f32], w: &[f32], bias: &[f32], shape: &Conv2dShape) -> Vec<f32> {
    let [oh, ow] = shape.output_hw();
    let mut sums = vec![0.0f64; shape.output_len()];
    shape.for_each_tap(|o, i, k| sums[o] += x[i] as f64 * w[k] as f64);
    sums.iter()
        .enumerate()
        .map(|(o, s)| (s + bias[(o / (oh * ow)) % shape.channels_out] as f64) as f32)
        .collect()
}

/// Gradients of `sum(conv2d(x, w, bias) * grad_out)` with respect to `x`, `w` and `bias`.
pub fn conv2d_backward(
    x: &[f32],
    w: &[f32],
    grad_out: &[f32],
    shape: &Conv2dShape,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let [oh, ow] = shape.output_hw();
    let mut grad_x = vec![0.0f64; shape.input_len()];
    let mut grad_w = vec![0.0f64; shape.weight_len()];
    shape.for_each_tap(|o, i, k| {
        grad_x[i] += grad_out[o] as f64 * w[k] as f64;
        grad_w[k] += grad_out[o] as f64 * x[i] as f64;
    });
    let mut grad_bias = vec![0.0f64; shape.channels_out];
    for (o, g) in grad_out.iter().enumerate() {
        grad_bias[(o / (oh * ow)) % shape.channels_out] += *g as f64;
    }
    let to_f32 = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect();
    (to_f32(grad_x), to_f32(grad_w), to_f32(grad_bias))
}

/// One axis of PyTorch's bilinear resize with `align_corners = false` (half-pixel centres,
/// source index clamped at 0): for each output position, the two source indices and weights.
fn bilinear_axis(input: usize, output: usize) -> Vec<(usize, usize, f64, f64)> {
    let scale = input as f64 / output as f64;
    (0..output)
        .map(|d| {
            let source = ((d as f64 + 0.5) * scale - 0.5).max(0.0);
            let low = (source.floor() as usize).min(input - 1);
            let high = (low + 1).min(input - 1);
            let frac = source - low as f64;
            (low, high, 1.0 - frac, frac)
        })
        .collect()
}

/// Bilinear resize of `planes` planes `[h, w] -> [oh, ow]` (`align_corners = false`).
pub fn bilinear(x: &[f32], planes: usize, [h, w]: [usize; 2], [oh, ow]: [usize; 2]) -> Vec<f32> {
    let (rows, cols) = (bilinear_axis(h, oh), bilinear_axis(w, ow));
    let mut out = Vec::with_capacity(planes * oh * ow);
    for p in 0..planes {
        let plane = &x[p * h * w..(p + 1) * h * w];
        for &(y0, y1, wy0, wy1) in &rows {
            for &(x0, x1, wx0, wx1) in &cols {
                let at = |y: usize, x: usize| plane[y * w + x] as f64;
                let v = wy0 * (wx0 * at(y0, x0) + wx1 * at(y0, x1))
                    + wy1 * (wx0 * at(y1, x0) + wx1 * at(y1, x1));
                out.push(v as f32);
            }
        }
    }
    out
}

/// Gradient of `sum(bilinear(x) * grad_out)` with respect to `x` (the adjoint of [`bilinear`]).
pub fn bilinear_backward(
    grad_out: &[f32],
    planes: usize,
    [h, w]: [usize; 2],
    [oh, ow]: [usize; 2],
) -> Vec<f32> {
    let (rows, cols) = (bilinear_axis(h, oh), bilinear_axis(w, ow));
    let mut grad = vec![0.0f64; planes * h * w];
    for p in 0..planes {
        for (oy, &(y0, y1, wy0, wy1)) in rows.iter().enumerate() {
            for (ox, &(x0, x1, wx0, wx1)) in cols.iter().enumerate() {
                let g = grad_out[(p * oh + oy) * ow + ox] as f64;
                let base = p * h * w;
                grad[base + y0 * w + x0] += g * wy0 * wx0;
                grad[base + y0 * w + x1] += g * wy0 * wx1;
                grad[base + y1 * w + x0] += g * wy1 * wx0;
                grad[base + y1 * w + x1] += g * wy1 * wx1;
            }
        }
    }
    grad.into_iter().map(|v| v as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pseudo_random_is_deterministic_and_in_range() {
        let a = pseudo_random(1000, 7);
        assert_eq!(a, pseudo_random(1000, 7));
        assert_ne!(a, pseudo_random(1000, 8));
        assert!(a.iter().all(|v| (-1.0..1.0).contains(v)));
        assert!(max_abs(&a) > 0.9);
    }

    #[test]
    fn matmul_of_small_matrices() {
        // [[1, 2], [3, 4]] × [[5, 6], [7, 8]] = [[19, 22], [43, 50]]
        let out = matmul(&[1., 2., 3., 4.], &[5., 6., 7., 8.], [1, 2, 2, 2]);
        assert_eq!(out, vec![19., 22., 43., 50.]);
    }

    #[test]
    fn conv2d_identity_kernel_with_padding_copies_the_input() {
        let shape = Conv2dShape {
            batch: 1,
            channels_in: 1,
            height: 3,
            width: 4,
            channels_out: 1,
            kernel: 3,
            stride: 1,
            padding: 1,
        };
        let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let mut w = vec![0.0; 9];
        w[4] = 1.0;
        assert_eq!(
            conv2d(&x, &w, &[0.5], &shape),
            x.iter().map(|v| v + 0.5).collect::<Vec<_>>()
        );
        assert_eq!(shape.output_hw(), [3, 4]);
    }

    #[test]
    fn conv2d_backward_matches_finite_differences() {
        let shape = Conv2dShape {
            batch: 2,
            channels_in: 2,
            height: 5,
            width: 6,
            channels_out: 3,
            kernel: 3,
            stride: 2,
            padding: 1,
        };
        let x = pseudo_random(shape.input_len(), 1);
        let w = pseudo_random(shape.weight_len(), 2);
        let b = pseudo_random(3, 3);
        let g = pseudo_random(shape.output_len(), 4);
        let objective = |x: &[f32], w: &[f32]| -> f64 {
            conv2d(x, w, &b, &shape)
                .iter()
                .zip(&g)
                .map(|(y, g)| (*y * *g) as f64)
                .sum()
        };
        let (grad_x, grad_w, _) = conv2d_backward(&x, &w, &g, &shape);
        let eps = 1e-2;
        for i in [0, 7, 31, shape.input_len() - 1] {
            let (mut up, mut down) = (x.clone(), x.clone());
            up[i] += eps;
            down[i] -= eps;
            let numeric = (objective(&up, &w) - objective(&down, &w)) / (2.0 * eps as f64);
            assert!((numeric - grad_x[i] as f64).abs() < 1e-3, "x[{i}]");
        }
        for k in [0, 10, shape.weight_len() - 1] {
            let (mut up, mut down) = (w.clone(), w.clone());
            up[k] += eps;
            down[k] -= eps;
            let numeric = (objective(&x, &up) - objective(&x, &down)) / (2.0 * eps as f64);
            assert!((numeric - grad_w[k] as f64).abs() < 1e-3, "w[{k}]");
        }
    }

    #[test]
    fn bilinear_matches_pytorch_align_corners_false() {
        // torch: F.interpolate([[1, 2], [3, 4]], size=(4, 4), mode="bilinear",
        // align_corners=False)[0, 0, 0] == [1.0, 1.25, 1.75, 2.0]
        let out = bilinear(&[1., 2., 3., 4.], 1, [2, 2], [4, 4]);
        assert_eq!(&out[..4], &[1.0, 1.25, 1.75, 2.0]);
        // The adjoint: <bilinear(x), g> == <x, bilinear_backward(g)>.
        let x = pseudo_random(2 * 5 * 7, 5);
        let g = pseudo_random(2 * 3 * 4, 6);
        let forward: f64 = bilinear(&x, 2, [5, 7], [3, 4])
            .iter()
            .zip(&g)
            .map(|(a, b)| (a * b) as f64)
            .sum();
        let adjoint: f64 = bilinear_backward(&g, 2, [5, 7], [3, 4])
            .iter()
            .zip(&x)
            .map(|(a, b)| (a * b) as f64)
            .sum();
        assert!((forward - adjoint).abs() < 1e-5);
    }

    #[test]
    fn max_abs_diff_flags_nan_and_length_mismatch() {
        assert_eq!(max_abs_diff(&[1.0, 2.0], &[1.5, 2.0]), 0.5);
        assert_eq!(max_abs_diff(&[f32::NAN], &[0.0]), f32::INFINITY);
        assert_eq!(max_abs_diff(&[1.0], &[1.0, 2.0]), f32::INFINITY);
    }
}
