//! The gradients of a 2-D convolution on plain row-major slices, each as one matrix product
//! per image and group over the im2col unfolding of the input (`cols`: one row per weight
//! element, one column per output position): weight gradient `dW_g += dY_{n,g} · cols_{n,g}ᵀ`,
//! input gradient `dcols = W_gᵀ · dY_{n,g}` folded back onto the input (col2im).
//!
//! Why our own: Burn 0.21's default weight gradient (which Flex uses) is a convolution over the
//! batch with the output gradient as the kernel, adding the output positions one after the
//! other; on PIDNet-S's 64×64 boundary head that made the f32 weight gradients 4–5× less
//! accurate than PyTorch's (issue 18), and it is 2–7× slower. The `gemm` crate's product sums
//! in register blocks, as a BLAS does, and runs on the compute pool.

/// The shapes of one convolution (NCHW input, OIHW weight).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvGeometry {
    pub batch: usize,
    pub in_channels: usize,
    pub in_size: [usize; 2],
    pub out_channels: usize,
    pub kernel: [usize; 2],
    pub out_size: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
}

impl ConvGeometry {
    /// Input channels per group.
    fn group_in(&self) -> usize {
        self.in_channels / self.groups
    }

    /// Output channels per group.
    fn group_out(&self) -> usize {
        self.out_channels / self.groups
    }

    /// Weight elements per output channel: one row of `cols`.
    fn patch(&self) -> usize {
        self.group_in() * self.kernel[0] * self.kernel[1]
    }

    fn out_positions(&self) -> usize {
        self.out_size[0] * self.out_size[1]
    }

    fn in_positions(&self) -> usize {
        self.in_size[0] * self.in_size[1]
    }

    /// A 1×1 kernel with stride 1 and no padding reads the input as it is: `cols` is the input.
    pub fn is_pointwise(&self) -> bool {
        self.kernel == [1, 1] && self.stride == [1, 1] && self.padding == [0, 0]
    }

    /// The output size the other fields imply (PyTorch's formula).
    pub fn expected_out_size(&self) -> [usize; 2] {
        let axis = |i: usize| {
            let reach = self.dilation[i] * (self.kernel[i] - 1) + 1;
            (self.in_size[i] + 2 * self.padding[i]).saturating_sub(reach) / self.stride[i] + 1
        };
        [axis(0), axis(1)]
    }
}

/// The float types the product runs in.
pub trait GemmFloat: Copy + Default + Send + Sync + 'static {
    const ONE: Self;
}

impl GemmFloat for f32 {
    const ONE: Self = 1.0;
}

impl GemmFloat for f64 {
    const ONE: Self = 1.0;
}

/// `dL/dW` (`[out_channels, in_channels / groups, kh, kw]`, row-major) from the input `x`
/// (`[N, C, H, W]`) and the output gradient (`[N, O, OH, OW]`).
///
/// # Panics
/// If the slice lengths do not match `geometry` (a caller bug: both come from tensor shapes).
pub fn conv2d_weight_grad<T: GemmFloat>(
    x: &[T],
    output_grad: &[T],
    geometry: &ConvGeometry,
) -> Vec<T> {
    let g = geometry;
    check(g, x);
    assert_eq!(
        output_grad.len(),
        g.batch * g.out_channels * g.out_positions()
    );
    let (patch, positions) = (g.patch(), g.out_positions());
    let mut weight_grad = vec![T::default(); g.out_channels * patch];
    let mut cols = if g.is_pointwise() {
        Vec::new()
    } else {
        vec![T::default(); patch * positions]
    };
    for n in 0..g.batch {
        for group in 0..g.groups {
            let unfolded = group_columns(x, g, n, group, &mut cols);
            let out_channels = n * g.out_channels + group * g.group_out();
            let grad = &output_grad[out_channels * positions..][..g.group_out() * positions];
            let dst = &mut weight_grad[group * g.group_out() * patch..][..g.group_out() * patch];
            // dW (O×K) += dY (O×P) · colsᵀ, colsᵀ read from row-major cols (K×P).
            let operands = Product {
                shape: [g.group_out(), patch, positions],
                lhs: (grad, [positions, 1]),
                rhs: (unfolded, [1, positions]),
            };
            operands.into(dst, n > 0);
        }
    }
    weight_grad
}

