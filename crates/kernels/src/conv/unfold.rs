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

use gemm::Parallelism;
use rayon::prelude::*;

use super::geometry::{check, ConvGeometry};
use super::shared_rows::SharedRows;
use crate::product::{GemmFloat, Product};

/// `dL/dW` (`[out_channels, in_channels / groups, kh, kw]`, row-major) from the input `x`
/// (`[N, C, H, W]`) and the output gradient (`[N, O, OH, OW]`).
///
/// Per image and group, `dW_g += dY · colsᵀ` is summed over tiles of output positions whose
/// `cols` stay in cache: the tiles are split into [`WEIGHT_GRAD_CHUNKS`] fixed chunks, each
/// chunk summed into its own buffer on one thread, and the chunks then added in order, so the
/// result does not depend on the number of threads.
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
    let group_len = g.group_out() * patch;
    let mut weight_grad = vec![T::default(); g.out_channels * patch];
    let tiles = Tiles::new(g);
    let per_chunk = tiles.count.div_ceil(WEIGHT_GRAD_CHUNKS).max(1);
    for n in 0..g.batch {
        for group in 0..g.groups {
            let input = &x[g.input_range(n, group)];
            let dy = &output_grad[g.output_range(n, group)];
            let chunks: Vec<Vec<T>> = (0..tiles.count.div_ceil(per_chunk))
                .into_par_iter()
                .map(|chunk| {
                    let mut sum = vec![T::default(); group_len];
                    let mut cols = tiles.scratch::<T>(g);
                    let first = chunk * per_chunk;
                    for (i, tile) in (first..tiles.count.min(first + per_chunk)).enumerate() {
                        let range = tiles.range(tile);
                        let cols_rows = tiles.cols_row_stride(g, &range);
                        let cols = tile_columns(input, g, range.clone(), &mut cols);
                        // dW (O×K) += dY (O×Pt) · colsᵀ, colsᵀ read from row-major cols (K×Pt).
                        Product {
                            shape: [g.group_out(), patch, range.len()],
                            lhs: (&dy[range.start..], [positions, 1]),
                            rhs: (cols, [1, cols_rows]),
                        }
                        .into_rows(
                            &mut sum,
                            patch,
                            i > 0,
                            Parallelism::None,
                        );
                    }
                    sum
                })
                .collect();
            let dw = &mut weight_grad[g.weight_range(group)];
            for (i, chunk) in chunks.iter().enumerate() {
                if n == 0 && i == 0 {
                    dw.copy_from_slice(chunk);
                } else {
                    dw.iter_mut().zip(chunk).for_each(|(d, &c)| *d += c);
                }
            }
        }
    }
    weight_grad
}

/// How many chunks [`conv2d_weight_grad`] splits an image's tiles into: a constant, so that
/// the order of the sums is the same on any number of threads.
const WEIGHT_GRAD_CHUNKS: usize = 8;

/// Elements of one tile's `cols` (`patch × positions`): 64 Ki f32 values, 256 KiB, which stay
/// in a core's L2 cache between the unfolding and the product.
pub(super) const TILE_ELEMENTS: usize = 64 * 1024;

/// The fewest positions of a forward tile: 16 × 16 + 1 outputs even for one output channel
/// (fewer take gemm's small-product kernels), rounded up to gemm's 16-wide f32 block.
const MIN_FORWARD_TILE: usize = 272;

/// A split of one image's output positions into tiles of consecutive positions.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tiles {
    pub(super) len: usize,
    pub(super) positions: usize,
    pub(super) count: usize,
}

impl Tiles {
    pub(super) fn new(g: &ConvGeometry) -> Self {
        let positions = g.out_positions();
        // A multiple of 16 positions, the width of gemm's f32 register block on AVX2 (a
        // narrower remainder runs a slower kernel), at least one block, at most all positions.
        let len = (TILE_ELEMENTS / g.patch().max(1) / 16 * 16)
            .max(16)
            .min(positions.max(1));
        Self {
            len,
            positions,
            count: positions.div_ceil(len),
        }
    }

