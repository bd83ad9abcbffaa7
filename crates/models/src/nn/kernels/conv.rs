//! A 2-D convolution and its gradients on plain row-major slices, each as one matrix product
//! per image and group over the im2col unfolding of the input (`cols`: one row per weight
//! element, one column per output position): forward `Y_{n,g} = W_g · cols_{n,g}`, weight
//! gradient `dW_g += dY_{n,g} · cols_{n,g}ᵀ`, input gradient `dcols = W_gᵀ · dY_{n,g}` folded
//! back onto the input (col2im).
//!
//! Why our own: Burn 0.21's default weight gradient (which Flex uses) is a convolution over the
//! batch with the output gradient as the kernel, adding the output positions one after the
//! other; on PIDNet-S's 64×64 boundary head that made the f32 weight gradients 4–5× less
//! accurate than PyTorch's (issue 18), and it is 2–7× slower. The forward pass is ours for the
//! same reason: summed this way (as PyTorch's CPU convolution does), the trunk's rounding no
//! longer drives the boundary head's gradient error. The `gemm` crate's product sums in
//! register blocks, as a BLAS does, and runs on the compute pool.

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

    /// Image `n`, group `group` of the input `[N, C, H, W]`.
    fn input_range(&self, n: usize, group: usize) -> std::ops::Range<usize> {
        let start = (n * self.in_channels + group * self.group_in()) * self.in_positions();
        start..start + self.group_in() * self.in_positions()
    }

    /// Image `n`, group `group` of the output `[N, O, OH, OW]`.
    fn output_range(&self, n: usize, group: usize) -> std::ops::Range<usize> {
        let start = (n * self.out_channels + group * self.group_out()) * self.out_positions();
        start..start + self.group_out() * self.out_positions()
    }

    /// Group `group` of the weight `[O, C / groups, kh, kw]`.
    fn weight_range(&self, group: usize) -> std::ops::Range<usize> {
        let start = group * self.group_out() * self.patch();
        start..start + self.group_out() * self.patch()
    }

    /// Scratch for one group's `cols` (none for a pointwise convolution, which reads `x`).
    fn cols_scratch<T: Default + Clone>(&self) -> Vec<T> {
        if self.is_pointwise() {
            Vec::new()
        } else {
            vec![T::default(); self.patch() * self.out_positions()]
        }
    }

    /// The input coordinate that output coordinate `o` reads at kernel offset `k` along `axis`
    /// (0: rows, 1: columns), if it is inside the input (not padding).
    fn source(&self, axis: usize, o: usize, k: usize) -> Option<usize> {
        (o * self.stride[axis] + k * self.dilation[axis])
            .checked_sub(self.padding[axis])
            .filter(|&i| i < self.in_size[axis])
    }

    /// Calls `visit(index in cols, index in the group's input)` for every pair of the im2col
    /// unfolding that reads inside the input: row `(c, ki, kj)` of `cols`, column `(oy, ox)`.
    fn for_each_tap(&self, mut visit: impl FnMut(usize, usize)) {
        let [in_h, in_w] = self.in_size;
        let [out_h, out_w] = self.out_size;
        let [kh, kw] = self.kernel;
        for c in 0..self.group_in() {
            for ki in 0..kh {
                for kj in 0..kw {
                    let row = ((c * kh + ki) * kw + kj) * out_h * out_w;
                    for oy in 0..out_h {
                        let Some(iy) = self.source(0, oy, ki) else {
                            continue;
                        };
                        let in_row = (c * in_h + iy) * in_w;
                        for ox in 0..out_w {
                            if let Some(ix) = self.source(1, ox, kj) {
                                visit(row + oy * out_w + ox, in_row + ix);
                            }
                        }
                    }
                }
            }
        }
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
    let mut cols = g.cols_scratch();
    for n in 0..g.batch {
        for group in 0..g.groups {
            // dW (O×K) += dY (O×P) · colsᵀ, colsᵀ read from row-major cols (K×P).
            Product {
                shape: [g.group_out(), patch, positions],
                lhs: (&output_grad[g.output_range(n, group)], [positions, 1]),
                rhs: (group_columns(x, g, n, group, &mut cols), [1, positions]),
            }
            .into(&mut weight_grad[g.weight_range(group)], n > 0);
        }
    }
    weight_grad
}

/// im2col of one group of one image: row `(c, ki, kj)` of `cols` holds, for every output
/// position, the input value the weight element `(c, ki, kj)` multiplies there (0 in padding).
fn unfold<T: GemmFloat>(input: &[T], g: &ConvGeometry, cols: &mut [T]) {
    cols.fill(T::default());
    g.for_each_tap(|col, pixel| cols[col] = input[pixel]);
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
    let mut cols = g.cols_scratch();
    for n in 0..g.batch {
        for group in 0..g.groups {
            // Y (O×P) = W (O×K) · cols (K×P).
            Product {
                shape: [g.group_out(), positions, patch],
                lhs: (&weight[g.weight_range(group)], [patch, 1]),
                rhs: (group_columns(x, g, n, group, &mut cols), [positions, 1]),
            }
            .into(&mut out[g.output_range(n, group)], false);
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
            // dcols (K×P) = Wᵀ (K×O) · dY (O×P), Wᵀ read from row-major W (O×K).
            let product = Product {
                shape: [patch, positions, g.group_out()],
                lhs: (&weight[g.weight_range(group)], [1, patch]),
                rhs: (&output_grad[g.output_range(n, group)], [positions, 1]),
            };
            let dx = &mut grad[g.input_range(n, group)];
            if g.is_pointwise() {
                product.into(dx, false);
            } else {
                product.into(&mut cols, false);
                fold(&cols, g, dx);
            }
        }
    }
    grad
}

