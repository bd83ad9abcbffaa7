//! SAM 2's `FpnNeck` (`sam2/modeling/backbones/image_encoder.py`) and the sine position
//! encoding of its levels (`PositionEmbeddingSine`).
//!
//! Each trunk level gets a 1×1 lateral convolution to `d_model` channels. `convs.0` belongs to
//! the *lowest* resolution (stride 32). Only level 2 (stride 16) receives the top-down path
//! (nearest 2× of level 3); levels 0 and 1 are lateral only. SAM 2.1 then drops level 3.

use std::f64::consts::PI;

use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::tensor::module::interpolate;
use burn::tensor::ops::{InterpolateMode, InterpolateOptions};
use burn::tensor::{backend::Backend, Tensor, TensorData};

use crate::nn::conv2d_in_input_dtype;

/// Configuration of an [`FpnNeck`].
#[derive(Config, Debug)]
pub struct FpnNeckConfig {
    /// Output channels of every level.
    #[config(default = 256)]
    pub d_model: usize,
    /// Trunk channels, lowest resolution first (the trunk's stage widths reversed).
    pub backbone_channel_list: Vec<usize>,
    /// Levels (by index into the trunk outputs, 0 = stride 4) that receive the top-down path.
    #[config(default = "vec![2, 3]")]
    pub fpn_top_down_levels: Vec<usize>,
}

/// `convs.{j}.conv` in the official state dict.
#[derive(Module, Debug)]
pub struct LateralConv<B: Backend> {
    /// `Conv2d(backbone_channel_list[j] → d_model, 1×1)`.
    pub conv: Conv2d<B>,
}

/// The FPN neck.
#[derive(Module, Debug)]
pub struct FpnNeck<B: Backend> {
    /// Lateral convolutions, lowest resolution first.
    pub convs: Vec<LateralConv<B>>,
    top_down_levels: Vec<usize>,
}

impl FpnNeckConfig {
    /// Builds the neck with PyTorch's default convolution initialisation.
    pub fn init<B: Backend>(&self, device: &B::Device) -> FpnNeck<B> {
        FpnNeck {
            convs: self
                .backbone_channel_list
                .iter()
                .map(|&channels| LateralConv {
                    conv: Conv2dConfig::new([channels, self.d_model], [1, 1]).init(device),
                })
                .collect(),
            top_down_levels: self.fpn_top_down_levels.clone(),
        }
    }
}

impl<B: Backend> FpnNeck<B> {
    /// The trunk's levels (high to low resolution) -> `d_model`-channel levels, same order and
    /// sizes, all of them (the caller drops the ones it does not use).
    pub fn forward(&self, levels: Vec<Tensor<B, 4>>) -> Vec<Tensor<B, 4>> {
        let n = self.convs.len();
        let mut outputs: Vec<Option<Tensor<B, 4>>> = vec![None; levels.len()];
        let mut previous: Option<Tensor<B, 4>> = None;
        for (i, level) in levels.into_iter().enumerate().rev() {
            let lateral = conv2d_in_input_dtype(&self.convs[n - 1 - i].conv, level);
            let merged = match previous.take() {
                Some(top) if self.top_down_levels.contains(&i) => {
                    let [_, _, h, w] = lateral.dims();
                    let options = InterpolateOptions::new(InterpolateMode::Nearest);
                    lateral + interpolate(top, [h, w], options)
                }
                _ => lateral,
            };
            outputs[i] = Some(merged.clone());
            previous = Some(merged);
        }
        outputs.into_iter().flatten().collect()
    }
}

/// `PositionEmbeddingSine(d_model, temperature 10000, normalize, scale 2π)` of an `h × w` map:
/// `[d_model, h, w]`, y channels first, sin/cos interleaved. It depends on the size only.
pub fn sine_position_encoding<B: Backend>(
    d_model: usize,
    [h, w]: [usize; 2],
    device: &B::Device,
) -> Tensor<B, 3> {
    let half = d_model / 2;
    let scale = 2.0 * PI;
    let dim_t: Vec<f64> = (0..half)
        .map(|k| 10000f64.powf((2 * (k / 2)) as f64 / half as f64))
        .collect();
    let mut values = vec![0f32; d_model * h * w];
    // Channel k of the y half uses row i, of the x half column j.
    let mut fill = |offset: usize, position: &dyn Fn(usize, usize) -> f64| {
        for (k, divisor) in dim_t.iter().enumerate() {
            for i in 0..h {
                for j in 0..w {
                    let angle = position(i, j) / divisor;
                    let value = if k % 2 == 0 { angle.sin() } else { angle.cos() };
                    values[((offset + k) * h + i) * w + j] = value as f32;
                }
            }
        }
    };
    fill(0, &|i, _| (i + 1) as f64 / (h as f64 + 1e-6) * scale);
    fill(half, &|_, j| (j + 1) as f64 / (w as f64 + 1e-6) * scale);
    Tensor::from_data(TensorData::new(values, [d_model, h, w]), device)
}