/// im2col of one group of one image: row `(c, ki, kj)` of `cols` holds, for every output
/// position, the input value the weight element `(c, ki, kj)` multiplies there (0 in padding).
fn unfold<T: GemmFloat>(input: &[T], g: &ConvGeometry, cols: &mut [T]) {
    let [in_h, in_w] = g.in_size;
    let [out_h, out_w] = g.out_size;
    let [kh, kw] = g.kernel;
    // Input coordinate of output coordinate `o` for kernel offset `k` along `axis`, if inside.
    let source = |axis: usize, o: usize, k: usize, len: usize| {
        (o * g.stride[axis] + k * g.dilation[axis])
            .checked_sub(g.padding[axis])
            .filter(|&i| i < len)
    };
    for c in 0..g.group_in() {
        let plane = &input[c * in_h * in_w..][..in_h * in_w];
        for ki in 0..kh {
            for kj in 0..kw {
                let row = (c * kh + ki) * kw + kj;
                let out = &mut cols[row * out_h * out_w..][..out_h * out_w];
                for (oy, out_row) in out.chunks_exact_mut(out_w).enumerate() {
                    let Some(iy) = source(0, oy, ki, in_h) else {
                        out_row.fill(T::default());
                        continue;
                    };
                    let in_row = &plane[iy * in_w..][..in_w];
                    for (ox, value) in out_row.iter_mut().enumerate() {
                        *value = source(1, ox, kj, in_w).map_or(T::default(), |ix| in_row[ix]);
                    }
                }
            }
        }
    }
}

/// `Y (N×O×P) = W (O×K) · cols (K×P)` per image and group: the convolution without bias.
///
/// # Panics
/// If the slice lengths do not match `geometry` (a caller bug: both come from tensor shapes).
pub fn conv2d_forward<T: GemmFloat>(x: &[T], weight: &[T], geometry: &ConvGeometry) -> Vec<T> {
    let g = geometry;
    check(g, x);
    assert_eq!(weight.len(), g.out_channels * g.patch());
    let (patch, positions) = (g.patch(), g.out_positions());
    let mut out = vec![T::default(); g.batch * g.out_channels * positions];
    let mut cols = if g.is_pointwise() {
        Vec::new()
    } else {
        vec![T::default(); patch * positions]
    };
    for n in 0..g.batch {
        for group in 0..g.groups {
            let unfolded = group_columns(x, g, n, group, &mut cols);
            let out_channels = n * g.out_channels + group * g.group_out();
            let dst = &mut out[out_channels * positions..][..g.group_out() * positions];
            let w = &weight[group * g.group_out() * patch..][..g.group_out() * patch];
            let operands = Product {
                shape: [g.group_out(), positions, patch],
                lhs: (w, [patch, 1]),
                rhs: (unfolded, [positions, 1]),
            };
            operands.into(dst, false);
        }
    }
    out
}

/// `dL/dx` (`[N, C, H, W]`) from the weight and the output gradient: per image and group,
/// `dcols = W_gᵀ · dY_{n,g}`, then every column value is added back to the input pixel it was
/// unfolded from (col2im).
///
/// # Panics
/// If the slice lengths do not match `geometry` (a caller bug: both come from tensor shapes).
pub fn conv2d_input_grad<T: GemmFloat + std::ops::AddAssign>(
    weight: &[T],
    output_grad: &[T],
    geometry: &ConvGeometry,
) -> Vec<T> {
    let g = geometry;
    let (patch, positions) = (g.patch(), g.out_positions());
    assert_eq!(weight.len(), g.out_channels * patch);
    assert_eq!(output_grad.len(), g.batch * g.out_channels * positions);
    let mut grad = vec![T::default(); g.batch * g.in_channels * g.in_positions()];
    let mut cols = vec![T::default(); patch * positions];
    for n in 0..g.batch {
        for group in 0..g.groups {
            let out_channels = n * g.out_channels + group * g.group_out();
            let dy = &output_grad[out_channels * positions..][..g.group_out() * positions];
            let w = &weight[group * g.group_out() * patch..][..g.group_out() * patch];
            let channels = n * g.in_channels + group * g.group_in();
            let dx = &mut grad[channels * g.in_positions()..][..g.group_in() * g.in_positions()];
            // dcols (K×P) = Wᵀ (K×O) · dY (O×P), Wᵀ read from row-major W (O×K).
            let operands = Product {
                shape: [patch, positions, g.group_out()],
                lhs: (w, [1, patch]),
                rhs: (dy, [positions, 1]),
            };
            if g.is_pointwise() {
                operands.into(dx, false);
            } else {
                operands.into(&mut cols, false);
                fold(&cols, g, dx);
            }
        }
    }
    grad
}

