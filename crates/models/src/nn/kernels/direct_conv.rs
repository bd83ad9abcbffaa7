//! A convolution's forward pass that reads the input in place instead of unfolding it: f32, on
//! CPUs with AVX-512.
//!
//! [`conv2d_forward`](super::conv::conv2d_forward) copies every input value `kh·kw` times into
//! `cols` and gemm then packs `cols` once more. Here the input is copied once, zero-padded and
//! (for strides above 1) split into stride phases, so that every row of the implicit `cols`
//! matrix is the padded input read at a fixed offset: the output position `(oy, ox)` is laid
//! out on a grid as wide as the phase planes, `p = oy·width + ox`, and weight element
//! `(c, ki, kj)` multiplies `planes[offset(c, ki, kj) + p]` for every `p`. The grid's columns
//! past the output width are computed and dropped (a few percent of the work).
//!
//! A register tile holds [`OUT_BLOCK`] output channels × [`POSITION_BLOCK`] grid positions
//! (24 of the 32 AVX-512 registers). The weight elements are taken in blocks of whole input
//! channels ([`TERMS_PER_BLOCK`] terms): each block's sum is one chain of fused multiply-adds
//! from 0 in the weight's storage order `(c, ki, kj)`, the block sums are added in order, then
//! the bias. That order does not depend on the tiling or the number of threads, and the
//! portable build ([`tile_portable`], `f32::mul_add`) gives the same bits as the AVX-512 one.

use rayon::prelude::*;

use super::conv::ConvGeometry;

/// f32 lanes of one AVX-512 register.
const LANES: usize = 16;

/// Output channels of one register tile.
const OUT_BLOCK: usize = 8;

/// Grid positions of one register tile: three registers.
const POSITION_BLOCK: usize = 3 * LANES;

/// At most this many register tiles of positions per parallel task (the input rows they read
/// stay in cache while every output-channel block passes over them).
const MAX_TILES_PER_TASK: usize = 8;

/// Whether [`conv2d_forward_direct`] computes this convolution: one group, no dilation, a
/// kernel larger than 1×1 or a stride or padding (a pointwise convolution already reads its
/// input in place).
pub fn direct_conv_applies(g: &ConvGeometry) -> bool {
    g.groups == 1
        && g.dilation == [1, 1]
        && !g.is_pointwise()
        && g.kernel.iter().all(|&k| k > 0)
        && g.in_channels > 0
        && g.out_channels > 0
}

/// Whether this CPU runs the AVX-512 build (where the direct convolution is faster than
/// unfolding; elsewhere the caller keeps the unfolding kernel).
pub fn direct_conv_is_fast_here() -> bool {
    super::vector_math::has_avx512()
}

/// What the output write does after adding the bias: add a residual of the output's shape,
/// then take ReLU (`max(v, 0)`, as Flex's `relu`). Each saves a pass over the output; the
/// arithmetic is that of the separate ops in the same order, so the bits are theirs too.
#[derive(Debug, Clone, Copy, Default)]
pub struct Epilogue<'a> {
    /// Added to the output, element by element (`[N, O, OH, OW]`).
    pub residual: Option<&'a [f32]>,
    /// Whether ReLU follows.
    pub relu: bool,
}

/// `epilogue(conv2d(x, weight) + bias)` (NCHW input, OIHW weight, f32) without unfolding; see
/// the module documentation. `None` where [`direct_conv_applies`] does not hold.
///
/// # Panics
/// If the slice lengths do not match `geometry` (a caller bug: all come from tensor shapes).
pub fn conv2d_forward_direct(
    x: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    g: &ConvGeometry,
    epilogue: Epilogue<'_>,
) -> Option<Vec<f32>> {
    conv2d_forward_with(x, weight, bias, g, epilogue, Build::fastest())
}

/// The build of the register tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Build {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Build {
    fn fastest() -> Self {
        #[cfg(target_arch = "x86_64")]
        if super::vector_math::has_avx512() {
            return Self::Avx512;
        }
        Self::Portable
    }
}

