//! BatchNorm2d with PyTorch's semantics.
//!
//! Burn's own `BatchNorm` updates the running variance with the biased batch variance; PyTorch
//! (and so every official checkpoint) uses the unbiased one, and also counts
//! `num_batches_tracked`. Field names are PyTorch's, so keys need no translation.
//!
//! Mode follows Burn's convention: on an autodiff backend the layer normalises with batch
//! statistics and updates the running ones (PyTorch's `train()`); on a plain backend
//! (`model.valid()`) it uses the running statistics (`eval()`).

use burn::config::Config;
use burn::module::{Module, Param, RunningState};
use burn::tensor::{backend::Backend, DType, Tensor};

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

/// A per-channel vector `[C]` as a column `[N·C, 1]` matching the `[N·C, H·W]` view.
fn per_row<B: Backend>(values: Tensor<B, 1>, n: usize) -> Tensor<B, 2> {
    let [c] = values.dims();
    let column = values.reshape([c, 1]);
    if n == 1 {
        column
    } else {
        // `cat` rather than `repeat_dim`: Burn 0.21's autodiff gets repeat_dim's backward wrong
        // here (checked against the f64 gradient fixtures).
        Tensor::cat(vec![column; n], 0)
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
    /// Works on the `[N·C, H·W]` view: Flex broadcasts a `[rows, 1]` operand across rows an
    /// order of magnitude faster than a `[1, C, 1, 1]` one across a 4-D tensor, and this layer
    /// runs after every convolution.
    pub fn forward(&self, input: Tensor<B, 4>) -> Tensor<B, 4> {
        let io_dtype = input.dtype();
        let dtype = statistics_dtype(io_dtype);
        let [n, c, h, w] = input.dims();
        let rows = input.cast(dtype).reshape([n * c, h * w]);
        let (mean, var) = if B::ad_enabled(&rows.device()) {
            self.batch_statistics(rows.clone(), [n, c, h, w])
        } else {
            let device = rows.device();
            (
                self.running_mean.value().to_device(&device).cast(dtype),
                self.running_var.value().to_device(&device).cast(dtype),
            )
        };
        let scale = self.weight.val().cast(dtype) / (var + self.eps).sqrt();
        let shift = self.bias.val().cast(dtype) - mean * scale.clone();
        let out = rows * per_row(scale, n) + per_row(shift, n);
        out.reshape([n, c, h, w]).cast(io_dtype)
    }

    /// Batch mean and biased variance (used to normalise) of `[N·C, H·W]` rows; updates the
    /// running statistics with the unbiased variance, as PyTorch does.
    fn batch_statistics(
        &self,
        rows: Tensor<B, 2>,
        dims: [usize; 4],
    ) -> (Tensor<B, 1>, Tensor<B, 1>) {
        let [n, c, h, w] = dims;
        let count = n * h * w;
        let per_channel_sum =
            |t: Tensor<B, 2>| t.sum_dim(1).reshape([n, c]).sum_dim(0).reshape([c]);
        let mean = per_channel_sum(rows.clone()) / count as f64;
        let centered = rows - per_row(mean.clone(), n);
        let var = per_channel_sum(centered.square()) / count as f64;

        let device = mean.device();
        let m = self.momentum;
        let bessel = if count > 1 {
            count as f64 / (count as f64 - 1.0)
        } else {
            1.0
        };
        let running_mean = self.running_mean.value_sync().to_device(&device);
        let running_var = self.running_var.value_sync().to_device(&device);
        let batch_mean = mean.clone().detach().cast(running_mean.dtype());
        let batch_var = var.clone().detach().cast(running_var.dtype()) * bessel;
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
        (mean, var)
    }
}
