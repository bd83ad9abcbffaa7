//! End-to-end inference throughput as `eval` runs it: [`predict_classes`] in an inference mode
//! (network, upsampling to full resolution with `align_corners = true`, argmax) and the class
//! map downloaded to the host.

use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Tensor};
use segburn_models::pidnet::{PidNetConfig, PidNetSize};
use segburn_train::inference::{predict_classes, InferenceConfig, InferenceError};

use super::pidnet_precision::Repeats;
use super::timing::{measure, Timing};

/// Times one `[1, 3, h, w]` image through `config` with a freshly initialised 19-class model.
pub fn pidnet_inference<B: Backend>(
    size: PidNetSize,
    [h, w]: [usize; 2],
    config: &InferenceConfig,
    device: &B::Device,
    repeats: Repeats,
) -> Result<Timing, InferenceError> {
    config.check()?;
    let model = PidNetConfig::new(size, 19)
        .with_augment(false)
        .init::<B>(device);
    let input = Tensor::<B, 4>::random([1, 3, h, w], Distribution::Default, device);
    let mut failure = None;
    let timing = measure(repeats.warmups, repeats.reps, || {
        match predict_classes(&model, input.clone(), config) {
            Ok(classes) => {
                let _ = classes.into_data();
            }
            Err(error) => failure = Some(error),
        }
    });
    match failure {
        Some(error) => Err(error),
        None => Ok(timing),
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::Flex;

    use super::*;

    #[test]
    fn smoke_inference_runs_once_in_every_mode() {
        let device = Default::default();
        let once = Repeats {
            warmups: 0,
            reps: 1,
        };
        let whole = pidnet_inference::<Flex>(
            PidNetSize::S,
            [64, 64],
            &InferenceConfig::default(),
            &device,
            once,
        )
        .unwrap();
        assert_eq!(whole.runs_ms.len(), 1);
        let bad = InferenceConfig {
            scales: vec![],
            ..InferenceConfig::default()
        };
        assert!(pidnet_inference::<Flex>(PidNetSize::S, [64, 64], &bad, &device, once).is_err());
    }
}