/// col2im, the adjoint of [`unfold`]: adds each value of `cols` to the input pixel of one group
/// of one image it was read from.
fn fold<T: GemmFloat + std::ops::AddAssign>(cols: &[T], g: &ConvGeometry, input_grad: &mut [T]) {
    let [in_h, in_w] = g.in_size;
    let [out_h, out_w] = g.out_size;
    let [kh, kw] = g.kernel;
    let source = |axis: usize, o: usize, k: usize, len: usize| {
        (o * g.stride[axis] + k * g.dilation[axis])
            .checked_sub(g.padding[axis])
            .filter(|&i| i < len)
    };
    for c in 0..g.group_in() {
        let plane = &mut input_grad[c * in_h * in_w..][..in_h * in_w];
        for ki in 0..kh {
            for kj in 0..kw {
                let row = (c * kh + ki) * kw + kj;
                let values = &cols[row * out_h * out_w..][..out_h * out_w];
                for (oy, value_row) in values.chunks_exact(out_w).enumerate() {
                    let Some(iy) = source(0, oy, ki, in_h) else {
                        continue;
                    };
                    let in_row = &mut plane[iy * in_w..][..in_w];
                    for (ox, value) in value_row.iter().enumerate() {
                        if let Some(ix) = source(1, ox, kj, in_w) {
                            in_row[ix] += *value;
                        }
                    }
                }
            }
        }
    }
}

/// The check every kernel makes before reading `x`.
fn check(g: &ConvGeometry, x: &[impl Copy]) {
    assert!(g.groups > 0 && g.in_channels % g.groups == 0 && g.out_channels % g.groups == 0);
    assert_eq!(g.out_size, g.expected_out_size(), "output size of {g:?}");
    assert_eq!(x.len(), g.batch * g.in_channels * g.in_positions());
}

/// `cols` of image `n`, group `group`: the input itself for a pointwise convolution, else its
/// unfolding into `cols`.
fn group_columns<'a, T: GemmFloat>(
    x: &'a [T],
    g: &ConvGeometry,
    n: usize,
    group: usize,
    cols: &'a mut [T],
) -> &'a [T] {
    let channels = n * g.in_channels + group * g.group_in();
    let input = &x[channels * g.in_positions()..][..g.group_in() * g.in_positions()];
    if g.is_pointwise() {
        input
    } else {
        unfold(input, g, cols);
        cols
    }
}

