//! Hiera, the hierarchical vision transformer trunk of SAM 2.1's image encoder
//! (`sam2/modeling/backbones/hieradet.py`; Ryali et al., *Hiera*, <https://arxiv.org/abs/2306.00989>).
//!
//! ```text
//! image [N,3,H,W] → patch_embed (stride 4, BHWC) → + position embedding
//!   → stage 1 blocks → stage 2 → stage 3 → stage 4      (each stage: ½ resolution, 2× width)
//!   → the four stage outputs, NCHW, strides 4, 8, 16, 32
//! ```
//!
//! The first block of each stage pools (queries and residual) and still uses the previous
//! stage's window, halved by the pooling; a few blocks of stage 3 attend globally. See
//! `reference/sam2-hiera-spec.md` §1 and [`HieraConfig::block_plan`].

pub mod attention;
pub mod block;
pub mod drop_path;
pub mod patch_embed;
pub mod position;
pub mod window;

use burn::config::Config;
use burn::module::{Initializer, Module, Param};
use burn::tensor::{backend::Backend, Tensor};

use self::block::{MultiScaleBlock, MultiScaleBlockConfig};
use self::drop_path::{Branch, DropPath};
use self::patch_embed::PatchEmbed;
use self::position::position_embedding;
use super::Sam2Error;

/// Configuration of a [`Hiera`] trunk; the defaults are the official `Hiera` class defaults
/// (which the b+ model uses unchanged except for its width).
#[derive(Config, Debug)]
pub struct HieraConfig {
    /// Width of stage 1 (doubled at every stage).
    #[config(default = 96)]
    pub embed_dim: usize,
    /// Heads of stage 1 (doubled at every stage).
    #[config(default = 1)]
    pub num_heads: usize,
    /// Blocks per stage.
    #[config(default = "vec![2, 3, 16, 3]")]
    pub stages: Vec<usize>,
    /// Indices of the blocks that attend over the whole map.
    #[config(default = "vec![12, 16, 20]")]
    pub global_att_blocks: Vec<usize>,
    /// Window side per stage (the first entry is also the tiled window embedding's side).
    #[config(default = "vec![8, 4, 14, 7]")]
    pub window_spec: Vec<usize>,
    /// Size of the background position embedding `pos_embed`.
    #[config(default = "[14, 14]")]
    pub window_pos_embed_bkg_spatial_size: [usize; 2],
    /// Number of stage transitions that pool.
    #[config(default = 3)]
    pub q_pool: usize,
    /// Hidden width of the MLPs relative to the block width.
    #[config(default = 4.0)]
    pub mlp_ratio: f64,
}

/// What one block of the trunk is, as the official constructor lays them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockPlan {
    /// Input width.
    pub dim: usize,
    /// Output width.
    pub dim_out: usize,
    /// Heads.
    pub num_heads: usize,
    /// Window side (0: global).
    pub window_size: usize,
    /// Whether the block pools by 2.
    pub q_pool: bool,
}

impl HieraConfig {
    /// SAM 2.1 Hiera-T (`sam2.1_hiera_t.yaml`).
    pub fn tiny() -> Self {
        Self::new()
            .with_stages(vec![1, 2, 7, 2])
            .with_global_att_blocks(vec![5, 7, 9])
            .with_window_pos_embed_bkg_spatial_size([7, 7])
    }

    /// SAM 2.1 Hiera-S (`sam2.1_hiera_s.yaml`).
    pub fn small() -> Self {
        Self::new()
            .with_stages(vec![1, 2, 11, 2])
            .with_global_att_blocks(vec![7, 10, 13])
            .with_window_pos_embed_bkg_spatial_size([7, 7])
    }

    /// SAM 2.1 Hiera-B+ (`sam2.1_hiera_b+.yaml`; it keeps the default 14×14 background
    /// position embedding).
    pub fn base_plus() -> Self {
        Self::new().with_embed_dim(112).with_num_heads(2)
    }

