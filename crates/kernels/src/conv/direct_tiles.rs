//! The direct kernel's data: the stride-phase planes of the padded input, the offsets of the
//! weight elements in them, the packed weights, the register tile (AVX-512 and portable) and
//! the output planes the tiles write.

use rayon::prelude::*;

use super::direct::{Build, Epilogue, LANES, OUT_BLOCK, POSITION_BLOCK};
use super::geometry::ConvGeometry;

/// The zero-padded input of one image, split into stride phases: plane `(c, a, b)` holds the
/// padded rows `a, a + sy, …` and columns `b, b + sx, …` of channel `c`.
#[derive(Debug, Clone, Copy)]
pub(super) struct PlaneLayout {
    stride: [usize; 2],
    padding: [usize; 2],
    /// Rows and columns of one phase plane.
    height: usize,
    width: usize,
    /// Elements of one image's planes plus what the last tile reads past them.
    len: usize,
}

impl PlaneLayout {
    /// The layout for `g`, and where each weight element reads it.
    pub(super) fn new(g: &ConvGeometry) -> (Self, Offsets) {
        let [sy, sx] = g.stride;
        let padded = [0, 1].map(|axis| g.in_size[axis] + 2 * g.padding[axis]);
        let (height, width) = (padded[0].div_ceil(sy), padded[1].div_ceil(sx));
        let mut layout = Self {
            stride: g.stride,
            padding: g.padding,
            height,
            width,
            len: 0,
        };
        let planes_len = g.in_channels * sy * sx * height * width;
        let offsets = layout.offsets(g);
        let last_read = offsets.last_read() + layout.tiles(g) * POSITION_BLOCK;
        layout.len = planes_len.max(last_read);
        (layout, offsets)
    }

    /// Where weight element `(c, ki, kj)` reads grid position 0: padded row `oy·sy + ki` is row
    /// `oy + ki / sy` of phase `ki % sy` (columns alike).
    pub(super) fn offset(&self, c: usize, ki: usize, kj: usize) -> usize {
        let [sy, sx] = self.stride;
        let plane = (c * sy + ki % sy) * sx + kj % sx;
        plane * self.height * self.width + (ki / sy) * self.width + kj / sx
    }

    /// Every weight element's offset, in the weight's storage order.
    pub(super) fn offsets(&self, g: &ConvGeometry) -> Offsets {
        let [kh, kw] = g.kernel;
        let values: Vec<usize> = (0..g.in_channels)
            .flat_map(|c| (0..kh).flat_map(move |ki| (0..kw).map(move |kj| (c, ki, kj))))
            .map(|(c, ki, kj)| self.offset(c, ki, kj))
            .collect();
        // Not always the last element: with a stride, a later row can lie in an earlier phase.
        let largest = values.iter().copied().max().unwrap_or(0);
        Offsets { values, largest }
    }

    /// Register tiles covering the grid's `out_h · width` positions.
    pub(super) fn tiles(&self, g: &ConvGeometry) -> usize {
        (g.out_size[0] * self.width).div_ceil(POSITION_BLOCK)
    }

    /// One image (`[C, H, W]`) in this layout, written one plane row at a time in parallel
    /// (a stem has only three channels to share out).
    pub(super) fn split(&self, image: &[f32], g: &ConvGeometry) -> Vec<f32> {
        let [h, w] = g.in_size;
        let [sy, sx] = self.stride;
        let [py, px] = self.padding;
        let mut planes = vec![0.0f32; self.len];
        let rows = g.in_channels * sy * sx * self.height;
        let layout = *self;
        planes[..rows * self.width]
            .par_chunks_mut(self.width)
            .with_min_len(16)
            .enumerate()
            .for_each(|(i, plane_row)| {
                // Row r of phase (a, b) of channel c holds padded row r·sy + a, columns b,
                // b + sx, …: input row r·sy + a − py (or padding) read with a stride.
                let (plane, r) = (i / layout.height, i % layout.height);
                let (c, a, b) = (plane / (sy * sx), plane / sx % sy, plane % sx);
                let Some(iy) = (r * sy + a).checked_sub(py).filter(|&iy| iy < h) else {
                    return;
                };
                let row = &image[(c * h + iy) * w..(c * h + iy + 1) * w];
                // Plane column j holds input column j·sx + b − px, from the first j where
                // that is not in the left padding.
                let first = px.saturating_sub(b).div_ceil(sx);
                let Some(from) = (first * sx + b).checked_sub(px).filter(|&ix| ix < w) else {
                    return;
                };
                let plane_row = &mut plane_row[first..];
                if sx == 1 {
                    let len = (w - from).min(plane_row.len());
                    plane_row[..len].copy_from_slice(&row[from..from + len]);
                } else if sx == 2 {
                    // Pairs of a known width: the compiler vectorizes this, not `step_by`.
                    let pairs = row[from..].chunks_exact(2);
                    let last = pairs.remainder().first().copied();
                    let len = pairs.len();
                    for (value, pair) in plane_row.iter_mut().zip(pairs) {
                        *value = pair[0];
                    }
                    if let (Some(x), Some(value)) = (last, plane_row.get_mut(len)) {
                        *value = x;
                    }
                } else {
                    for (value, &x) in plane_row.iter_mut().zip(row[from..].iter().step_by(sx)) {
                        *value = x;
                    }
                }
            });
        planes
    }
}

