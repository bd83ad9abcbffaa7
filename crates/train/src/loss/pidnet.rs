//! The PIDNet training loss: the official `FullModel` stack (utils/utils.py).
//!
//! ```text
//! total = 0.4 · CE(p_aux)                      aux, official all-pixel mean (see AuxReduction)
//!       + 1.0 · OHEM(main, labels)             main
//!       + 20  · weighted_bce(boundary, bd_gt)  boundary
//!       + 1.0 · OHEM(main, bd_label)           bas: labels where sigmoid(boundary) > 0.8
//! ```
//! The official `loss_s` ("Semantic loss" in its logs) is `aux + main`, `loss_b` is `boundary`
//! and `loss_sb` ("SB loss") is `bas`. Outputs at 1/8 resolution are first upsampled to the
//! label size, bilinear with `align_corners = true` (the *loss* uses `config.MODEL.ALIGN_CORNERS`
//! = true, unlike the upsampling inside the network).

use burn::tensor::{backend::Backend, Int, Tensor};
use segburn_models::nn::resize_bilinear_align_corners;

use super::bas::gate_targets;
use super::boundary::weighted_bce;
use super::config::{AuxReduction, PidNetLossConfig};
use super::cross_entropy::{mean_over_all_pixels, shifted_target_log_probs, weighted_mean};
use super::error::LossError;
use super::ohem::ohem_from_log_probs;
use super::precision::{download_f32, to_loss_precision};
use super::target::{check_class_weights, PixelTargets};

/// Each weighted term of the PIDNet loss (shape `[1]`, differentiable) and their sum.
#[derive(Debug, Clone)]
pub struct PidNetLossOutput<B: Backend> {
    /// `balance_weights[0] · CE(p_aux)`.
    pub aux: Tensor<B, 1>,
    /// `balance_weights[1] · OHEM(main, labels)`.
    pub main: Tensor<B, 1>,
    /// `boundary_coeff · weighted_bce(boundary, bd_gt)`.
    pub boundary: Tensor<B, 1>,
    /// `bas_weight · OHEM(main, boundary-gated labels)`.
    pub bas: Tensor<B, 1>,
    /// The objective to call `backward` on.
    pub total: Tensor<B, 1>,
}

/// Host values of the terms, for logging (one device sync for all five).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PidNetLossValues {
    /// See [`PidNetLossOutput::aux`].
    pub aux: f64,
    /// See [`PidNetLossOutput::main`].
    pub main: f64,
    /// See [`PidNetLossOutput::boundary`].
    pub boundary: f64,
    /// See [`PidNetLossOutput::bas`].
    pub bas: f64,
    /// See [`PidNetLossOutput::total`].
    pub total: f64,
}

impl PidNetLossValues {
    /// Adds `other / count` term by term: a mean over `count` micro-batches or replicas.
    pub fn add_share(&mut self, other: &Self, count: usize) {
        let n = count as f64;
        self.aux += other.aux / n;
        self.main += other.main / n;
        self.boundary += other.boundary / n;
        self.bas += other.bas / n;
        self.total += other.total / n;
    }
}

impl<B: Backend> PidNetLossOutput<B> {
    /// The official "Semantic loss", `aux + main`.
    pub fn semantic(&self) -> Tensor<B, 1> {
        self.aux.clone() + self.main.clone()
    }

    /// Downloads every term at once.
    pub fn values(&self) -> PidNetLossValues {
        let all = Tensor::cat(
            vec![
                self.aux.clone(),
                self.main.clone(),
                self.boundary.clone(),
                self.bas.clone(),
                self.total.clone(),
            ],
            0,
        );
        let v: Vec<f64> = all.detach().into_data().iter::<f64>().collect();
        PidNetLossValues {
            aux: v[0],
            main: v[1],
            boundary: v[2],
            bas: v[3],
            total: v[4],
        }
    }
}

/// The PIDNet composite loss.
#[derive(Debug, Clone, PartialEq)]
pub struct PidNetLoss {
    config: PidNetLossConfig,
}

impl PidNetLoss {
    /// Validates `config` (class-weight length is checked against the logits on each call).
    pub fn new(config: PidNetLossConfig) -> Result<Self, LossError> {
        config.check()?;
        if config.class_weights.needs_data() {
            return Err(LossError::InvalidConfig(
                "class_weights: FromData weights are computed from the training split when a run \
                 starts (segburn_train::pidnet::resolve_class_weights); none were computed"
                    .into(),
            ));
        }
        Ok(Self { config })
    }

    /// The configuration.
    pub fn config(&self) -> &PidNetLossConfig {
        &self.config
    }

    /// `p_aux`, `main` `[N, C, h, w]`, `boundary` `[N, 1, h, w]` (any float dtype; usually
    /// h = H/8), `labels` `[N, H, W]` class ids, `boundary_target` `[N, H, W]` 0/1 -> the
    /// terms and their total.
    pub fn forward<B: Backend>(
        &self,
        p_aux: Tensor<B, 4>,
        main: Tensor<B, 4>,
        boundary: Tensor<B, 4>,
        labels: Tensor<B, 3, Int>,
        boundary_target: Tensor<B, 3>,
    ) -> Result<PidNetLossOutput<B>, LossError> {
        let num_classes = main.dims()[1];
        check_class_weights(self.config.class_weights.values(), num_classes)?;
        let targets = PixelTargets::from_tensor(labels, num_classes, self.config.ignore_index)?;
        self.forward_targets(p_aux, main, boundary, &targets, boundary_target)
    }

