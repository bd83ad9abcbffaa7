//! PIDNet: a three-branch real-time segmentation network inspired by PID controllers
//! (Xu, Xiong, Bhattacharyya, CVPR 2023, <https://arxiv.org/abs/2206.02066>).
//!
//! The P (proportional, detail) branch keeps 1/8 resolution, the I (integral, context) branch
//! goes down to 1/64, and the D (derivative, boundary) branch learns edges. `forward` follows
//! the official `models/pidnet.py` step by step, including its in-place ReLU aliasing.

use burn::module::Module;
use burn::tensor::activation::relu;
use burn::tensor::{backend::Backend, Tensor};

use super::config::{PidNetConfig, PidNetSize};
use super::fusion::{Bag, Fusion, LightBag};
use super::pag::PagFm;
use super::pyramid_pooling::{Dappm, Pappm, PyramidPooling};
use super::residual::{
    basic_layer, bottleneck_layer, forward_basic, forward_bottleneck, BasicBlock, Bottleneck,
};
use super::segment_head::SegmentHead;
use super::stem::Stem;
use crate::nn::{resize_bilinear, ConvBn, ConvBnConfig};

/// Why a forward pass was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PidNetError {
    #[error(
        "PIDNet needs an input whose height and width are multiples of 8, got {height}×{width}; \
         crop or pad the image (e.g. to {rounded_height}×{rounded_width})"
    )]
    InputSize {
        height: usize,
        width: usize,
        rounded_height: usize,
        rounded_width: usize,
    },
    #[error("PIDNet takes RGB input [N, 3, H, W], got {channels} channels")]
    Channels { channels: usize },
    #[error("the auxiliary heads were not built (augment = false); use `infer` for inference")]
    NoAuxHeads,
}

/// The D branch's second stage: a Bottleneck layer in S/M, a single BasicBlock in L.
// One per model, built once: the size difference between variants costs nothing, and Burn's
// Module derive does not see through a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum DetailStage<B: Backend> {
    Bottleneck(Vec<Bottleneck<B>>),
    Basic(BasicBlock<B>),
}

impl<B: Backend> DetailStage<B> {
    fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        match self {
            DetailStage::Bottleneck(layer) => forward_bottleneck(layer, x),
            DetailStage::Basic(block) => block.forward(x),
        }
    }
}

/// The three outputs of the training graph, all at 1/8 of the input resolution.
#[derive(Debug, Clone)]
pub struct PidNetOutput<B: Backend> {
    /// Auxiliary P-branch logits `[N, K, H/8, W/8]`.
    pub p_aux: Tensor<B, 4>,
    /// Main logits `[N, K, H/8, W/8]`.
    pub main: Tensor<B, 4>,
    /// Boundary logits `[N, 1, H/8, W/8]`.
    pub boundary: Tensor<B, 4>,
}

#[derive(Module, Debug)]
pub struct PidNet<B: Backend> {
    pub conv1: Stem<B>,
    pub layer1: Vec<BasicBlock<B>>,
    pub layer2: Vec<BasicBlock<B>>,
    pub layer3: Vec<BasicBlock<B>>,
    pub layer4: Vec<BasicBlock<B>>,
    pub layer5: Vec<Bottleneck<B>>,
    pub compression3: ConvBn<B>,
    pub compression4: ConvBn<B>,
    pub pag3: PagFm<B>,
    pub pag4: PagFm<B>,
    pub layer3_: Vec<BasicBlock<B>>,
    pub layer4_: Vec<BasicBlock<B>>,
    pub layer5_: Vec<Bottleneck<B>>,
    pub layer3_d: BasicBlock<B>,
    pub layer4_d: DetailStage<B>,
    pub diff3: ConvBn<B>,
    pub diff4: ConvBn<B>,
    pub spp: PyramidPooling<B>,
    pub dfm: Fusion<B>,
    pub layer5_d: Vec<Bottleneck<B>>,
    pub seghead_p: Option<SegmentHead<B>>,
    pub seghead_d: Option<SegmentHead<B>>,
    pub final_layer: SegmentHead<B>,
    pub num_classes: usize,
}