/// One matrix product `dst (m×n) [+]= lhs (m×k) · rhs (k×n)`, each operand with its (row,
/// column) strides in elements.
struct Product<'a, T> {
    /// `[m, n, k]`.
    shape: [usize; 3],
    lhs: (&'a [T], [usize; 2]),
    rhs: (&'a [T], [usize; 2]),
}

impl<T: GemmFloat> Product<'_, T> {
    /// Writes (or with `accumulate`, adds) the product into row-major `dst`.
    fn into(self, dst: &mut [T], accumulate: bool) {
        let [m, n, k] = self.shape;
        let (lhs, [lhs_rs, lhs_cs]) = self.lhs;
        let (rhs, [rhs_rs, rhs_cs]) = self.rhs;
        let last = |rows: usize, cols: usize, [rs, cs]: [usize; 2]| {
            (rows.max(1) - 1) * rs + (cols.max(1) - 1) * cs + 1
        };
        assert_eq!(dst.len(), m * n);
        assert!(lhs.len() >= last(m, k, [lhs_rs, lhs_cs]));
        assert!(rhs.len() >= last(k, n, [rhs_rs, rhs_cs]));
        let s = |stride: usize| stride as isize;
        // SAFETY: every element the strides address lies inside its slice (asserted above);
        // `dst` is exclusively borrowed, so it does not overlap the inputs.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                dst.as_mut_ptr(),
                1,
                s(n),
                accumulate,
                lhs.as_ptr(),
                s(lhs_cs),
                s(lhs_rs),
                rhs.as_ptr(),
                s(rhs_cs),
                s(rhs_rs),
                T::ONE,
                T::ONE,
                false,
                false,
                false,
                gemm::Parallelism::Rayon(0),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, summed in f64: `dW[o, c, ki, kj] = Σ dY[n, o, y, x] · X[n, c', iy, ix]`.
    fn by_definition(x: &[f64], dy: &[f64], g: &ConvGeometry) -> Vec<f64> {
        let (gi, go) = (g.group_in(), g.group_out());
        let [kh, kw] = g.kernel;
        let mut dw = vec![0.0; g.out_channels * gi * kh * kw];
        for n in 0..g.batch {
            for o in 0..g.out_channels {
                let group = o / go;
                for c in 0..gi {
                    for ki in 0..kh {
                        for kj in 0..kw {
                            let mut sum = 0.0;
                            for oy in 0..g.out_size[0] {
                                for ox in 0..g.out_size[1] {
                                    let iy = (oy * g.stride[0] + ki * g.dilation[0]) as isize
                                        - g.padding[0] as isize;
                                    let ix = (ox * g.stride[1] + kj * g.dilation[1]) as isize
                                        - g.padding[1] as isize;
                                    if iy < 0
                                        || ix < 0
                                        || iy as usize >= g.in_size[0]
                                        || ix as usize >= g.in_size[1]
                                    {
                                        continue;
                                    }
                                    let xc = n * g.in_channels + group * gi + c;
                                    let xv = x[(xc * g.in_size[0] + iy as usize) * g.in_size[1]
                                        + ix as usize];
                                    let dv = dy[((n * g.out_channels + o) * g.out_size[0] + oy)
                                        * g.out_size[1]
                                        + ox];
                                    sum += xv * dv;
                                }
                            }
                            dw[((o * gi + c) * kh + ki) * kw + kj] += sum;
                        }
                    }
                }
            }
        }
        dw
    }

    /// `Y[n, o, y, x] = Σ W[o, c, ki, kj] · X[n, c', iy, ix]`, in f64.
    fn forward_by_definition(x: &[f64], w: &[f64], g: &ConvGeometry) -> Vec<f64> {
        let (gi, go) = (g.group_in(), g.group_out());
        let [kh, kw] = g.kernel;
        let [oh, ow] = g.out_size;
        let mut y = vec![0.0; g.batch * g.out_channels * oh * ow];
        for n in 0..g.batch {
            for o in 0..g.out_channels {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut sum = 0.0;
                        for c in 0..gi {
                            for ki in 0..kh {
                                for kj in 0..kw {
                                    let iy = (oy * g.stride[0] + ki * g.dilation[0]) as isize
                                        - g.padding[0] as isize;
                                    let ix = (ox * g.stride[1] + kj * g.dilation[1]) as isize
                                        - g.padding[1] as isize;
                                    if iy < 0
                                        || ix < 0
                                        || iy as usize >= g.in_size[0]
                                        || ix as usize >= g.in_size[1]
                                    {
                                        continue;
                                    }
                                    let xc = n * g.in_channels + (o / go) * gi + c;
                                    sum += w[((o * gi + c) * kh + ki) * kw + kj]
                                        * x[(xc * g.in_size[0] + iy as usize) * g.in_size[1]
                                            + ix as usize];
                                }
                            }
                        }
                        y[((n * g.out_channels + o) * oh + oy) * ow + ox] = sum;
                    }
                }
            }
        }
        y
    }

    /// `dX[n, c', iy, ix] = Σ W[o, c, ki, kj] · dY[n, o, y, x]` over the taps that read it.
    fn input_grad_by_definition(w: &[f64], dy: &[f64], g: &ConvGeometry) -> Vec<f64> {
        let len = g.batch * g.in_channels * g.in_positions();
        // The forward is linear in x: dX[i] = <Y(e_i), dy>.
        (0..len)
            .map(|i| {
                let mut unit = vec![0.0; len];
                unit[i] = 1.0;
                forward_by_definition(&unit, w, g)
                    .iter()
                    .zip(dy)
                    .map(|(a, b)| a * b)
                    .sum()
            })
            .collect()
    }

    fn values(len: usize, seed: u64) -> Vec<f64> {
        // A fixed pseudo-random sequence in [-1, 1).
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
            })
            .collect()
    }

    fn geometry(
        [batch, in_channels, out_channels, groups]: [usize; 4],
        in_size: [usize; 2],
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
    ) -> ConvGeometry {
        let mut g = ConvGeometry {
            batch,
            in_channels,
            in_size,
            out_channels,
            kernel,
            out_size: [0, 0],
            stride,
            padding,
            dilation,
            groups,
        };
        g.out_size = g.expected_out_size();
        g
    }

    #[test]
    fn matches_the_definition_on_odd_shapes() {
        let cases = [
            // Pointwise (no unfolding), 3×3 with padding, stride 2 on odd sizes, groups,
            // dilation, a rectangular kernel, and padding wider than the kernel reach.
            geometry([2, 5, 3, 1], [7, 9], [1, 1], [1, 1], [0, 0], [1, 1]),
            geometry([2, 4, 6, 1], [9, 7], [3, 3], [1, 1], [1, 1], [1, 1]),
            geometry([3, 3, 4, 1], [11, 8], [3, 3], [2, 2], [1, 1], [1, 1]),
            geometry([1, 6, 9, 3], [8, 8], [3, 3], [1, 1], [1, 1], [1, 1]),
            geometry([2, 2, 2, 1], [10, 9], [3, 3], [1, 1], [2, 2], [2, 2]),
            geometry([1, 3, 2, 1], [6, 10], [1, 5], [1, 2], [0, 2], [1, 1]),
            geometry([1, 2, 4, 2], [5, 5], [2, 2], [3, 3], [3, 3], [1, 1]),
            geometry([2, 4, 4, 4], [6, 6], [3, 3], [1, 1], [1, 1], [1, 1]),
        ];
        for g in cases {
            let x = values(g.batch * g.in_channels * g.in_positions(), 3);
            let dy = values(g.batch * g.out_channels * g.out_positions(), 7);
            let want = by_definition(&x, &dy, &g);
            let w = values(g.out_channels * g.patch(), 5);
            let want_y = forward_by_definition(&x, &w, &g);
            let got_y = conv2d_forward(&x, &w, &g);
            assert_eq!(got_y.len(), want_y.len(), "{g:?}");
            for (a, b) in got_y.iter().zip(&want_y) {
                assert!(
                    (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                    "forward {g:?}: {a} vs {b}"
                );
            }
            // The input gradient against the definition, pixel by pixel.
            let got_dx = conv2d_input_grad(&w, &dy, &g);
            let want_dx = input_grad_by_definition(&w, &dy, &g);
            for (a, b) in got_dx.iter().zip(&want_dx) {
                assert!(
                    (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                    "input grad {g:?}: {a} vs {b}"
                );
            }
            let got = conv2d_weight_grad(&x, &dy, &g);
            assert_eq!(got.len(), want.len(), "{g:?}");
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                    "{g:?} [{i}]: {a} vs {b}"
                );
            }
            // f32 agrees with the f64 definition to f32 rounding.
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let dy32: Vec<f32> = dy.iter().map(|&v| v as f32).collect();
            let got32 = conv2d_weight_grad(&x32, &dy32, &g);
            for (a, b) in got32.iter().zip(&want) {
                assert!((f64::from(*a) - b).abs() <= 1e-5 * (1.0 + b.abs()), "{g:?}");
            }
        }
    }
}