    /// SAM 2.1 Hiera-L (`sam2.1_hiera_l.yaml`).
    pub fn large() -> Self {
        Self::new()
            .with_embed_dim(144)
            .with_num_heads(2)
            .with_stages(vec![2, 6, 36, 4])
            .with_global_att_blocks(vec![23, 33, 43])
            .with_window_spec(vec![8, 4, 16, 8])
            .with_window_pos_embed_bkg_spatial_size([7, 7])
    }

    /// Index of the last block of every stage.
    pub fn stage_ends(&self) -> Vec<usize> {
        self.stages
            .iter()
            .scan(0, |end, &blocks| {
                *end += blocks;
                Some(*end - 1)
            })
            .collect()
    }

    /// Output width of every stage, stride 4 first.
    pub fn stage_dims(&self) -> Vec<usize> {
        (0..self.stages.len())
            .map(|stage| self.embed_dim << stage)
            .collect()
    }

    /// Every block's widths, heads, window and pooling, following the official constructor:
    /// the first block of a stage reads the window of the stage before it.
    pub fn block_plan(&self) -> Vec<BlockPlan> {
        let stage_ends = self.stage_ends();
        let q_pool_blocks: Vec<usize> = stage_ends[..stage_ends.len().saturating_sub(1)]
            .iter()
            .take(self.q_pool)
            .map(|end| end + 1)
            .collect();
        let depth: usize = self.stages.iter().sum();
        let (mut dim, mut heads, mut stage) = (self.embed_dim, self.num_heads, 0);
        let mut plan = Vec::with_capacity(depth);
        for i in 0..depth {
            let mut window_size = self.window_spec[stage];
            if self.global_att_blocks.contains(&i) {
                window_size = 0;
            }
            let mut dim_out = dim;
            if i > 0 && stage_ends.contains(&(i - 1)) {
                dim_out = 2 * dim;
                heads *= 2;
                stage += 1;
            }
            plan.push(BlockPlan {
                dim,
                dim_out,
                num_heads: heads,
                window_size,
                q_pool: q_pool_blocks.contains(&i),
            });
            dim = dim_out;
        }
        plan
    }

    /// The image sides must be multiples of this (see [`Hiera::size_multiple`]); 0 when the
    /// configuration has no first window.
    pub fn size_multiple(&self) -> usize {
        let ws = self.window_spec.first().copied().unwrap_or(0);
        if ws == 0 {
            return 0;
        }
        let pooling = 1 << self.block_plan().iter().filter(|b| b.q_pool).count();
        4 * lcm(ws, pooling)
    }

    /// Checks that the configuration describes a trunk the official code could build and run.
    pub fn check(&self) -> Result<(), Sam2Error> {
        let fail = |message: String| Err(Sam2Error::Config(format!("hiera: {message}")));
        if self.stages.is_empty() || self.stages.contains(&0) {
            return fail(format!(
                "stages {:?} must be non-empty and positive",
                self.stages
            ));
        }
        if self.window_spec.len() != self.stages.len() {
            return fail(format!(
                "window_spec {:?} needs one window per stage ({} stages)",
                self.window_spec,
                self.stages.len()
            ));
        }
        if self.window_spec[0] == 0 || self.window_pos_embed_bkg_spatial_size.contains(&0) {
            return fail(
                "window_spec[0] and window_pos_embed_bkg_spatial_size must be positive".into(),
            );
        }
        if self.embed_dim == 0
            || self.num_heads == 0
            || !self.embed_dim.is_multiple_of(self.num_heads)
        {
            return fail(format!(
                "num_heads ({}) must divide embed_dim ({})",
                self.num_heads, self.embed_dim
            ));
        }
        if self.q_pool >= self.stages.len() {
            return fail(format!(
                "q_pool ({}) must be below the number of stages ({})",
                self.q_pool,
                self.stages.len()
            ));
        }
        let depth: usize = self.stages.iter().sum();
        if let Some(block) = self.global_att_blocks.iter().find(|&&b| b >= depth) {
            return fail(format!(
                "global block {block} is past the last block ({})",
                depth - 1
            ));
        }
        for (i, block) in self.block_plan().iter().enumerate() {
            if block.q_pool && (block.window_size == 0 || block.window_size % 2 == 1) {
                return fail(format!(
                    "block {i} pools, so its window ({}) must be even and not global",
                    block.window_size
                ));
            }
        }
        Ok(())
    }