impl PidNetConfig {
    /// Builds the network with the official initialisation (Kaiming-normal convs, BN 1/0).
    pub fn init<B: Backend>(&self, device: &B::Device) -> PidNet<B> {
        let p = self.size.preset();
        let c = p.planes;
        let large = self.size == PidNetSize::L;
        // `_make_single_layer` builds one block with no_relu = True.
        let single = |inplanes, planes| BasicBlock::new(inplanes, planes, 1, true, device);
        PidNet {
            conv1: Stem::new(c, device),
            layer1: basic_layer(c, c, p.m, 1, device),
            layer2: basic_layer(c, 2 * c, p.m, 2, device),
            layer3: basic_layer(2 * c, 4 * c, p.n, 2, device),
            layer4: basic_layer(4 * c, 8 * c, p.n, 2, device),
            layer5: bottleneck_layer(8 * c, 8 * c, 2, 2, device),
            compression3: ConvBnConfig::new(4 * c, 2 * c, 1).init(device),
            compression4: ConvBnConfig::new(8 * c, 2 * c, 1).init(device),
            pag3: PagFm::new(2 * c, c, device),
            pag4: PagFm::new(2 * c, c, device),
            layer3_: basic_layer(2 * c, 2 * c, p.m, 1, device),
            layer4_: basic_layer(2 * c, 2 * c, p.m, 1, device),
            layer5_: bottleneck_layer(2 * c, 2 * c, 1, 1, device),
            layer3_d: if large {
                single(2 * c, 2 * c)
            } else {
                single(2 * c, c)
            },
            layer4_d: if large {
                DetailStage::Basic(single(2 * c, 2 * c))
            } else {
                DetailStage::Bottleneck(bottleneck_layer(c, c, 1, 1, device))
            },
            diff3: ConvBnConfig::new(4 * c, if large { 2 * c } else { c }, 3).init(device),
            diff4: ConvBnConfig::new(8 * c, 2 * c, 3).init(device),
            spp: if large {
                PyramidPooling::Deep(Dappm::new(16 * c, p.ppm_planes, 4 * c, device))
            } else {
                PyramidPooling::Parallel(Pappm::new(16 * c, p.ppm_planes, 4 * c, device))
            },
            dfm: if large {
                Fusion::Full(Bag::new(4 * c, 4 * c, device))
            } else {
                Fusion::Light(LightBag::new(4 * c, 4 * c, device))
            },
            layer5_d: bottleneck_layer(2 * c, 2 * c, 1, 1, device),
            seghead_p: self
                .augment
                .then(|| SegmentHead::new(2 * c, p.head_planes, self.num_classes, device)),
            seghead_d: self.augment.then(|| SegmentHead::new(2 * c, c, 1, device)),
            final_layer: SegmentHead::new(4 * c, p.head_planes, self.num_classes, device),
            num_classes: self.num_classes,
        }
    }
}