/// Where each weight element reads the planes, in the weight's storage order.
pub(super) struct Offsets {
    values: Vec<usize>,
    largest: usize,
}

/// Weight elements per block of the sums: whole input channels, about this many terms.
const TERMS_PER_BLOCK: usize = 256;

impl Offsets {
    /// One past the last plane element a register tile at grid position 0 reads.
    pub(super) fn last_read(&self) -> usize {
        self.largest + POSITION_BLOCK
    }

    /// The weight elements in blocks of whole input channels, about [`TERMS_PER_BLOCK`] each.
    pub(super) fn blocks(&self, g: &ConvGeometry) -> Vec<std::ops::Range<usize>> {
        let per_channel = g.kernel[0] * g.kernel[1];
        let len = (TERMS_PER_BLOCK / per_channel).max(1) * per_channel;
        let total = self.values.len();
        (0..total.div_ceil(len))
            .map(|i| i * len..total.min((i + 1) * len))
            .collect()
    }

    /// The offsets of weight elements `range` (the bound on reads stays the whole set's).
    pub(super) fn part(&self, range: std::ops::Range<usize>) -> OffsetsPart<'_> {
        OffsetsPart {
            values: &self.values[range],
            last_read: self.last_read(),
        }
    }
}

/// Some of [`Offsets`], and how far any of them reads.
pub(super) struct OffsetsPart<'a> {
    values: &'a [usize],
    last_read: usize,
}

/// The weight `[O, K]` in blocks of [`OUT_BLOCK`] output channels, each `[K, OUT_BLOCK]` (the
/// register tile reads one weight element of all its channels at a time); the last block is
/// filled up with zero channels.
pub(super) struct PackedWeights {
    pub(super) values: Vec<f32>,
    pub(super) patch: usize,
    pub(super) blocks: usize,
}

impl PackedWeights {
    pub(super) fn new(weight: &[f32], out_channels: usize, patch: usize) -> Self {
        let blocks = out_channels.div_ceil(OUT_BLOCK);
        let mut values = vec![0.0f32; blocks * patch * OUT_BLOCK];
        for (o, row) in weight.chunks_exact(patch.max(1)).enumerate() {
            let (block, lane) = (o / OUT_BLOCK, o % OUT_BLOCK);
            let packed = &mut values[block * patch * OUT_BLOCK..(block + 1) * patch * OUT_BLOCK];
            for (k, &value) in row.iter().enumerate() {
                packed[k * OUT_BLOCK + lane] = value;
            }
        }
        Self {
            values,
            patch,
            blocks,
        }
    }

    pub(super) fn block(&self, block: usize) -> &[f32] {
        let len = self.patch * OUT_BLOCK;
        &self.values[block * len..(block + 1) * len]
    }
}

/// One register tile: the block sum `Σ_k weights[k·OUT_BLOCK + j] · source[offsets[k] + p]`
/// (one chain of fused multiply-adds from 0, over k in order) written to
/// `sums[j·POSITION_BLOCK + p]`, or with `accumulate` added to it. Summing the weight elements
/// in blocks like this, as a BLAS does, keeps the chains short: the rounding error grows with
/// the block's length, not the whole sum's.
pub(super) fn run_tile(
    build: Build,
    source: &[f32],
    offsets: &OffsetsPart<'_>,
    weights: &[f32],
    sums: &mut [f32; OUT_BLOCK * POSITION_BLOCK],
    accumulate: bool,
) {
    assert_eq!(weights.len(), offsets.values.len() * OUT_BLOCK);
    assert!(source.len() >= offsets.last_read);
    let offsets = offsets.values;
    match build {
        Build::Portable => tile_portable(source, offsets, weights, sums, accumulate),
        // SAFETY: `Build::Avx512` is only chosen where the CPU has AVX-512F, and every read
        // lies inside `source` and `weights` (asserted above).
        #[cfg(target_arch = "x86_64")]
        Build::Avx512 => unsafe { tile_avx512(source, offsets, weights, sums, accumulate) },
    }
}

