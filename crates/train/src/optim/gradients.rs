//! Gradient post-processing between backward and the optimizer step: undo the loss scale, check
//! that every gradient is finite, and clip by the global L2 norm (PyTorch's
//! `clip_grad_norm_`), all with a single device-to-host read.

use burn::optim::GradientsParams;
use burn::tensor::{backend::Backend, Tensor};

use super::params::ParamInfo;

/// Applies `f` to the gradient of `param` (flattened), if it has one.
pub(crate) fn map_gradient<B: Backend>(
    grads: &mut GradientsParams,
    param: &ParamInfo,
    f: &mut dyn FnMut(Tensor<B, 1>) -> Tensor<B, 1>,
) {
    fn apply<B: Backend, const D: usize>(
        grads: &mut GradientsParams,
        param: &ParamInfo,
        f: &mut dyn FnMut(Tensor<B, 1>) -> Tensor<B, 1>,
    ) {
        if let Some(grad) = grads.remove::<B, D>(param.id) {
            let shape = grad.shape();
            let flat = f(grad.flatten(0, D - 1));
            grads.register::<B, D>(param.id, flat.reshape(shape));
        }
    }
    match param.rank {
        1 => apply::<B, 1>(grads, param, f),
        2 => apply::<B, 2>(grads, param, f),
        3 => apply::<B, 3>(grads, param, f),
        4 => apply::<B, 4>(grads, param, f),
        _ => {}
    }
}

/// Moves the gradient of `param` from one set to another.
pub(crate) fn move_gradient<B: Backend>(
    from: &mut GradientsParams,
    to: &mut GradientsParams,
    param: &ParamInfo,
) {
    fn apply<B: Backend, const D: usize>(
        from: &mut GradientsParams,
        to: &mut GradientsParams,
        param: &ParamInfo,
    ) {
        if let Some(grad) = from.remove::<B, D>(param.id) {
            to.register::<B, D>(param.id, grad);
        }
    }
    match param.rank {
        1 => apply::<B, 1>(from, to, param),
        2 => apply::<B, 2>(from, to, param),
        3 => apply::<B, 3>(from, to, param),
        4 => apply::<B, 4>(from, to, param),
        _ => {}
    }
}

/// What the post-processing found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradientSummary {
    /// Global L2 norm of the (unscaled) gradients before clipping.
    pub norm: f64,
    /// Every gradient value was finite.
    pub finite: bool,
}

/// Divides every gradient by `loss_scale`, measures the global norm, and rescales so that it
/// is at most `max_norm` (when given and the gradients are finite).
pub fn unscale_and_clip<B: Backend>(
    grads: &mut GradientsParams,
    params: &[ParamInfo],
    loss_scale: f64,
    max_norm: Option<f64>,
    device: &B::Device,
) -> GradientSummary {
    let inverse = 1.0 / loss_scale;
    let mut sum_of_squares = Tensor::<B, 1>::zeros([1], device);
    for param in params {
        map_gradient::<B>(grads, param, &mut |g| {
            let g = if loss_scale == 1.0 { g } else { g * inverse };
            sum_of_squares = sum_of_squares.clone() + g.clone().square().sum();
            g
        });
    }
    // inf² = inf and NaN propagates, so one finite test on the sum covers every element.
    let norm = sum_of_squares
        .into_data()
        .iter::<f64>()
        .next()
        .unwrap_or(0.0)
        .sqrt();
    let finite = norm.is_finite();
    if let (Some(max_norm), true) = (max_norm, finite) {
        let factor = max_norm / (norm + 1e-6);
        if factor < 1.0 {
            for param in params {
                map_gradient::<B>(grads, param, &mut |g| g * factor);
            }
        }
    }
    GradientSummary { norm, finite }
}

#[cfg(test)]
mod tests {
    use burn::backend::Flex;
    use burn::module::ParamId;
    use burn::optim::GradientsParams;
    use burn::tensor::Tensor;

    use super::*;
    use crate::mixed_precision::{LossScaler, LossScalerConfig, StepVerdict};

    fn param(rank: usize) -> ParamInfo {
        ParamInfo {
            key: "w".into(),
            id: ParamId::new(),
            rank,
            is_norm: false,
            is_bias: false,
        }
    }

    fn grads_of(values: [f32; 4], p: &ParamInfo) -> GradientsParams {
        let mut grads = GradientsParams::new();
        grads.register::<Flex, 2>(
            p.id,
            Tensor::from_floats(
                [[values[0], values[1]], [values[2], values[3]]],
                &Default::default(),
            ),
        );
        grads
    }

    #[test]
    fn unscales_measures_and_clips_the_global_norm() {
        let p = param(2);
        let mut grads = grads_of([6.0, 0.0, 0.0, 8.0], &p);
        let summary = unscale_and_clip::<Flex>(
            &mut grads,
            std::slice::from_ref(&p),
            2.0,
            Some(1.0),
            &Default::default(),
        );
        assert!(summary.finite);
        assert!(
            (summary.norm - 5.0).abs() < 1e-9,
            "norm of the unscaled gradient"
        );
        let clipped: Tensor<Flex, 2> = grads.get(p.id).unwrap();
        let norm = clipped.square().sum().sqrt().into_scalar();
        assert!((norm - 1.0).abs() < 1e-5, "clipped to max_norm, got {norm}");
    }

    /// An overflowing step is detected, skipped, and halves the scale; the next step applies.
    #[test]
    fn a_forced_overflow_skips_exactly_one_step() {
        let p = param(2);
        let mut scaler = LossScaler::new(LossScalerConfig::default(), true);
        let mut verdicts = Vec::new();
        for values in [
            [1.0, 2.0, 3.0, 4.0],
            [1.0, f32::INFINITY, 3.0, 4.0],
            [1.0, 2.0, 3.0, 4.0],
        ] {
            let mut grads = grads_of(values, &p);
            let summary = unscale_and_clip::<Flex>(
                &mut grads,
                std::slice::from_ref(&p),
                scaler.loss_factor(),
                None,
                &Default::default(),
            );
            verdicts.push(scaler.update(summary.finite));
        }
        assert_eq!(
            verdicts,
            [
                StepVerdict::Apply,
                StepVerdict::SkipOverflow,
                StepVerdict::Apply
            ]
        );
        assert_eq!(scaler.skipped_steps, 1);
        assert_eq!(scaler.scale, 32768.0);
        let mut nan = grads_of([f32::NAN, 0.0, 0.0, 0.0], &p);
        assert!(
            !unscale_and_clip::<Flex>(&mut nan, &[p], 1.0, Some(1.0), &Default::default()).finite
        );
    }
}