    /// Tiles for the forward product, each of which gemm sums exactly as it sums the whole
    /// image's product, so that the result does not depend on the split (see
    /// [`conv2d_forward`]): at least [`MIN_FORWARD_TILE`] positions, the remainder joined to the
    /// last tile. Narrower products take other paths in gemm (a register-block kernel below
    /// 16×16 outputs; below 64×64 a fixed block of 512 terms, where wide products divide K
    /// into equal blocks of at most 512).
    pub(super) fn for_forward(g: &ConvGeometry) -> Self {
        let cached = Self::new(g);
        let len = cached
            .len
            .max(MIN_FORWARD_TILE)
            .min(cached.positions.max(1));
        Self {
            len,
            positions: cached.positions,
            // len ≤ positions when there are any, so every tile has at least len positions.
            count: cached.positions / len,
        }
    }

    /// Positions `tile·len..`, the last tile up to the end.
    pub(super) fn range(&self, tile: usize) -> std::ops::Range<usize> {
        let start = tile * self.len;
        if tile + 1 == self.count {
            start..self.positions
        } else {
            start..start + self.len
        }
    }

    /// The positions of the longest tile (the last one may be shorter or, in the forward's
    /// split, longer than the others).
    pub(super) fn longest(&self) -> usize {
        self.count
            .checked_sub(1)
            .map_or(0, |last| self.len.max(self.positions - last * self.len))
    }

    /// The distance between two rows of the `cols` [`tile_columns`] gives for `range`: the
    /// tile's length, or for a pointwise convolution (which reads the input) a whole plane.
    pub(super) fn cols_row_stride(
        &self,
        g: &ConvGeometry,
        range: &std::ops::Range<usize>,
    ) -> usize {
        if g.is_pointwise() {
            self.positions
        } else {
            range.len()
        }
    }

    /// Scratch for one tile's `cols` (none for a pointwise convolution, which reads `x`).
    pub(super) fn scratch<T: Default + Clone>(&self, g: &ConvGeometry) -> Vec<T> {
        if g.is_pointwise() {
            Vec::new()
        } else {
            vec![T::default(); g.patch() * self.longest()]
        }
    }
}

/// `cols` of output positions `range` of one group of one image (`input`): row-major
/// `patch × range.len()`; for a pointwise convolution the input itself (rows of stride
/// `positions`, the caller's strides say so).
pub(super) fn tile_columns<'a, T: GemmFloat>(
    input: &'a [T],
    g: &ConvGeometry,
    range: std::ops::Range<usize>,
    cols: &'a mut [T],
) -> &'a [T] {
    if g.is_pointwise() {
        &input[range.start..]
    } else {
        let cols = &mut cols[..g.patch() * range.len()];
        unfold(input, g, range, cols);
        cols
    }
}

/// im2col of output positions `range` of one group of one image: row `(c, ki, kj)` of `cols`
/// holds, for every position of the range, the input value the weight element `(c, ki, kj)`
/// multiplies there (0 in padding). Each output row's part is one copy of the input row segment
/// it reads (a strided gather when the stride is not 1) between the padding's zeros.
pub(super) fn unfold<T: GemmFloat>(
    input: &[T],
    g: &ConvGeometry,
    range: std::ops::Range<usize>,
    cols: &mut [T],
) {
    let [in_h, in_w] = g.in_size;
    let out_w = g.out_size[1];
    let [kh, kw] = g.kernel;
    let stride = g.stride[1];
    let fill_row = |row: usize, dst: &mut [T]| {
        let (c, ki, kj) = (row / (kh * kw), row / kw % kh, row % kw);
        let plane = &input[c * in_h * in_w..(c + 1) * in_h * in_w];
        let (inside, first_ix) = g.inside_columns(kj);
        let mut p = range.start;
        let mut dst = &mut dst[..];
        while p < range.end {
            // The part of output row `oy` in the range: columns `ox0..ox1`.
            let (oy, ox0) = (p / out_w, p % out_w);
            let ox1 = out_w.min(ox0 + range.end - p);
            let (segment, rest) = dst.split_at_mut(ox1 - ox0);
            dst = rest;
            p += ox1 - ox0;
            let Some(iy) = g.source(0, oy, ki) else {
                segment.fill(T::default());
                continue;
            };
            let src = &plane[iy * in_w..(iy + 1) * in_w];
            let (lo, hi) = (inside.start.clamp(ox0, ox1), inside.end.clamp(ox0, ox1));
            segment[..lo - ox0].fill(T::default());
            segment[hi - ox0..].fill(T::default());
            let out = &mut segment[lo - ox0..hi - ox0];
            if out.is_empty() {
                continue;
            }
            let first = first_ix + (lo - inside.start) * stride;
            if stride == 1 {
                out.copy_from_slice(&src[first..first + out.len()]);
            } else {
                for (k, value) in out.iter_mut().enumerate() {
                    *value = src[first + k * stride];
                }
            }
        }
    };
    // A cache tile is one task's work already; a whole image is unfolded row by row in
    // parallel (the copy is a large share of a training convolution's time).
    if cols.len() <= TILE_ELEMENTS {
        for (row, dst) in cols.chunks_exact_mut(range.len()).enumerate() {
            fill_row(row, dst);
        }
    } else {
        cols.par_chunks_exact_mut(range.len())
            .enumerate()
            .for_each(|(row, dst)| fill_row(row, dst));
    }
}