/// [`run_tile`] in portable code: the same fused multiply-adds and additions in the same order.
pub(super) fn tile_portable(
    source: &[f32],
    offsets: &[usize],
    weights: &[f32],
    sums: &mut [f32; OUT_BLOCK * POSITION_BLOCK],
    accumulate: bool,
) {
    let mut block = [0.0f32; OUT_BLOCK * POSITION_BLOCK];
    for (&offset, w) in offsets.iter().zip(weights.chunks_exact(OUT_BLOCK)) {
        let x = &source[offset..offset + POSITION_BLOCK];
        for (row, &wj) in block.chunks_exact_mut(POSITION_BLOCK).zip(w) {
            for (sum, &xp) in row.iter_mut().zip(x) {
                *sum = wj.mul_add(xp, *sum);
            }
        }
    }
    for (sum, value) in sums.iter_mut().zip(block) {
        *sum = if accumulate { *sum + value } else { value };
    }
}

/// [`run_tile`] with 24 AVX-512 accumulators.
///
/// # Safety
/// The CPU must have AVX-512F; `source` must hold `offsets[k] + POSITION_BLOCK` values for
/// every k, and `weights` `offsets.len() · OUT_BLOCK`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512(
    source: &[f32],
    offsets: &[usize],
    weights: &[f32],
    sums: &mut [f32; OUT_BLOCK * POSITION_BLOCK],
    accumulate: bool,
) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); 3]; OUT_BLOCK];
    let (src, w) = (source.as_ptr(), weights.as_ptr());
    for (k, &offset) in offsets.iter().enumerate() {
        // SAFETY: the caller guarantees these reads are inside the slices.
        unsafe {
            let x = src.add(offset);
            let x = [
                _mm512_loadu_ps(x),
                _mm512_loadu_ps(x.add(LANES)),
                _mm512_loadu_ps(x.add(2 * LANES)),
            ];
            let wk = w.add(k * OUT_BLOCK);
            for (j, acc) in acc.iter_mut().enumerate() {
                let wj = _mm512_set1_ps(*wk.add(j));
                acc[0] = _mm512_fmadd_ps(wj, x[0], acc[0]);
                acc[1] = _mm512_fmadd_ps(wj, x[1], acc[1]);
                acc[2] = _mm512_fmadd_ps(wj, x[2], acc[2]);
            }
        }
    }
    for (row, acc) in sums.chunks_exact_mut(POSITION_BLOCK).zip(acc) {
        for (part, v) in row.chunks_exact_mut(LANES).zip(acc) {
            // SAFETY: `part` holds LANES values.
            unsafe {
                let v = if accumulate {
                    _mm512_add_ps(_mm512_loadu_ps(part.as_ptr()), v)
                } else {
                    v
                };
                _mm512_storeu_ps(part.as_mut_ptr(), v);
            }
        }
    }
}

/// The output `[N, O, OH, OW]`, written by parallel tasks at disjoint positions.
pub(super) struct OutputPlanes {
    pub(super) ptr: *mut f32,
    pub(super) len: usize,
}

// SAFETY: `write_tile`'s contract keeps tasks on disjoint elements.
unsafe impl Sync for OutputPlanes {}

impl OutputPlanes {
    /// Writes a register tile's sums (plus the bias, then `epilogue`) for grid positions
    /// `start..` of output channel block `block` of image `n`, dropping the grid columns past
    /// the output width.
    ///
    /// # Safety
    /// No other task may write these grid positions of image `n` meanwhile; a residual has the
    /// output's length.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn write_tile(
        &self,
        sums: &[f32],
        n: usize,
        block: usize,
        start: usize,
        layout: &PlaneLayout,
        bias: Option<&[f32]>,
        g: &ConvGeometry,
        epilogue: Epilogue<'_>,
    ) {
        let [out_h, out_w] = g.out_size;
        let end = (start + POSITION_BLOCK).min(out_h * layout.width);
        let channels = (block * OUT_BLOCK)..g.out_channels.min((block + 1) * OUT_BLOCK);
        for (lane, o) in channels.enumerate() {
            let row = &sums[lane * POSITION_BLOCK..(lane + 1) * POSITION_BLOCK];
            let shift = bias.map_or(0.0, |b| b[o]);
            let plane = (n * g.out_channels + o) * out_h * out_w;
            let mut p = start;
            while p < end {
                // Grid row oy, columns ox..; the part of it inside the output is written.
                let (oy, ox) = (p / layout.width, p % layout.width);
                let len = (layout.width - ox).min(end - p);
                let inside = out_w.saturating_sub(ox).min(len);
                let first = plane + oy * out_w + ox;
                assert!(first + inside <= self.len);
                let sums = &row[p - start..p - start + inside];
                // SAFETY: inside the buffer (asserted); the caller keeps others off it.
                let out = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(first), inside) };
                match epilogue.residual {
                    None => out.iter_mut().zip(sums).for_each(|(o, &s)| *o = shift + s),
                    Some(residual) => {
                        let residual = &residual[first..first + inside];
                        for ((o, &s), &r) in out.iter_mut().zip(sums).zip(residual) {
                            *o = (shift + s) + r;
                        }
                    }
                }
                if epilogue.relu {
                    out.iter_mut().for_each(|o| *o = o.max(0.0));
                }
                p += len;
            }
        }
    }
}