    /// Builds the trunk; the position embeddings start at zero, as in the official code.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Hiera<B> {
        let [bh, bw] = self.window_pos_embed_bkg_spatial_size;
        let ws = self.window_spec[0];
        let blocks = self
            .block_plan()
            .iter()
            .map(|plan| {
                MultiScaleBlockConfig::new(plan.dim, plan.dim_out, plan.num_heads, plan.window_size)
                    .with_q_pool(plan.q_pool)
                    .with_mlp_ratio(self.mlp_ratio)
                    .init(device)
            })
            .collect();
        Hiera {
            patch_embed: PatchEmbed::new(self.embed_dim, device),
            pos_embed: Initializer::Zeros.init([1, self.embed_dim, bh, bw], device),
            pos_embed_window: Initializer::Zeros.init([1, self.embed_dim, ws, ws], device),
            blocks,
            stage_ends: self.stage_ends(),
        }
    }
}

/// The trunk; field names are the official keys (`trunk.blocks.3.attn.qkv.weight`, …).
#[derive(Module, Debug)]
pub struct Hiera<B: Backend> {
    /// The stride-4 patch embedding.
    pub patch_embed: PatchEmbed<B>,
    /// `[1, C0, bh, bw]`, resized bicubically to the token map.
    pub pos_embed: Param<Tensor<B, 4>>,
    /// `[1, C0, ws, ws]`, tiled over the token map.
    pub pos_embed_window: Param<Tensor<B, 4>>,
    /// All blocks, stage after stage.
    pub blocks: Vec<MultiScaleBlock<B>>,
    stage_ends: Vec<usize>,
}

impl<B: Backend> Hiera<B> {
    /// The image sides must be multiples of this: the window embedding tiles the stride-4 map
    /// exactly, and every pooled map has even sides.
    pub fn size_multiple(&self) -> usize {
        let ws = self.pos_embed_window.lazy_shape().to_vec()[2];
        let pooling = 1 << self.blocks.iter().filter(|b| b.pools()).count();
        4 * lcm(ws, pooling)
    }

    /// The position embedding of an `h × w` token map: `[1, h, w, C0]`.
    pub fn position_embedding(&self, size: [usize; 2]) -> Tensor<B, 4> {
        position_embedding(self.pos_embed.val(), self.pos_embed_window.val(), size)
    }

    /// Patch embedding plus position embedding: `[N, 3, H, W] -> [N, H/4, W/4, C0]`.
    pub fn embed(&self, images: Tensor<B, 4>) -> Tensor<B, 4> {
        let x = self.patch_embed.forward(images);
        let [_, h, w, _] = x.dims();
        let pos = self.position_embedding([h, w]).cast(x.dtype());
        x + pos
    }

    /// `[N, 3, H, W]` -> the stage outputs, NCHW, high to low resolution:
    /// `[N, C0, H/4, W/4]`, `[N, 2C0, H/8, W/8]`, … (H and W multiples of
    /// [`Self::size_multiple`]).
    pub fn forward(&self, images: Tensor<B, 4>) -> Result<Vec<Tensor<B, 4>>, Sam2Error> {
        self.forward_with(images, None)
    }

