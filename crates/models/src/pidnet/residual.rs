//! The two residual blocks of PIDNet (ResNet's, with the official `no_relu` switch) and the
//! `_make_layer` / `_make_single_layer` rules that stack them.

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::tensor::{backend::Backend, Tensor};

use crate::nn::pidnet_conv;
use crate::nn::{conv_then_batch_norm_then, BatchNorm2d, BatchNorm2dConfig, ConvBn, ConvBnConfig};
use segburn_kernels::AfterConv;

/// `conv3x3 → BN → ReLU → conv3x3 → BN`, plus the shortcut; expansion 1.
#[derive(Module, Debug)]
pub struct BasicBlock<B: Backend> {
    pub conv1: Conv2d<B>,
    pub bn1: BatchNorm2d<B>,
    pub conv2: Conv2d<B>,
    pub bn2: BatchNorm2d<B>,
    pub downsample: Option<ConvBn<B>>,
    /// The official model leaves the ReLU off the last block of a layer.
    pub no_relu: bool,
}

impl<B: Backend> BasicBlock<B> {
    pub const EXPANSION: usize = 1;

    pub fn new(
        inplanes: usize,
        planes: usize,
        stride: usize,
        no_relu: bool,
        device: &B::Device,
    ) -> Self {
        Self {
            conv1: pidnet_conv(inplanes, planes, 3, stride, 1, false, device),
            bn1: BatchNorm2dConfig::new(planes).init(device),
            conv2: pidnet_conv(planes, planes, 3, 1, 1, false, device),
            bn2: BatchNorm2dConfig::new(planes).init(device),
            downsample: shortcut_projection(inplanes, planes * Self::EXPANSION, stride, device),
            no_relu,
        }
    }

    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let out = conv_then_batch_norm_then(&self.conv1, &self.bn1, x.clone(), AfterConv::relu());
        let after = shortcut(x, self.downsample.as_ref(), self.no_relu);
        conv_then_batch_norm_then(&self.conv2, &self.bn2, out, after)
    }
}

/// `conv1x1 → BN → ReLU → conv3x3(stride) → BN → ReLU → conv1x1 → BN`, plus the shortcut;
/// expansion 2. Every Bottleneck in PIDNet ends without ReLU.
#[derive(Module, Debug)]
pub struct Bottleneck<B: Backend> {
    pub conv1: Conv2d<B>,
    pub bn1: BatchNorm2d<B>,
    pub conv2: Conv2d<B>,
    pub bn2: BatchNorm2d<B>,
    pub conv3: Conv2d<B>,
    pub bn3: BatchNorm2d<B>,
    pub downsample: Option<ConvBn<B>>,
    pub no_relu: bool,
}

impl<B: Backend> Bottleneck<B> {
    pub const EXPANSION: usize = 2;

    pub fn new(
        inplanes: usize,
        planes: usize,
        stride: usize,
        no_relu: bool,
        device: &B::Device,
    ) -> Self {
        let out = planes * Self::EXPANSION;
        Self {
            conv1: pidnet_conv(inplanes, planes, 1, 1, 1, false, device),
            bn1: BatchNorm2dConfig::new(planes).init(device),
            conv2: pidnet_conv(planes, planes, 3, stride, 1, false, device),
            bn2: BatchNorm2dConfig::new(planes).init(device),
            conv3: pidnet_conv(planes, out, 1, 1, 1, false, device),
            bn3: BatchNorm2dConfig::new(out).init(device),
            downsample: shortcut_projection(inplanes, out, stride, device),
            no_relu,
        }
    }

    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let out = conv_then_batch_norm_then(&self.conv1, &self.bn1, x.clone(), AfterConv::relu());
        let out = conv_then_batch_norm_then(&self.conv2, &self.bn2, out, AfterConv::relu());
        let after = shortcut(x, self.downsample.as_ref(), self.no_relu);
        conv_then_batch_norm_then(&self.conv3, &self.bn3, out, after)
    }
}

/// What follows a block's last convolution and norm: the shortcut of `x` added, then ReLU
/// unless the official model leaves it off (in CPU inference, both in the convolution's write).
fn shortcut<B: Backend>(
    x: Tensor<B, 4>,
    projection: Option<&ConvBn<B>>,
    no_relu: bool,
) -> AfterConv<B> {
    let identity = match projection {
        Some(projection) => projection.forward(x),
        None => x,
    };
    AfterConv {
        residual: Some(identity),
        relu: !no_relu,
    }
}

/// A 1×1 projection when the shortcut changes stride or width (official `_make_layer` rule).
fn shortcut_projection<B: Backend>(
    inplanes: usize,
    outplanes: usize,
    stride: usize,
    device: &B::Device,
) -> Option<ConvBn<B>> {
    (stride != 1 || inplanes != outplanes).then(|| {
        ConvBnConfig::new(inplanes, outplanes, 1)
            .with_stride(stride)
            .init(device)
    })
}

/// Official `_make_layer(BasicBlock, …)`: ReLU after every block but the last.
pub fn basic_layer<B: Backend>(
    inplanes: usize,
    planes: usize,
    blocks: usize,
    stride: usize,
    device: &B::Device,
) -> Vec<BasicBlock<B>> {
    (0..blocks)
        .map(|i| {
            let (input, s) = if i == 0 {
                (inplanes, stride)
            } else {
                (planes, 1)
            };
            BasicBlock::new(input, planes, s, i + 1 == blocks, device)
        })
        .collect()
}

/// Official `_make_layer(Bottleneck, …)`: block 0 keeps Bottleneck's default `no_relu=True`,
/// the last is forced to `no_relu=True`, middle ones (none in PIDNet) get ReLU.
pub fn bottleneck_layer<B: Backend>(
    inplanes: usize,
    planes: usize,
    blocks: usize,
    stride: usize,
    device: &B::Device,
) -> Vec<Bottleneck<B>> {
    let expanded = planes * Bottleneck::<B>::EXPANSION;
    (0..blocks)
        .map(|i| {
            let (input, s) = if i == 0 {
                (inplanes, stride)
            } else {
                (expanded, 1)
            };
            let no_relu = i == 0 || i + 1 == blocks;
            Bottleneck::new(input, planes, s, no_relu, device)
        })
        .collect()
}

/// Runs a stack of blocks in order.
pub fn forward_basic<B: Backend>(layer: &[BasicBlock<B>], x: Tensor<B, 4>) -> Tensor<B, 4> {
    layer.iter().fold(x, |x, block| block.forward(x))
}

/// Runs a stack of bottlenecks in order.
pub fn forward_bottleneck<B: Backend>(layer: &[Bottleneck<B>], x: Tensor<B, 4>) -> Tensor<B, 4> {
    layer.iter().fold(x, |x, block| block.forward(x))
}
