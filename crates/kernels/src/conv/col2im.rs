//! The input gradient of the unfolding convolution: `dcols = W_gᵀ · dY_{n,g}` per image and
//! group, folded back onto the input (col2im).

use gemm::Parallelism;
use rayon::prelude::*;

use super::geometry::ConvGeometry;
use super::shared_rows::SharedRows;
use super::unfold::TILE_ELEMENTS;
use crate::product::{GemmFloat, Product};

/// `dL/dx` (`[N, C, H, W]`) from the weight and the output gradient: per image and group,
/// `dcols = W_gᵀ · dY_{n,g}`, then every column value is added back to the input pixel it was
/// unfolded from (col2im).
///
/// The output rows are split into tiles ([`RowTiles`]) whose `dcols` stay in cache. Two tiles
/// with one tile between them never touch the same input row, so the even tiles run in
/// parallel, then the odd ones: every input pixel receives its sums in the same order on any
/// number of threads.
///
/// # Panics
/// If the slice lengths do not match `geometry` (a caller bug: both come from tensor shapes).
pub fn conv2d_input_grad<T: GemmFloat>(
    weight: &[T],
    output_grad: &[T],
    geometry: &ConvGeometry,
) -> Vec<T> {
    let g = geometry;
    let (patch, positions) = (g.patch(), g.out_positions());
    assert_eq!(weight.len(), g.out_channels * patch);
    assert_eq!(output_grad.len(), g.batch * g.out_channels * positions);
    let mut grad = vec![T::default(); g.batch * g.in_channels * g.in_positions()];
    let tiles = RowTiles::new(g);
    for n in 0..g.batch {
        for group in 0..g.groups {
            let w = &weight[g.weight_range(group)];
            let dy = &output_grad[g.output_range(n, group)];
            let dx = &mut grad[g.input_range(n, group)];
            if g.is_pointwise() {
                // dX (C×P) = Wᵀ (C×O) · dY (O×P), Wᵀ read from row-major W (O×C).
                Product {
                    shape: [patch, positions, g.group_out()],
                    lhs: (w, [1, patch]),
                    rhs: (dy, [positions, 1]),
                }
                .into(dx, false);
                continue;
            }
            let dx = SharedRows::new(dx, g.in_size[1]);
            for parity in 0..2 {
                (0..tiles.count)
                    .into_par_iter()
                    .filter(|tile| tile % 2 == parity)
                    .for_each_init(
                        || vec![T::default(); patch * tiles.per_tile * g.out_size[1]],
                        |cols, tile| {
                            let rows = tiles.rows(tile);
                            let range = rows.start * g.out_size[1]..rows.end * g.out_size[1];
                            let cols = &mut cols[..patch * range.len()];
                            // dcols (K×Pt) = Wᵀ (K×O) · dY[:, range] (O×Pt).
                            Product {
                                shape: [patch, range.len(), g.group_out()],
                                lhs: (w, [1, patch]),
                                rhs: (&dy[range.start..], [positions, 1]),
                            }
                            .into_rows(
                                cols,
                                range.len(),
                                false,
                                Parallelism::None,
                            );
                            // SAFETY: tiles of one parity touch disjoint input rows.
                            unsafe { fold(cols, g, rows, &dx) };
                        },
                    );
            }
        }
    }
    grad
}

/// A split of the output rows into tiles of whole rows for [`conv2d_input_grad`].
#[derive(Debug, Clone, Copy)]
pub(super) struct RowTiles {
    /// Output rows per tile (the last may have fewer).
    pub(super) per_tile: usize,
    pub(super) out_h: usize,
    pub(super) count: usize,
}

impl RowTiles {
    pub(super) fn new(g: &ConvGeometry) -> Self {
        let [out_h, out_w] = g.out_size;
        // Tiles i and i + 2 read disjoint input rows when (rows + 1)·stride exceeds the kernel's
        // reach (kh − 1)·dilation.
        let reach = (g.kernel[0] - 1) * g.dilation[0];
        let disjoint = (reach / g.stride[0]).max(1);
        // In cache, and at least 8 tiles where the rows allow it, so both phases have work.
        let cached = TILE_ELEMENTS / (g.patch() * out_w).max(1);
        let rows = cached
            .min(out_h.div_ceil(8))
            .max(disjoint)
            .min(out_h.max(1));
        Self {
            per_tile: rows,
            out_h,
            count: out_h.div_ceil(rows),
        }
    }

    pub(super) fn rows(&self, tile: usize) -> std::ops::Range<usize> {
        let start = tile * self.per_tile;
        start..self.out_h.min(start + self.per_tile)
    }
}

/// col2im of output rows `rows`, the adjoint of [`unfold`]: adds each value of the tile's
/// `cols` (`patch × (rows · out_w)`) to the input pixel of one group of one image (`input_grad`,
/// rows of `in_w`) it was read from.
///
/// # Safety
/// No other task may touch the input rows these output rows read while this runs.
unsafe fn fold<T: GemmFloat>(
    cols: &[T],
    g: &ConvGeometry,
    rows: std::ops::Range<usize>,
    input_grad: &SharedRows<T>,
) {
    let in_h = g.in_size[0];
    let out_w = g.out_size[1];
    let [kh, kw] = g.kernel;
    let stride = g.stride[1];
    let tile_len = rows.len() * out_w;
    for (row, src) in cols.chunks_exact(tile_len).enumerate() {
        let (c, ki, kj) = (row / (kh * kw), row / kw % kh, row % kw);
        let (inside, first_ix) = g.inside_columns(kj);
        if inside.is_empty() {
            continue;
        }
        for (oy, values) in rows.clone().zip(src.chunks_exact(out_w)) {
            let Some(iy) = g.source(0, oy, ki) else {
                continue;
            };
            // SAFETY: the caller keeps other tasks off this input row.
            let dst = unsafe { input_grad.row(c * in_h + iy) };
            let values = &values[inside.clone()];
            if stride == 1 {
                let dst = &mut dst[first_ix..first_ix + values.len()];
                for (d, &v) in dst.iter_mut().zip(values) {
                    *d += v;
                }
            } else {
                for (k, &v) in values.iter().enumerate() {
                    dst[first_ix + k * stride] += v;
                }
            }
        }
    }
}
