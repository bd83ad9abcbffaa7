//! BatchNorm2d with PyTorch's semantics.
//!
//! Burn's own `BatchNorm` updates the running variance with the biased batch variance; PyTorch
//! (and so every official checkpoint) uses the unbiased one, and also counts
//! `num_batches_tracked`. Field names are PyTorch's, so keys need no translation.
//!
//! Mode follows Burn's convention: on an autodiff backend the layer normalises with batch
//! statistics and updates the running ones (PyTorch's `train()`); on a plain backend
//! (`model.valid()`) it uses the running statistics (`eval()`).
//!
//! CPU training in f32/f64 runs segburn's fused kernel (`kernels::batch_norm_train`, f64
//! sums); other backends and half precision compose Burn's ops as below. In inference a
//! convolution followed by this layer folds it into its weights (`conv_then_batch_norm`).

use burn::config::Config;
use burn::module::{Module, Param, RunningState};
use burn::tensor::{backend::Backend, DType, Tensor};

use segburn_kernels as kernels;

/// Configuration of [`BatchNorm2d`]; defaults are PyTorch's.
#[derive(Config, Debug)]
pub struct BatchNorm2dConfig {
    /// Number of channels.
    pub num_features: usize,
    /// Added to the variance before the square root.
    #[config(default = 1e-5)]
    pub eps: f64,
    /// PyTorch convention: `running = (1 - momentum) * running + momentum * batch`.
    #[config(default = 0.1)]
    pub momentum: f64,
}

impl BatchNorm2dConfig {
    pub fn init<B: Backend>(&self, device: &B::Device) -> BatchNorm2d<B> {
        let c = self.num_features;
        BatchNorm2d {
            weight: Param::from_tensor(Tensor::ones([c], device)),
            bias: Param::from_tensor(Tensor::zeros([c], device)),
            running_mean: RunningState::new(Tensor::zeros([c], device)),
            running_var: RunningState::new(Tensor::ones([c], device)),
            num_batches_tracked: RunningState::new(Tensor::zeros([1], device)),
            eps: self.eps,
            momentum: self.momentum,
        }
    }
}

/// Batch normalisation over `[N, C, H, W]`.
#[derive(Module, Debug)]
pub struct BatchNorm2d<B: Backend> {
    pub weight: Param<Tensor<B, 1>>,
    pub bias: Param<Tensor<B, 1>>,
    pub running_mean: RunningState<Tensor<B, 1>>,
    pub running_var: RunningState<Tensor<B, 1>>,
    /// A float counter of shape [1] (PyTorch: int64 scalar); exact up to 2^24 steps.
    pub num_batches_tracked: RunningState<Tensor<B, 1>>,
    pub eps: f64,
    pub momentum: f64,
}

/// Longest block the per-channel sums add up in one run; see [`Blocks`].
const MAX_BLOCK: usize = 256;

/// The `[N·C·A, L]` view of an `[N, C, H, W]` tensor: every channel plane split into `A` blocks
/// of `L` values (`L` the largest divisor of `H·W` up to [`MAX_BLOCK`]).
///
/// Per-channel sums run in two levels, over each block and then over the `N·A` block sums,
/// and the backward's sums (the gradients of the per-channel mean, scale and shift, which
/// autodiff reduces over the broadcast) inherit the same split. Flex sums a row in a few
/// dozen SIMD accumulators sequentially, which over a 2×256×256 stem plane left the f32
/// gradients of the early layers 5–9× further from the f64 oracle than PyTorch's (measured on
/// `pipeline/grads.safetensors`); two levels bring them to PyTorch's. The order is fixed, so
/// results stay deterministic.
#[derive(Debug, Clone, Copy)]
struct Blocks {
    n: usize,
    c: usize,
    a: usize,
    len: usize,
}

impl Blocks {
    fn new([n, c, h, w]: [usize; 4]) -> Self {
        let plane = h * w;
        let len = (1..=plane.min(MAX_BLOCK))
            .rev()
            .find(|l| plane % l == 0)
            .unwrap_or(1);
        Self {
            n,
            c,
            a: plane / len,
            len,
        }
    }

    fn view<B: Backend>(&self, input: Tensor<B, 4>) -> Tensor<B, 2> {
        input.reshape([self.n * self.c * self.a, self.len])
    }

    /// Per-channel sums `[C]` of the view's rows.
    fn channel_sum<B: Backend>(&self, rows: Tensor<B, 2>) -> Tensor<B, 1> {
        rows.sum_dim(1)
            .reshape([self.n, self.c, self.a])
            .sum_dim(2)
            .sum_dim(0)
            .reshape([self.c])
    }

    /// A per-channel vector `[C]` as a column `[N·C·A, 1]` matching the view's rows.
    ///
    /// `expand` rather than `repeat_dim` (or `cat`): Burn 0.21's autodiff gets repeat_dim's
    /// backward wrong, and expand's backward is the two-level sum above.
    fn column<B: Backend>(&self, values: Tensor<B, 1>) -> Tensor<B, 2> {
        values
            .reshape([1, self.c, 1])
            .expand([self.n, self.c, self.a])
            .reshape([self.n * self.c * self.a, 1])
    }
}