/// col2im, the adjoint of [`unfold`]: adds each value of `cols` to the input pixel of one group
/// of one image it was read from.
fn fold<T: GemmFloat + std::ops::AddAssign>(cols: &[T], g: &ConvGeometry, input_grad: &mut [T]) {
    g.for_each_tap(|col, pixel| input_grad[pixel] += cols[col]);
}

/// The check every kernel makes before reading `x`.
fn check(g: &ConvGeometry, x: &[impl Copy]) {
    assert!(
        g.groups > 0
            && g.in_channels.is_multiple_of(g.groups)
            && g.out_channels.is_multiple_of(g.groups)
    );
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
    let input = &x[g.input_range(n, group)];
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
    use crate::nn::kernels::test_values as values;

    /// Every product of the convolution by its definition, with signed coordinates and no
    /// shared code with the kernels: `(x index, weight index, y index)` for
    /// `Y[n, o, oy, ox] += W[o, c, ki, kj] · X[n, group(o)·C/groups + c, iy, ix]`.
    fn connections(g: &ConvGeometry) -> Vec<(usize, usize, usize)> {
        let (gi, go) = (g.group_in(), g.group_out());
        let [kh, kw] = g.kernel;
        let [oh, ow] = g.out_size;
        let [ih, iw] = g.in_size.map(|v| v as isize);
        let mut all = Vec::new();
        for n in 0..g.batch {
            for o in 0..g.out_channels {
                for c in 0..gi {
                    for (ki, kj) in (0..kh).flat_map(|ki| (0..kw).map(move |kj| (ki, kj))) {
                        for (oy, ox) in (0..oh).flat_map(|oy| (0..ow).map(move |ox| (oy, ox))) {
                            let at = |o: usize, k: usize, axis: usize| {
                                (o * g.stride[axis] + k * g.dilation[axis]) as isize
                                    - g.padding[axis] as isize
                            };
                            let (iy, ix) = (at(oy, ki, 0), at(ox, kj, 1));
                            if iy < 0 || ix < 0 || iy >= ih || ix >= iw {
                                continue;
                            }
                            let channel = n * g.in_channels + (o / go) * gi + c;
                            let xi =
                                (channel * ih as usize + iy as usize) * iw as usize + ix as usize;
                            let wi = ((o * gi + c) * kh + ki) * kw + kj;
                            let yi = ((n * g.out_channels + o) * oh + oy) * ow + ox;
                            all.push((xi, wi, yi));
                        }
                    }
                }
            }
        }
        all
    }

    /// Forward, weight gradient and input gradient by the definition, summed in f64.
    fn by_definition(x: &[f64], w: &[f64], dy: &[f64], g: &ConvGeometry) -> [Vec<f64>; 3] {
        let mut y = vec![0.0; dy.len()];
        let mut dw = vec![0.0; w.len()];
        let mut dx = vec![0.0; x.len()];
        for (xi, wi, yi) in connections(g) {
            y[yi] += w[wi] * x[xi];
            dw[wi] += dy[yi] * x[xi];
            dx[xi] += w[wi] * dy[yi];
        }
        [y, dw, dx]
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
            let w = values(g.out_channels * g.patch(), 5);
            let dy = values(g.batch * g.out_channels * g.out_positions(), 7);
            let want = by_definition(&x, &w, &dy, &g);
            let got = [
                conv2d_forward(&x, &w, &g),
                conv2d_weight_grad(&x, &dy, &g),
                conv2d_input_grad(&w, &dy, &g),
            ];
            for (what, (got, want)) in ["forward", "weight grad", "input grad"]
                .iter()
                .zip(got.iter().zip(&want))
            {
                assert_eq!(got.len(), want.len(), "{what} {g:?}");
                for (a, b) in got.iter().zip(want) {
                    assert!(
                        (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                        "{what} {g:?}: {a} vs {b}"
                    );
                }
            }
            // f32 agrees with the f64 definition to f32 rounding.
            let narrow = |v: &[f64]| v.iter().map(|&v| v as f32).collect::<Vec<f32>>();
            let (x32, w32, dy32) = (narrow(&x), narrow(&w), narrow(&dy));
            let got32 = [
                conv2d_forward(&x32, &w32, &g),
                conv2d_weight_grad(&x32, &dy32, &g),
                conv2d_input_grad(&w32, &dy32, &g),
            ];
            for (got, want) in got32.iter().zip(&want) {
                for (a, b) in got.iter().zip(want) {
                    assert!((f64::from(*a) - b).abs() <= 1e-5 * (1.0 + b.abs()), "{g:?}");
                }
            }
        }
    }
}
