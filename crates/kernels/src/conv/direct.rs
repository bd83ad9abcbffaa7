//! A convolution's forward pass that reads the input in place instead of unfolding it: f32, on
//! CPUs with AVX-512.
//!
//! [`conv2d_forward`](super::unfold::conv2d_forward) copies every input value `kh·kw` times into
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

use super::direct_tiles::{run_tile, OutputPlanes, PackedWeights, PlaneLayout};
use super::geometry::ConvGeometry;

/// f32 lanes of one AVX-512 register.
pub(super) const LANES: usize = 16;

/// Output channels of one register tile.
pub(super) const OUT_BLOCK: usize = 8;

/// Grid positions of one register tile: three registers.
pub(super) const POSITION_BLOCK: usize = 3 * LANES;

/// At most this many register tiles of positions per parallel task (the input rows they read
/// stay in cache while every output-channel block passes over them).
pub(super) const MAX_TILES_PER_TASK: usize = 8;

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
    crate::vector_math::has_avx512()
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
pub(super) enum Build {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Build {
    fn fastest() -> Self {
        #[cfg(target_arch = "x86_64")]
        if crate::vector_math::has_avx512() {
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

#[cfg(test)]
#[path = "direct_tests.rs"]
mod tests;