/// Half-precision activations are normalised in f32; f32 and f64 stay as they are.
fn statistics_dtype(dtype: DType) -> DType {
    match dtype {
        DType::F16 | DType::BF16 => DType::F32,
        other => other,
    }
}

impl<B: Backend> BatchNorm2d<B> {
    /// `[N, C, H, W] -> [N, C, H, W]`, in the input's dtype.
    ///
    /// Works on a 2-D view whose rows are (parts of) channel planes: Flex broadcasts a
    /// `[rows, 1]` operand across rows an order of magnitude faster than a `[1, C, 1, 1]` one
    /// across a 4-D tensor, and this layer runs after every convolution.
    pub fn forward(&self, input: Tensor<B, 4>) -> Tensor<B, 4> {
        let io_dtype = input.dtype();
        let dtype = statistics_dtype(io_dtype);
        let dims = input.dims();
        let input = input.cast(dtype);
        if B::ad_enabled(&input.device()) {
            // segburn's fused kernel where it runs (CPU training in f32/f64).
            let (weight, bias) = (self.weight.val(), self.bias.val());
            if let Some((out, mean, var)) =
                kernels::batch_norm_train(input.clone(), weight, bias, self.eps)
            {
                let [n, _, h, w] = dims;
                self.update_running_statistics(mean, var, n * h * w);
                return out.cast(io_dtype);
            }
        }
        let blocks = Blocks::new(dims);
        let rows = blocks.view(input);
        let out = if B::ad_enabled(&rows.device()) {
            let weight = self.weight.val().cast(dtype);
            let bias = self.bias.val().cast(dtype);
            // (x − mean) · scale + bias: the backward then sums g·(x − mean) directly instead
            // of Σ g·x − mean·Σ g.
            let (centered, var) = self.batch_statistics(rows, blocks);
            let scale = weight / (var + self.eps).sqrt();
            centered * blocks.column(scale) + blocks.column(bias)
        } else {
            let (scale, shift) = self.inference_affine(dtype, &rows.device());
            rows * blocks.column(scale) + blocks.column(shift)
        };
        out.reshape(dims).cast(io_dtype)
    }

    /// The per-channel `(scale, shift)` of inference, in `dtype`: `y = x · scale + shift` with
    /// the running statistics.
    pub fn inference_affine(
        &self,
        dtype: DType,
        device: &B::Device,
    ) -> (Tensor<B, 1>, Tensor<B, 1>) {
        let mean = self.running_mean.value().to_device(device).cast(dtype);
        let var = self.running_var.value().to_device(device).cast(dtype);
        let weight = self.weight.val().to_device(device).cast(dtype);
        let bias = self.bias.val().to_device(device).cast(dtype);
        let scale = weight / (var + self.eps).sqrt();
        let shift = bias - mean * scale.clone();
        (scale, shift)
    }

    /// The rows minus their channel's batch mean, and the biased batch variance (used to
    /// normalise); updates the running statistics with the unbiased variance, as PyTorch does.
    fn batch_statistics(&self, rows: Tensor<B, 2>, blocks: Blocks) -> (Tensor<B, 2>, Tensor<B, 1>) {
        let count = blocks.n * blocks.a * blocks.len;
        let mean = blocks.channel_sum(rows.clone()) / count as f64;
        let centered = rows - blocks.column(mean.clone());
        let var = blocks.channel_sum(centered.clone().square()) / count as f64;
        self.update_running_statistics(mean, var.clone(), count);
        (centered, var)
    }

    /// Folds one batch's mean and biased variance (over `count` values per channel) into the
    /// running statistics with the unbiased variance, as PyTorch does.
    fn update_running_statistics(&self, mean: Tensor<B, 1>, var: Tensor<B, 1>, count: usize) {
        let device = mean.device();
        let m = self.momentum;
        let bessel = if count > 1 {
            count as f64 / (count as f64 - 1.0)
        } else {
            1.0
        };
        let running_mean = self.running_mean.value_sync().to_device(&device);
        let running_var = self.running_var.value_sync().to_device(&device);
        let batch_mean = mean.detach().cast(running_mean.dtype());
        let batch_var = var.detach().cast(running_var.dtype()) * bessel;
        self.running_mean
            .update((running_mean * (1.0 - m) + batch_mean * m).detach());
        self.running_var
            .update((running_var * (1.0 - m) + batch_var * m).detach());
        let tracked = self.num_batches_tracked.value_sync().to_device(&device);
        self.num_batches_tracked.update((tracked + 1.0).detach());
        // Burn keeps an update pending (per thread) until the next read; fold it in now so that
        // exports and checkpoints taken right after a step see the new statistics.
        let _ = self.running_mean.value_sync();
        let _ = self.running_var.value_sync();
        let _ = self.num_batches_tracked.value_sync();
    }
}