fn conv2d_forward_with(
    x: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    g: &ConvGeometry,
    epilogue: Epilogue<'_>,
    build: Build,
) -> Option<Vec<f32>> {
    if !direct_conv_applies(g) {
        return None;
    }
    assert_eq!(g.out_size, g.expected_out_size(), "output size of {g:?}");
    let [h, w] = g.in_size;
    let image_len = g.in_channels * h * w;
    assert_eq!(x.len(), g.batch * image_len);
    let patch = g.in_channels * g.kernel[0] * g.kernel[1];
    assert_eq!(weight.len(), g.out_channels * patch);
    if let Some(bias) = bias {
        assert_eq!(bias.len(), g.out_channels);
    }
    let (layout, offsets) = PlaneLayout::new(g);
    let planes: Vec<Vec<f32>> = x
        .chunks(image_len.max(1))
        .map(|image| layout.split(image, g))
        .collect();
    let weights = PackedWeights::new(weight, g.out_channels, patch);

    let [out_h, out_w] = g.out_size;
    let positions = out_h * out_w;
    let mut out = vec![0.0f32; g.batch * g.out_channels * positions];
    if let Some(residual) = epilogue.residual {
        assert_eq!(residual.len(), out.len(), "residual of {g:?}");
    }
    let tiles = layout.tiles(g);
    let split = TaskSplit::new(g.batch, tiles, weights.blocks);
    let output = OutputPlanes {
        ptr: out.as_mut_ptr(),
        len: out.len(),
    };
    let k_blocks = offsets.blocks(g);
    let tile_len = OUT_BLOCK * POSITION_BLOCK;
    (0..split.tasks()).into_par_iter().for_each_init(
        || vec![0.0f32; split.tiles_per_task * split.blocks_per_task * tile_len],
        |sums, task| {
            let (n, task_tiles, task_blocks) = split.task(task);
            // The weight elements in blocks whose input rows stay in L1 while every output
            // channel block passes over one tile; the tile's sums wait in `sums` meanwhile.
            for (i, k_block) in k_blocks.iter().enumerate() {
                for (t, tile) in task_tiles.clone().enumerate() {
                    let source = &planes[n][tile * POSITION_BLOCK..];
                    for (b, block) in task_blocks.clone().enumerate() {
                        let at = (t * split.blocks_per_task + b) * tile_len;
                        let sums: &mut [f32; OUT_BLOCK * POSITION_BLOCK] =
                            (&mut sums[at..at + tile_len]).try_into().expect("one tile");
                        let block_weights = &weights.block(block)
                            [k_block.start * OUT_BLOCK..k_block.end * OUT_BLOCK];
                        let part = offsets.part(k_block.clone());
                        run_tile(build, source, &part, block_weights, sums, i > 0);
                    }
                }
            }
            for (t, tile) in task_tiles.enumerate() {
                for (b, block) in task_blocks.clone().enumerate() {
                    let at = (t * split.blocks_per_task + b) * tile_len;
                    let sums = &sums[at..at + tile_len];
                    // SAFETY: tasks cover disjoint (positions, channel blocks), so disjoint
                    // outputs.
                    unsafe {
                        output.write_tile(
                            sums,
                            n,
                            block,
                            tile * POSITION_BLOCK,
                            &layout,
                            bias,
                            g,
                            epilogue,
                        )
                    };
                }
            }
        },
    );
    Some(out)
}

/// The parallel tasks: each computes some register tiles of positions of one image for some
/// blocks of output channels. Tiles go together (up to [`MAX_TILES_PER_TASK`]) so that a task
/// reads each weight once for several tiles; where that leaves too few tasks for the pool (small
/// images, wide layers), the output channel blocks are shared out too, so that each task also
/// reads fewer weights.
#[derive(Debug, Clone, Copy)]
struct TaskSplit {
    batch: usize,
    tiles: usize,
    tiles_per_task: usize,
    tile_groups: usize,
    blocks: usize,
    blocks_per_task: usize,
    block_groups: usize,
}

impl TaskSplit {
    fn new(batch: usize, tiles: usize, blocks: usize) -> Self {
        let tile_groups = tiles.div_ceil(MAX_TILES_PER_TASK);
        let tiles_per_task = tiles.div_ceil(tile_groups.max(1));
        let wanted = 4 * rayon::current_num_threads();
        let by_position = batch * tile_groups;
        let blocks_per_task =
            blocks.div_ceil(wanted.div_ceil(by_position.max(1)).clamp(1, blocks.max(1)));
        Self {
            batch,
            tiles,
            tiles_per_task,
            tile_groups,
            blocks,
            blocks_per_task,
            block_groups: blocks.div_ceil(blocks_per_task.max(1)),
        }
    }

