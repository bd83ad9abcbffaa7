//! The pyramid pooling modules on the I branch's 1/64 feature: PAPPM (parallel, S/M) and DAPPM
//! (hierarchical, L). Both pool at four scales, project with pre-activation 1×1 convs, upsample
//! back (bilinear, align_corners=false) and fuse.

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::tensor::activation::relu;
use burn::tensor::module::{adaptive_avg_pool2d, avg_pool2d};
use burn::tensor::{backend::Backend, Tensor};

use crate::nn::{
    conv2d_in_input_dtype, pidnet_conv, resize_bilinear, BatchNorm2d, BatchNorm2dConfig,
    PreActConv, PreActConvConfig,
};

/// `Sequential(pool, BN, ReLU, Conv1x1)`: keys `scaleK.1.*` (BN) and `scaleK.3.weight`.
#[derive(Module, Debug)]
pub struct PooledBranch<B: Backend> {
    pub bn: BatchNorm2d<B>,
    pub conv: Conv2d<B>,
    /// `AvgPool2d(kernel, stride=kernel/2, padding=kernel/2)`, or global pooling when 0.
    pub pool_kernel: usize,
}

impl<B: Backend> PooledBranch<B> {
    fn new(inplanes: usize, branch_planes: usize, pool_kernel: usize, device: &B::Device) -> Self {
        Self {
            bn: BatchNorm2dConfig::new(inplanes).init(device),
            conv: pidnet_conv(inplanes, branch_planes, 1, 1, 1, false, device),
            pool_kernel,
        }
    }

    fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let pooled = match self.pool_kernel {
            0 => adaptive_avg_pool2d(x, [1, 1]),
            // The official pools (5,2,2), (9,4,4), (17,8,8) count the zero padding in the
            // average (PyTorch's default count_include_pad=True) and floor the output size.
            k => avg_pool2d(x, [k, k], [k / 2, k / 2], [k / 2, k / 2], true, false),
        };
        conv2d_in_input_dtype(&self.conv, relu(self.bn.forward(pooled)))
    }
}

/// The four pooled branches every PPM has: kernels 5, 9, 17 and global.
fn pooled_branches<B: Backend>(
    inplanes: usize,
    branch_planes: usize,
    device: &B::Device,
) -> [PooledBranch<B>; 4] {
    [5, 9, 17, 0].map(|k| PooledBranch::new(inplanes, branch_planes, k, device))
}

/// Parallel Aggregation PPM (PIDNet-S/M).
#[derive(Module, Debug)]
pub struct Pappm<B: Backend> {
    pub scale1: PooledBranch<B>,
    pub scale2: PooledBranch<B>,
    pub scale3: PooledBranch<B>,
    pub scale4: PooledBranch<B>,
    pub scale0: PreActConv<B>,
    pub scale_process: PreActConv<B>,
    pub compression: PreActConv<B>,
    pub shortcut: PreActConv<B>,
}

impl<B: Backend> Pappm<B> {
    pub fn new(
        inplanes: usize,
        branch_planes: usize,
        outplanes: usize,
        device: &B::Device,
    ) -> Self {
        let [scale1, scale2, scale3, scale4] = pooled_branches(inplanes, branch_planes, device);
        let bp = branch_planes;
        Self {
            scale1,
            scale2,
            scale3,
            scale4,
            scale0: PreActConvConfig::new(inplanes, bp, 1).init(device),
            // One grouped 3×3 conv processes the four branches independently (groups = 4).
            scale_process: PreActConvConfig::new(bp * 4, bp * 4, 3)
                .with_groups(4)
                .init(device),
            compression: PreActConvConfig::new(bp * 5, outplanes, 1).init(device),
            shortcut: PreActConvConfig::new(inplanes, outplanes, 1).init(device),
        }
    }

    /// `[N, inplanes, h, w] -> [N, outplanes, h, w]`
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let [_, _, h, w] = x.dims();
        let base = self.scale0.forward(x.clone());
        let branches = [&self.scale1, &self.scale2, &self.scale3, &self.scale4]
            .map(|branch| resize_bilinear(branch.forward(x.clone()), [h, w]) + base.clone());
        let processed = self
            .scale_process
            .forward(Tensor::cat(branches.to_vec(), 1));
        self.compression
            .forward(Tensor::cat(vec![base, processed], 1))
            + self.shortcut.forward(x)
    }
}

/// Deep Aggregation PPM (PIDNet-L): each scale is refined after adding the previous one.
#[derive(Module, Debug)]
pub struct Dappm<B: Backend> {
    pub scale1: PooledBranch<B>,
    pub scale2: PooledBranch<B>,
    pub scale3: PooledBranch<B>,
    pub scale4: PooledBranch<B>,
    pub scale0: PreActConv<B>,
    pub process1: PreActConv<B>,
    pub process2: PreActConv<B>,
    pub process3: PreActConv<B>,
    pub process4: PreActConv<B>,
    pub compression: PreActConv<B>,
    pub shortcut: PreActConv<B>,
}

impl<B: Backend> Dappm<B> {
    pub fn new(
        inplanes: usize,
        branch_planes: usize,
        outplanes: usize,
        device: &B::Device,
    ) -> Self {
        let [scale1, scale2, scale3, scale4] = pooled_branches(inplanes, branch_planes, device);
        let bp = branch_planes;
        let process = || PreActConvConfig::new(bp, bp, 3).init(device);
        Self {
            scale1,
            scale2,
            scale3,
            scale4,
            scale0: PreActConvConfig::new(inplanes, bp, 1).init(device),
            process1: process(),
            process2: process(),
            process3: process(),
            process4: process(),
            compression: PreActConvConfig::new(bp * 5, outplanes, 1).init(device),
            shortcut: PreActConvConfig::new(inplanes, outplanes, 1).init(device),
        }
    }

    /// `[N, inplanes, h, w] -> [N, outplanes, h, w]`
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let [_, _, h, w] = x.dims();
        let mut levels = vec![self.scale0.forward(x.clone())];
        let steps = [
            (&self.scale1, &self.process1),
            (&self.scale2, &self.process2),
            (&self.scale3, &self.process3),
            (&self.scale4, &self.process4),
        ];
        for (scale, process) in steps {
            let previous = levels[levels.len() - 1].clone();
            let upsampled = resize_bilinear(scale.forward(x.clone()), [h, w]);
            levels.push(process.forward(upsampled + previous));
        }
        self.compression.forward(Tensor::cat(levels, 1)) + self.shortcut.forward(x)
    }
}

/// The pyramid pooling module a PIDNet size uses (official attribute `spp`).
// One per model, built once: the size difference between variants costs nothing, and Burn's
// Module derive does not see through a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum PyramidPooling<B: Backend> {
    Parallel(Pappm<B>),
    Deep(Dappm<B>),
}

impl<B: Backend> PyramidPooling<B> {
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        match self {
            PyramidPooling::Parallel(ppm) => ppm.forward(x),
            PyramidPooling::Deep(ppm) => ppm.forward(x),
        }
    }
}
