//! The stability score: how much a mask changes when its logit cutoff moves.

use burn::tensor::{backend::Backend, Tensor};

/// For `[N, H, W]` mask logits, the IoU of the masks cut at `threshold + offset` and at
/// `threshold - offset` (upstream's `calculate_stability_score`). The first mask lies inside
/// the second, so the IoU is the ratio of their pixel counts; an empty wide mask gives NaN,
/// which fails every threshold, as upstream.
///
/// Counted on the device so only `N` numbers come back; the ratio is taken in f32 like
/// torch's int32 / int32 division.
pub fn stability_scores<B: Backend>(logits: Tensor<B, 3>, threshold: f64, offset: f64) -> Vec<f32> {
    let [count, _, _] = logits.dims();
    if count == 0 {
        return Vec::new();
    }
    // The cutoffs are summed in f64 (Python floats) and compared in the logits' precision.
    let pixels_above = |cutoff: f64| -> Vec<i64> {
        logits
            .clone()
            .greater_elem(cutoff as f32)
            .int()
            .sum_dims_squeeze::<1, _>(&[1, 2])
            .into_data()
            .convert::<i64>()
            .into_vec::<i64>()
            .expect("the data was converted to i64 just above")
    };
    let intersections = pixels_above(threshold + offset);
    let unions = pixels_above(threshold - offset);
    intersections
        .iter()
        .zip(&unions)
        .map(|(&inner, &outer)| inner as f32 / outer as f32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{flex::FlexDevice, Flex};
    use burn::tensor::TensorData;

    #[test]
    fn scores_match_upstream() {
        // Official `calculate_stability_score(m, 0.0, 1.0)` on these three 2 × 3 logit maps
        // gives [0.4, 1.0, nan].
        let logits = [
            [-2.0, 0.5, 1.5, 3.0, -0.5, 0.9],
            [5.0, 5.0, 5.0, -5.0, -5.0, -5.0],
            [-3.0; 6],
        ];
        let flat: Vec<f32> = logits.iter().flatten().copied().collect();
        let tensor = Tensor::<Flex, 3>::from_data(TensorData::new(flat, [3, 2, 3]), &FlexDevice);
        let scores = stability_scores(tensor, 0.0, 1.0);
        assert_eq!(scores[..2], [0.4, 1.0]);
        assert!(scores[2].is_nan());
    }

    #[test]
    fn the_comparison_is_strict() {
        // A logit equal to the cutoff is outside the mask on both sides, as `>` upstream.
        let tensor = Tensor::<Flex, 3>::from_data(
            TensorData::new(vec![1.0f32, -1.0, 2.0, 0.5], [1, 2, 2]),
            &FlexDevice,
        );
        // above 1: {2.0}; above -1: {1.0, 2.0, 0.5}.
        assert_eq!(stability_scores(tensor, 0.0, 1.0), vec![1.0 / 3.0]);
    }
}