    fn tasks(&self) -> usize {
        self.batch * self.tile_groups * self.block_groups
    }

    /// Task `task`'s image, tiles and output channel blocks.
    fn task(&self, task: usize) -> (usize, std::ops::Range<usize>, std::ops::Range<usize>) {
        let per_image = self.tile_groups * self.block_groups;
        let (n, rest) = (task / per_image, task % per_image);
        let (tile_group, block_group) = (rest / self.block_groups, rest % self.block_groups);
        let first_tile = tile_group * self.tiles_per_task;
        let first_block = block_group * self.blocks_per_task;
        (
            n,
            first_tile..self.tiles.min(first_tile + self.tiles_per_task),
            first_block..self.blocks.min(first_block + self.blocks_per_task),
        )
    }
}

/// The zero-padded input of one image, split into stride phases: plane `(c, a, b)` holds the
/// padded rows `a, a + sy, …` and columns `b, b + sx, …` of channel `c`.
#[derive(Debug, Clone, Copy)]
struct PlaneLayout {
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
    fn new(g: &ConvGeometry) -> (Self, Offsets) {
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
    fn offset(&self, c: usize, ki: usize, kj: usize) -> usize {
        let [sy, sx] = self.stride;
        let plane = (c * sy + ki % sy) * sx + kj % sx;
        plane * self.height * self.width + (ki / sy) * self.width + kj / sx
    }

    /// Every weight element's offset, in the weight's storage order.
    fn offsets(&self, g: &ConvGeometry) -> Offsets {
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
    fn tiles(&self, g: &ConvGeometry) -> usize {
        (g.out_size[0] * self.width).div_ceil(POSITION_BLOCK)
    }

    /// One image (`[C, H, W]`) in this layout, written one plane row at a time in parallel
    /// (a stem has only three channels to share out).
    fn split(&self, image: &[f32], g: &ConvGeometry) -> Vec<f32> {
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
struct Offsets {
    values: Vec<usize>,
    largest: usize,
}

/// Weight elements per block of the sums: whole input channels, about this many terms.
const TERMS_PER_BLOCK: usize = 256;

impl Offsets {
    /// One past the last plane element a register tile at grid position 0 reads.
    fn last_read(&self) -> usize {
        self.largest + POSITION_BLOCK
    }

    /// The weight elements in blocks of whole input channels, about [`TERMS_PER_BLOCK`] each.
    fn blocks(&self, g: &ConvGeometry) -> Vec<std::ops::Range<usize>> {
        let per_channel = g.kernel[0] * g.kernel[1];
        let len = (TERMS_PER_BLOCK / per_channel).max(1) * per_channel;
        let total = self.values.len();
        (0..total.div_ceil(len))
            .map(|i| i * len..total.min((i + 1) * len))
            .collect()
    }

    /// The offsets of weight elements `range` (the bound on reads stays the whole set's).
    fn part(&self, range: std::ops::Range<usize>) -> OffsetsPart<'_> {
        OffsetsPart {
            values: &self.values[range],
            last_read: self.last_read(),
        }
    }
}

/// Some of [`Offsets`], and how far any of them reads.
struct OffsetsPart<'a> {
    values: &'a [usize],
    last_read: usize,
}

/// The weight `[O, K]` in blocks of [`OUT_BLOCK`] output channels, each `[K, OUT_BLOCK]` (the
/// register tile reads one weight element of all its channels at a time); the last block is
/// filled up with zero channels.
struct PackedWeights {
    values: Vec<f32>,
    patch: usize,
    blocks: usize,
}

impl PackedWeights {
    fn new(weight: &[f32], out_channels: usize, patch: usize) -> Self {
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

    fn block(&self, block: usize) -> &[f32] {
        let len = self.patch * OUT_BLOCK;
        &self.values[block * len..(block + 1) * len]
    }
}

/// One register tile: the block sum `Σ_k weights[k·OUT_BLOCK + j] · source[offsets[k] + p]`
/// (one chain of fused multiply-adds from 0, over k in order) written to
/// `sums[j·POSITION_BLOCK + p]`, or with `accumulate` added to it. Summing the weight elements
/// in blocks like this, as a BLAS does, keeps the chains short: the rounding error grows with
/// the block's length, not the whole sum's.
fn run_tile(
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
fn tile_portable(
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
struct OutputPlanes {
    ptr: *mut f32,
    len: usize,
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
    unsafe fn write_tile(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::kernels::test_values as values;

    /// One group, no dilation (what the direct kernel computes).
    fn geometry(
        batch: usize,
        [in_channels, out_channels]: [usize; 2],
        in_size: [usize; 2],
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> ConvGeometry {
        let channels = [batch, in_channels, out_channels, 1];
        super::super::conv::tests::geometry(channels, in_size, kernel, stride, padding, [1, 1])
    }

    /// The convolution plus bias by its definition in f64 (conv_tests' oracle), and the sum of
    /// its terms' magnitudes.
    fn by_definition(x: &[f32], w: &[f32], bias: &[f32], g: &ConvGeometry) -> [Vec<f64>; 2] {
        let f64s = |v: &[f32]| v.iter().map(|&v| f64::from(v)).collect::<Vec<_>>();
        let positions = g.out_size[0] * g.out_size[1];
        let no_grad = vec![0.0; g.batch * g.out_channels * positions];
        let ([mut sums, ..], [mut magnitudes, ..]) =
            super::super::conv::tests::by_definition(&f64s(x), &f64s(w), &no_grad, g);
        for (plane, (sums, magnitudes)) in sums
            .chunks_mut(positions)
            .zip(magnitudes.chunks_mut(positions))
            .enumerate()
        {
            let b = f64::from(bias[plane % g.out_channels]);
            sums.iter_mut().for_each(|s| *s += b);
            magnitudes.iter_mut().for_each(|m| *m += b.abs());
        }
        [sums, magnitudes]
    }

    /// Odd sizes, both strides PIDNet uses, padding 0–2, channel counts that leave a partial
    /// output block, and grids that end inside a register tile.
    fn cases() -> Vec<ConvGeometry> {
        vec![
            geometry(2, [3, 5], [7, 9], [3, 3], [1, 1], [1, 1]),
            geometry(1, [4, 8], [10, 13], [3, 3], [2, 2], [1, 1]),
            geometry(2, [5, 11], [9, 6], [3, 3], [2, 2], [1, 1]),
            geometry(1, [2, 17], [17, 21], [3, 3], [1, 1], [0, 0]),
            geometry(1, [3, 9], [12, 11], [5, 3], [1, 2], [2, 1]),
            geometry(1, [6, 16], [8, 40], [3, 3], [1, 1], [1, 1]),
            geometry(1, [2, 3], [15, 15], [7, 7], [4, 4], [3, 3]),
            geometry(3, [8, 24], [5, 5], [3, 3], [1, 1], [1, 1]),
            geometry(1, [3, 4], [6, 6], [2, 2], [2, 2], [0, 0]),
            geometry(1, [16, 8], [1, 1], [3, 3], [1, 1], [1, 1]),
        ]
    }

    fn operands(g: &ConvGeometry, seed: u64) -> [Vec<f32>; 3] {
        let [h, w] = g.in_size;
        let patch = g.in_channels * g.kernel[0] * g.kernel[1];
        let f32s = |len: usize, seed: u64| values(len, seed).iter().map(|&v| v as f32).collect();
        [
            f32s(g.batch * g.in_channels * h * w, seed),
            f32s(g.out_channels * patch, seed + 1),
            f32s(g.out_channels, seed + 2),
        ]
    }

    #[test]
    fn matches_the_definition_within_f32_rounding() {
        for (i, g) in cases().iter().enumerate() {
            let [x, w, b] = operands(g, 10 + i as u64);
            let [want, magnitude] = by_definition(&x, &w, &b, g);
            let terms = g.in_channels * g.kernel[0] * g.kernel[1] + 1;
            for build in [Build::Portable, Build::fastest()] {
                let got = conv2d_forward_with(&x, &w, Some(&b), g, Epilogue::default(), build)
                    .expect("applies");
                assert_eq!(got.len(), want.len(), "{g:?}");
                for (k, ((&got, &want), &magnitude)) in
                    got.iter().zip(&want).zip(&magnitude).enumerate()
                {
                    // A sequential f32 sum of `terms` products errs by at most terms·ε·Σ|terms|.
                    let bound = terms as f64 * f64::from(f32::EPSILON) * magnitude;
                    let error = (f64::from(got) - want).abs();
                    assert!(
                        error <= bound,
                        "{g:?} {build:?} output {k}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn without_bias_and_with_the_unfolding_kernel_agree() {
        for (i, g) in cases().iter().enumerate() {
            let [x, w, _] = operands(g, 40 + i as u64);
            let direct =
                conv2d_forward_direct(&x, &w, None, g, Epilogue::default()).expect("applies");
            let unfolded = super::super::conv::conv2d_forward(&x, &w, None, g);
            let [_, magnitude] = by_definition(&x, &w, &vec![0.0; g.out_channels], g);
            let terms = (g.in_channels * g.kernel[0] * g.kernel[1]) as f64;
            for ((&a, &b), &m) in direct.iter().zip(&unfolded).zip(&magnitude) {
                let bound = 2.0 * terms * f64::from(f32::EPSILON) * m;
                assert!(
                    (f64::from(a) - f64::from(b)).abs() <= bound,
                    "{g:?}: {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn vector_build_gives_the_portable_bits() {
        if Build::fastest() == Build::Portable {
            // The portable build is what runs here; the other test covers it.
            eprintln!("no AVX-512 on this CPU: only the portable build ran");
        }
        for (i, g) in cases().iter().enumerate() {
            let [x, w, b] = operands(g, 70 + i as u64);
            let portable =
                conv2d_forward_with(&x, &w, Some(&b), g, Epilogue::default(), Build::Portable);
            let fastest =
                conv2d_forward_with(&x, &w, Some(&b), g, Epilogue::default(), Build::fastest());
            let bits =
                |v: Option<Vec<f32>>| v.map(|v| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
            assert_eq!(bits(portable), bits(fastest), "{g:?}");
        }
    }

    #[test]
    fn residual_and_relu_in_the_write_give_the_bits_of_separate_passes() {
        for (i, g) in cases().iter().enumerate() {
            let [x, w, b] = operands(g, 130 + i as u64);
            let plain =
                conv2d_forward_direct(&x, &w, Some(&b), g, Epilogue::default()).expect("applies");
            let residual: Vec<f32> = values(plain.len(), 140 + i as u64)
                .iter()
                .map(|&v| v as f32)
                .collect();
            for relu in [false, true] {
                let epilogue = Epilogue {
                    residual: Some(&residual),
                    relu,
                };
                let fused = conv2d_forward_direct(&x, &w, Some(&b), g, epilogue).expect("applies");
                let relu_only = Epilogue {
                    residual: None,
                    relu,
                };
                let fused_relu =
                    conv2d_forward_direct(&x, &w, Some(&b), g, relu_only).expect("applies");
                let activate = |v: f32| if relu { v.max(0.0) } else { v };
                let want: Vec<u32> = plain
                    .iter()
                    .zip(&residual)
                    .map(|(&y, &r)| activate(y + r).to_bits())
                    .collect();
                let got: Vec<u32> = fused.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want, "{g:?} relu {relu}");
                let want: Vec<u32> = plain.iter().map(|&y| activate(y).to_bits()).collect();
                let got: Vec<u32> = fused_relu.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want, "{g:?} relu only {relu}");
                if relu {
                    assert!(fused.contains(&0.0), "{g:?}: ReLU clamped nothing");
                }
            }
        }
    }

    #[test]
    fn same_bits_on_one_thread_and_on_many() {
        let g = geometry(2, [12, 20], [37, 29], [3, 3], [1, 1], [1, 1]);
        let [x, w, b] = operands(&g, 99);
        let many = conv2d_forward_direct(&x, &w, Some(&b), &g, Epilogue::default());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("a one-thread pool");
        let one = pool.install(|| conv2d_forward_direct(&x, &w, Some(&b), &g, Epilogue::default()));
        assert_eq!(many, one);
    }

    #[test]
    fn grouped_dilated_and_pointwise_convolutions_are_left_to_the_unfolding_kernel() {
        let mut g = geometry(1, [4, 4], [6, 6], [3, 3], [1, 1], [1, 1]);
        assert!(direct_conv_applies(&g));
        g.groups = 2;
        assert!(!direct_conv_applies(&g));
        g.groups = 1;
        g.dilation = [2, 2];
        assert!(!direct_conv_applies(&g));
        let pointwise = geometry(1, [4, 4], [6, 6], [1, 1], [1, 1], [0, 0]);
        assert!(!direct_conv_applies(&pointwise));
        let x = vec![0.0; 144];
        assert_eq!(
            conv2d_forward_direct(&x, &[0.0; 144], None, &g, Epilogue::default()),
            None
        );
    }
}