/// Receives named intermediate features (the official top-level children's outputs).
pub type Tap<'a, B> = &'a mut dyn FnMut(&'static str, &Tensor<B, 4>);

impl<B: Backend> PidNet<B> {
    /// Training graph: `[N, 3, H, W] -> p_aux, main, boundary` at `[H/8, W/8]`.
    pub fn forward(&self, x: Tensor<B, 4>) -> Result<PidNetOutput<B>, PidNetError> {
        self.forward_tapped(x, &mut |_, _| {})
    }

    /// Inference graph: main logits only, `[N, 3, H, W] -> [N, K, H/8, W/8]`, without the cost
    /// of the auxiliary heads.
    pub fn infer(&self, x: Tensor<B, 4>) -> Result<Tensor<B, 4>, PidNetError> {
        check_input(&x)?;
        Ok(self.run(x, &mut |_, _| {}).0)
    }

    /// [`Self::forward`], handing every official top-level child's output to `tap` (used by the
    /// parity tests so that a mismatch names its layer).
    pub fn forward_tapped(
        &self,
        x: Tensor<B, 4>,
        tap: Tap<'_, B>,
    ) -> Result<PidNetOutput<B>, PidNetError> {
        check_input(&x)?;
        let (Some(head_p), Some(head_d)) = (&self.seghead_p, &self.seghead_d) else {
            return Err(PidNetError::NoAuxHeads);
        };
        let (main, p_before_relu, d_before_relu) = self.run(x, tap);
        // The official model keeps `temp_p = x_` / `temp_d = x_d` as aliases; the next in-place
        // ReLU on x_ / x_d rewrites them, so the aux heads see the ReLU'd features.
        let p_aux = head_p.forward(relu(p_before_relu));
        tap("seghead_p", &p_aux);
        let boundary = head_d.forward(relu(d_before_relu));
        tap("seghead_d", &boundary);
        Ok(PidNetOutput {
            p_aux,
            main,
            boundary,
        })
    }

    /// The shared trunk; returns the main logits and the two features the aux heads read.
    fn run(&self, x: Tensor<B, 4>, tap: Tap<'_, B>) -> (Tensor<B, 4>, Tensor<B, 4>, Tensor<B, 4>) {
        let [_, _, height, width] = x.dims();
        let size8 = [height / 8, width / 8];
        let mut t = |name: &'static str, value: Tensor<B, 4>| {
            tap(name, &value);
            value
        };

        let x = t("conv1", self.conv1.forward(x));
        let x = t("layer1", forward_basic(&self.layer1, x));
        let x = relu(t("layer2", forward_basic(&self.layer2, relu(x))));
        let x_p = t("layer3_", forward_basic(&self.layer3_, x.clone()));
        let x_d = t("layer3_d", self.layer3_d.forward(x.clone()));
        let x = relu(t("layer3", forward_basic(&self.layer3, x)));

        let context = t("compression3", self.compression3.forward(x.clone()));
        let x_p = t("pag3", self.pag3.forward(x_p, context));
        let x_d = x_d + resize_bilinear(t("diff3", self.diff3.forward(x.clone())), size8);
        let p_before_relu = x_p.clone();

        let x = relu(t("layer4", forward_basic(&self.layer4, x)));
        let x_p = t("layer4_", forward_basic(&self.layer4_, relu(x_p)));
        let x_d = t("layer4_d", self.layer4_d.forward(relu(x_d)));

        let context = t("compression4", self.compression4.forward(x.clone()));
        let x_p = t("pag4", self.pag4.forward(x_p, context));
        let x_d = x_d + resize_bilinear(t("diff4", self.diff4.forward(x.clone())), size8);
        let d_before_relu = x_d.clone();

        let x_p = t("layer5_", forward_bottleneck(&self.layer5_, relu(x_p)));
        let x_d = t("layer5_d", forward_bottleneck(&self.layer5_d, relu(x_d)));
        // layer5 ends without ReLU and feeds the PPM directly.
        let x = t("layer5", forward_bottleneck(&self.layer5, x));
        let x = resize_bilinear(t("spp", self.spp.forward(x)), size8);

        let fused = t("dfm", self.dfm.forward(x_p, x, x_d));
        let main = t("final_layer", self.final_layer.forward(fused));
        (main, p_before_relu, d_before_relu)
    }
}

fn check_input<B: Backend>(x: &Tensor<B, 4>) -> Result<(), PidNetError> {
    let [_, channels, height, width] = x.dims();
    if channels != 3 {
        return Err(PidNetError::Channels { channels });
    }
    if height % 8 != 0 || width % 8 != 0 || height == 0 || width == 0 {
        return Err(PidNetError::InputSize {
            height,
            width,
            rounded_height: height.div_ceil(8).max(1) * 8,
            rounded_width: width.div_ceil(8).max(1) * 8,
        });
    }
    Ok(())
}