    /// [`Self::forward`], with stochastic depth when `drop_path` is given (training).
    pub fn forward_with(
        &self,
        images: Tensor<B, 4>,
        drop_path: Option<&DropPath>,
    ) -> Result<Vec<Tensor<B, 4>>, Sam2Error> {
        let [_, channels, h, w] = images.dims();
        let multiple = self.size_multiple();
        if channels != 3 || h == 0 || w == 0 || h % multiple != 0 || w % multiple != 0 {
            return Err(Sam2Error::shape(format!(
                "the Hiera encoder takes [N, 3, H, W] images with H and W multiples of {multiple}, got [_, {channels}, {h}, {w}]"
            )));
        }
        let mut x = self.embed(images);
        let mut outputs = Vec::with_capacity(self.stage_ends.len());
        let depth = self.blocks.len();
        for (i, block) in self.blocks.iter().enumerate() {
            let factors = drop_path.map_or([None, None], |drop| {
                [Branch::Attention, Branch::Mlp]
                    .map(|branch| drop.factor_tensor(i, depth, branch, &x))
            });
            x = block.forward_dropping(x, factors);
            if self.stage_ends.contains(&i) {
                outputs.push(x.clone().permute([0, 3, 1, 2]));
            }
        }
        Ok(outputs)
    }
}

fn lcm(a: usize, b: usize) -> usize {
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    a / gcd(a, b) * b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn windows(config: &HieraConfig) -> Vec<usize> {
        config.block_plan().iter().map(|b| b.window_size).collect()
    }

    fn pooling_blocks(config: &HieraConfig) -> Vec<usize> {
        let plan = config.block_plan();
        (0..plan.len()).filter(|&i| plan[i].q_pool).collect()
    }

    #[test]
    fn official_block_schedules() {
        // reference/sam2-hiera-spec.md §0, "Per-block window sizes, as built".
        let t = HieraConfig::tiny();
        assert_eq!(windows(&t), [8, 8, 4, 4, 14, 0, 14, 0, 14, 0, 14, 7]);
        let heads: Vec<usize> = t.block_plan().iter().map(|b| b.num_heads).collect();
        assert_eq!(heads, [1, 2, 2, 4, 4, 4, 4, 4, 4, 4, 8, 8]);
        assert_eq!(pooling_blocks(&t), [1, 3, 10]);
        let s = HieraConfig::small();
        assert_eq!(
            windows(&s),
            [8, 8, 4, 4, 14, 14, 14, 0, 14, 14, 0, 14, 14, 0, 14, 7]
        );
        assert_eq!(pooling_blocks(&s), [1, 3, 14]);
        let b = HieraConfig::base_plus();
        assert_eq!(
            windows(&b),
            [8, 8, 8, 4, 4, 4, 14, 14, 14, 14, 14, 14, 0, 14, 14, 14, 0, 14, 14, 14, 0, 14, 7, 7]
        );
        assert_eq!(pooling_blocks(&b), [2, 5, 21]);
        let l = HieraConfig::large();
        let mut expected = vec![8, 8, 8, 4, 4, 4, 4, 4, 4];
        expected.extend([16; 14]);
        expected.push(0);
        expected.extend([16; 9]);
        expected.push(0);
        expected.extend([16; 9]);
        expected.push(0);
        expected.extend([16, 8, 8, 8]);
        assert_eq!(windows(&l), expected);
        assert_eq!(pooling_blocks(&l), [2, 8, 44]);
        for config in [t, s, b, l] {
            config.check().expect("official configs are valid");
        }
    }

    #[test]
    fn a_pooling_block_cannot_be_global() {
        let config = HieraConfig::tiny().with_global_att_blocks(vec![3]);
        let error = config.check().unwrap_err().to_string();
        assert!(error.contains("block 3 pools"), "{error}");
        let error = HieraConfig::tiny()
            .with_window_spec(vec![8, 4, 14])
            .check()
            .unwrap_err()
            .to_string();
        assert!(error.contains("window_spec"), "{error}");
    }
}