    /// Like [`forward`](Self::forward) with labels already on the host (e.g. straight from the
    /// data loader), which saves one download.
    pub fn forward_targets<B: Backend>(
        &self,
        p_aux: Tensor<B, 4>,
        main: Tensor<B, 4>,
        boundary: Tensor<B, 4>,
        targets: &PixelTargets,
        boundary_target: Tensor<B, 3>,
    ) -> Result<PidNetLossOutput<B>, LossError> {
        let config = &self.config;
        let [n, num_classes, _, _] = main.dims();
        let [tn, th, tw] = targets.shape();
        // Each head is upsampled on its own (as the official `FullModel`), so only batch and
        // channels have to agree here.
        let expect = |what, got: [usize; 4], want: [usize; 4]| {
            if got == want {
                Ok(())
            } else {
                Err(LossError::ShapeMismatch {
                    what,
                    expected: want.to_vec(),
                    got: got.to_vec(),
                })
            }
        };
        let [an, ac, ah, aw] = p_aux.dims();
        expect("p_aux vs main", [an, ac, ah, aw], [n, num_classes, ah, aw])?;
        let [bn, bc, bh, bw] = boundary.dims();
        expect(
            "boundary [N, 1, h, w] vs main",
            [bn, bc, bh, bw],
            [n, 1, bh, bw],
        )?;
        expect("labels vs main (batch)", [tn, 0, 0, 0], [n, 0, 0, 0])?;
        let [bn, bh, bw] = boundary_target.dims();
        expect(
            "boundary target vs labels",
            [bn, 1, bh, bw],
            [tn, 1, th, tw],
        )?;
        if targets.num_classes() != num_classes || targets.ignore_index() != config.ignore_index {
            return Err(LossError::InvalidConfig(format!(
                "targets were validated for {} classes / ignore {}, the loss has {} / {}",
                targets.num_classes(),
                targets.ignore_index(),
                num_classes,
                config.ignore_index
            )));
        }
        check_class_weights(config.class_weights.values(), num_classes)?;
        let weights = config.class_weights.values();

        let p_aux = self.to_label_size(shift_by_class_max(p_aux), [th, tw])?;
        let main = self.to_label_size(shift_by_class_max(main), [th, tw])?;
        let boundary = self.to_label_size(to_loss_precision(boundary), [th, tw])?;
        let index = targets.gather_index(&main.device());

        let log_probs_aux = shifted_target_log_probs(p_aux, index.clone());
        let aux = match config.aux_reduction {
            AuxReduction::AllPixels => mean_over_all_pixels(log_probs_aux, targets, weights),
            AuxReduction::ValidWeightedMean => weighted_mean(log_probs_aux, targets, weights),
        }
        .mul_scalar(config.balance_weights[0]);

        // The main head's target log-probabilities serve both OHEM terms: the gated labels are
        // a subset of the labels, so the gathered values are the same.
        let log_probs_main = shifted_target_log_probs(main, index);
        let log_probs_main_host = download_f32(log_probs_main.clone());
        let main_loss = ohem_from_log_probs(
            log_probs_main.clone(),
            &log_probs_main_host,
            targets,
            weights,
            &config.ohem,
        )
        .mul_scalar(config.balance_weights[1]);

        let gated = gate_targets(
            &download_f32(boundary.clone()),
            targets,
            config.bas_threshold,
        );
        let bas = ohem_from_log_probs(
            log_probs_main,
            &log_probs_main_host,
            &gated,
            weights,
            &config.ohem,
        )
        .mul_scalar(config.bas_weight);

        let boundary_loss =
            weighted_bce(boundary, boundary_target)?.mul_scalar(config.boundary_coeff);

        let total = aux.clone() + main_loss.clone() + boundary_loss.clone() + bas.clone();
        Ok(PidNetLossOutput {
            aux,
            main: main_loss,
            boundary: boundary_loss,
            bas,
            total,
        })
    }

    /// Upsamples to the label size if enabled (and needed).
    fn to_label_size<B: Backend>(
        &self,
        output: Tensor<B, 4>,
        size: [usize; 2],
    ) -> Result<Tensor<B, 4>, LossError> {
        let [n, c, h, w] = output.dims();
        if [h, w] == size {
            return Ok(output);
        }
        if !self.config.upsample_to_labels {
            return Err(LossError::ShapeMismatch {
                what: "output vs label size (upsample_to_labels is off)",
                expected: vec![n, c, size[0], size[1]],
                got: vec![n, c, h, w],
            });
        }
        // The official loss upsamples with align_corners = True.
        Ok(resize_bilinear_align_corners(output, size))
    }
}

/// Casts to the loss precision and subtracts the (detached) per-pixel class maximum,
/// `[N, C, h, w]` -> `[N, C, h, w]`, *before* upsampling.
///
/// Log-softmax is invariant to a per-pixel shift, and bilinear weights sum to 1, so shifting at
/// 1/8 resolution equals shifting the upsampled logits by the upsampled maximum: the result is
/// ≤ 0 (no `exp` overflow) and the full-resolution `max_dim` and broadcast subtraction (~2–5 s
/// per head on Flex at 12×19×1024×1024) are avoided.
fn shift_by_class_max<B: Backend>(logits: Tensor<B, 4>) -> Tensor<B, 4> {
    let logits = to_loss_precision(logits);
    let max = logits.clone().detach().max_dim(1);
    logits - max
}

#[cfg(test)]
#[path = "pidnet_tests.rs"]
mod tests;
