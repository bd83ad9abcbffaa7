//! `LayerNorm` and `LayerNorm2d` on segburn's layer-norm kernel against Burn's composition,
//! values and gradients, and inference against training.

use burn::backend::{Autodiff, Flex};
use burn::module::{AutodiffModule, Param};
use burn::tensor::{DType, Tensor, TensorData};

use segburn_kernels::accuracy::{assert_as_accurate_as_burn, tensor_values, test_values};

use super::{statistics_dtype, LayerNorm2dConfig, LayerNormConfig};

type Ad = Autodiff<Flex>;

/// A tracked `[len]`-shaped (then reshaped) tensor of test values in `dtype`, shifted by
/// `offset` (a mean far from 0 is where one-pass f32 statistics lose digits).
fn leaf<const D: usize>(shape: [usize; D], seed: u64, offset: f64, dtype: DType) -> Tensor<Ad, D> {
    let len = shape.iter().product();
    let values: Vec<f64> = test_values(len, seed)
        .iter()
        .map(|v| 2.0 * v + offset)
        .collect();
    Tensor::<Ad, 1>::from_data(TensorData::new(values, [len]), &Default::default())
        .cast(dtype)
        .reshape(shape)
        .require_grad()
}

/// `[y, dx, dweight, dbias]` of `norm(x, weight, bias)` under the loss `Σ y · probe`.
fn results<const D: usize>(
    shape: [usize; D],
    axis: usize,
    dtype: DType,
    norm: impl Fn(Tensor<Ad, D>, Param<Tensor<Ad, 1>>, Param<Tensor<Ad, 1>>) -> Tensor<Ad, D>,
) -> [Vec<f64>; 4] {
    let c = shape[axis];
    let x = leaf(shape, 5, 3.0, dtype);
    let weight = leaf([c], 7, 1.0, dtype);
    let bias = leaf([c], 11, 0.0, dtype);
    let probe = leaf(shape, 13, 0.0, dtype).inner();
    let y = norm(
        x.clone(),
        Param::from_tensor(weight.clone()),
        Param::from_tensor(bias.clone()),
    );
    let grads = (y.clone() * Tensor::from_inner(probe)).sum().backward();
    let grad = |t: &Tensor<Ad, D>| tensor_values(t.grad(&grads).expect("tracked"));
    let grad1 = |t: &Tensor<Ad, 1>| tensor_values(t.grad(&grads).expect("tracked"));
    [
        tensor_values(y.inner()),
        grad(&x),
        grad1(&weight),
        grad1(&bias),
    ]
}

/// Ours in f64 and f32 against Burn's composition in f64 (values and the three gradients),
/// as accurate as Burn's composition in f32; `run(dtype, ours)` gives the four results.
fn compare(what: &str, run: impl Fn(DType, bool) -> [Vec<f64>; 4]) {
    let [exact, ours64, ours32, burn32] = [
        run(DType::F64, false),
        run(DType::F64, true),
        run(DType::F32, true),
        run(DType::F32, false),
    ];
    for (i, part) in ["y", "dx", "dweight", "dbias"].iter().enumerate() {
        assert_as_accurate_as_burn(
            &format!("{what} {part}"),
            [&exact[i], &ours64[i], &ours32[i], &burn32[i]],
        );
    }
}

#[test]
fn last_axis_norm_and_gradients_match_burns_composition() {
    // 393 rows (several tasks and a short one), 37 channels (not a multiple of the lanes).
    let shape = [3, 131, 37];
    let run = |dtype: DType, ours: bool| {
        results(shape, 2, dtype, |x, weight, bias| {
            let mut norm = LayerNormConfig::new(37).init::<Ad>(&Default::default());
            (norm.weight, norm.bias) = (weight, bias);
            if ours {
                norm.forward(x)
            } else {
                norm.composed(x, statistics_dtype(dtype))
            }
        })
    };
    compare("LayerNorm", run);
}

#[test]
fn channel_norm_and_gradients_match_burns_composition() {
    // 17·19 pixels: one full piece of PIXELS and a short one per image, three images.
    for shape in [[3, 5, 17, 19], [1, 64, 16, 16]] {
        let c = shape[1];
        let run = |dtype: DType, ours: bool| {
            results(shape, 1, dtype, |x, weight, bias| {
                let mut norm = LayerNorm2dConfig::new(c).init::<Ad>(&Default::default());
                (norm.weight, norm.bias) = (weight, bias);
                if ours {
                    norm.forward(x)
                } else {
                    norm.composed(x, statistics_dtype(dtype))
                }
            })
        };
        compare(&format!("LayerNorm2d {shape:?}"), run);
    }
}

/// Inference (plain Flex) gives the training forward's bits, on one thread as on many.
#[test]
fn inference_matches_training_on_any_number_of_threads() {
    let shape = [2, 7, 23, 13];
    let x = leaf(shape, 17, 0.5, DType::F32);
    let norm = LayerNorm2dConfig::new(7).init::<Ad>(&Default::default());
    let trained = tensor_values(norm.forward(x.clone()).inner());
    let plain = norm.valid();
    let inferred = tensor_values(plain.forward(x.clone().inner()));
    assert_eq!(trained, inferred);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    let single = pool.install(|| tensor_values(plain.forward(x.inner())));
    assert_eq!(single, inferred);
}
