//! The batch norm folded into the convolution in inference, against the two layers one after
//! the other.

use burn::backend::Flex;
use burn::module::{Param, RunningState};
use burn::tensor::{DType, Tensor, TensorData};
use segburn_models::fixtures::{rel_l2, tensor_values};
use segburn_models::nn::{
    conv2d_in_input_dtype, conv_then_batch_norm, pidnet_conv, BatchNorm2dConfig,
};

/// A plain-Flex tensor of fixed pseudo-random values in [-1, 1).
fn fixed_plain<const D: usize>(shape: [usize; D], seed: u64, dtype: DType) -> Tensor<Flex, D> {
    let values = segburn_kernels::accuracy::test_values(shape.iter().product(), seed);
    Tensor::<Flex, D>::from_data(TensorData::new(values, shape), &Default::default()).cast(dtype)
}

#[test]
fn inference_folds_batch_norm_into_the_convolution() {
    // bn(conv(x)) with non-trivial running statistics, folded (plain Flex) against the two
    // layers one after the other.
    let device = Default::default();
    for (kernel, stride) in [(3, 1), (3, 2), (1, 1)] {
        let mut conv = pidnet_conv::<Flex>(6, 10, kernel, stride, 1, false, &device);
        conv.weight = Param::from_tensor(fixed_plain([10, 6, kernel, kernel], 5, DType::F32));
        let mut bn = BatchNorm2dConfig::new(10).init::<Flex>(&device);
        bn.weight = Param::from_tensor(fixed_plain([10], 6, DType::F32) + 1.5);
        bn.bias = Param::from_tensor(fixed_plain([10], 7, DType::F32));
        bn.running_mean = RunningState::new(fixed_plain([10], 8, DType::F32) * 0.3);
        bn.running_var = RunningState::new(fixed_plain([10], 9, DType::F32) * 0.4 + 0.6);
        let x = fixed_plain([2, 6, 13, 11], 10, DType::F32);
        let folded = conv_then_batch_norm(&conv, &bn, x.clone());
        let separate = bn.forward(conv2d_in_input_dtype(&conv, x));
        let err = rel_l2(&tensor_values(folded), &tensor_values(separate));
        println!("folded batch norm, {kernel}x{kernel} stride {stride}: rel-L2 {err:.1e}");
        assert!(
            err <= 2e-6,
            "{kernel}x{kernel} stride {stride}: rel-L2 {err:e}"
        );
    }
}