/// `Y (N×O×P) = W (O×K) · cols (K×P) [+ bias]` per image and group: the convolution, with
/// `bias` (`[O]`) written first and the product added to it.
///
/// The output positions are split into tiles ([`Tiles::for_forward`]) that are unfolded and
/// multiplied in cache, one task each (over all images and groups). gemm sums each output of
/// such a tile exactly as it sums it in one product over the whole image, which is how
/// PyTorch's CPU GEMM path sums: PIDNet's training gradients amplify the forward's rounding
/// (batch norms over two images), and measured on the real-photo parity step the boundary
/// head's f32 gradient error moved between 0.02× and 4× PyTorch's with the blocking of these
/// sums. `cached_tiles_and_whole_image_give_the_same_bits` holds the split to that.
///
/// # Panics
/// If the slice lengths do not match `geometry` (a caller bug: both come from tensor shapes).
pub fn conv2d_forward<T: GemmFloat>(
    x: &[T],
    weight: &[T],
    bias: Option<&[T]>,
    geometry: &ConvGeometry,
) -> Vec<T> {
    let g = geometry;
    check(g, x);
    assert_eq!(weight.len(), g.out_channels * g.patch());
    let (patch, positions) = (g.patch(), g.out_positions());
    let mut out = vec![T::default(); g.batch * g.out_channels * positions];
    if let Some(bias) = bias {
        assert_eq!(bias.len(), g.out_channels);
        out.par_chunks_mut(positions)
            .enumerate()
            .for_each(|(plane, values)| values.fill(bias[plane % g.out_channels]));
    }
    let tiles = Tiles::for_forward(g);
    // Image n, group `group` of the output, in this order.
    let outputs: Vec<SharedRows<T>> = out
        .chunks_mut((g.group_out() * positions).max(1))
        .map(|rows| SharedRows::new(rows, positions))
        .collect();
    let tasks = g.batch * g.groups * tiles.count;
    // Too few tiles for the pool (small images): each product runs on all threads instead
    // (gemm splits its blocks over threads, not its sums).
    let threads = if tasks < rayon::current_num_threads() {
        Parallelism::Rayon(0)
    } else {
        Parallelism::None
    };
    (0..tasks).into_par_iter().for_each_init(
        || tiles.scratch::<T>(g),
        |cols, task| {
            let (image_group, tile) = (task / tiles.count, task % tiles.count);
            let (n, group) = (image_group / g.groups, image_group % g.groups);
            let input = &x[g.input_range(n, group)];
            let w = &weight[g.weight_range(group)];
            let range = tiles.range(tile);
            let cols_rows = tiles.cols_row_stride(g, &range);
            let cols = tile_columns(input, g, range.clone(), cols);
            // Y[:, range] (O×Pt) [+]= W (O×K) · cols (K×Pt).
            let product = Product {
                shape: [g.group_out(), range.len(), patch],
                lhs: (w, [patch, 1]),
                rhs: (cols, [cols_rows, 1]),
            };
            // SAFETY: tiles are disjoint column ranges of one image and group, one task each.
            unsafe { outputs[image_group].write_columns(range, product, bias.is_some(), threads) };
        },
    );
    out
}
