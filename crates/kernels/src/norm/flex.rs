//! [`NormKernels`] on Flex: the kernels on Flex's buffers, in f64 for f64 tensors and in f32
//! otherwise (the dispatch routes only f32 and f64 here).

use burn::backend::Flex;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, Element};
use burn_flex::FlexTensor;

use super::{
    batch_norm_backward, batch_norm_forward, layer_norm_backward, layer_norm_forward,
    BatchStatistics, LayerGeometry, LayerStatistics, NormGeometry, NormKernels,
};
use crate::flex_buffers::{contiguous, dims, slice, tensor_of};
use crate::float::NormFloat;

impl NormKernels for Flex {
    fn batch_norm_train(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        eps: f64,
    ) -> (FloatTensor<Self>, BatchStatistics) {
        let g = norm_geometry(&x);
        let [x, weight, bias] = [&x, &weight, &bias].map(contiguous);
        fn normalise<T: NormFloat + Element + bytemuck::Pod>(
            [x, weight, bias]: [&FlexTensor; 3],
            eps: f64,
            g: &NormGeometry,
        ) -> (FlexTensor, BatchStatistics) {
            let (y, statistics) =
                batch_norm_forward(slice::<T>(x), slice(weight), slice(bias), eps, g);
            (tensor_of(y, dims(x)), statistics)
        }
        match x.dtype() {
            DType::F64 => normalise::<f64>([&x, &weight, &bias], eps, &g),
            _ => normalise::<f32>([&x, &weight, &bias], eps, &g),
        }
    }

    fn batch_norm_train_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        statistics: &BatchStatistics,
        eps: f64,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3] {
        let g = norm_geometry(&x);
        let [x, weight, output_grad] = [&x, &weight, &output_grad].map(contiguous);
        fn grads<T: NormFloat + Element + bytemuck::Pod>(
            x: &FlexTensor,
            weight: &FlexTensor,
            statistics: &BatchStatistics,
            eps: f64,
            output_grad: &FlexTensor,
            g: &NormGeometry,
        ) -> [FlexTensor; 3] {
            let (dx, dw, db) = batch_norm_backward(
                slice::<T>(x),
                slice::<T>(weight),
                statistics,
                eps,
                slice::<T>(output_grad),
                g,
            );
            [
                tensor_of(dx, dims(x)),
                tensor_of(dw, vec![g.channels]),
                tensor_of(db, vec![g.channels]),
            ]
        }
        match x.dtype() {
            DType::F64 => grads::<f64>(&x, &weight, statistics, eps, &output_grad, &g),
            _ => grads::<f32>(&x, &weight, statistics, eps, &output_grad, &g),
        }
    }

    fn layer_norm_along(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        axis: usize,
        eps: f64,
    ) -> (FloatTensor<Self>, LayerStatistics) {
        let g = layer_geometry(&x, axis);
        let [x, weight, bias] = [&x, &weight, &bias].map(contiguous);
        fn normalise<T: NormFloat + Element + bytemuck::Pod>(
            [x, weight, bias]: [&FlexTensor; 3],
            eps: f64,
            g: &LayerGeometry,
        ) -> (FlexTensor, LayerStatistics) {
            let (y, statistics) =
                layer_norm_forward(slice::<T>(x), slice(weight), slice(bias), eps, g);
            (tensor_of(y, dims(x)), statistics)
        }
        match x.dtype() {
            DType::F64 => normalise::<f64>([&x, &weight, &bias], eps, &g),
            _ => normalise::<f32>([&x, &weight, &bias], eps, &g),
        }
    }

    fn layer_norm_along_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        statistics: &LayerStatistics,
        axis: usize,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3] {
        let g = layer_geometry(&x, axis);
        let [x, weight, output_grad] = [&x, &weight, &output_grad].map(contiguous);
        fn grads<T: NormFloat + Element + bytemuck::Pod>(
            [x, weight, output_grad]: [&FlexTensor; 3],
            statistics: &LayerStatistics,
            g: &LayerGeometry,
        ) -> [FlexTensor; 3] {
            let (dx, dw, db) = layer_norm_backward(
                slice::<T>(x),
                slice::<T>(weight),
                statistics,
                slice::<T>(output_grad),
                g,
            );
            [
                tensor_of(dx, dims(x)),
                tensor_of(dw, vec![g.channels]),
                tensor_of(db, vec![g.channels]),
            ]
        }
        let operands = [&x, &weight, &output_grad];
        match x.dtype() {
            DType::F64 => grads::<f64>(operands, statistics, &g),
            _ => grads::<f32>(operands, statistics, &g),
        }
    }
}

/// The `[N, C, H·W]` shape of a batch norm's `[N, C, H, W]` input.
///
/// # Panics
/// If `x` is not 4-D (a caller bug: `BatchNorm2d` normalises 4-D tensors only).
fn norm_geometry(x: &FlexTensor) -> NormGeometry {
    let [batch, channels, h, w]: [usize; 4] = dims(x)
        .try_into()
        .unwrap_or_else(|shape| panic!("a batch norm input is 4-D, not {shape:?}"));
    NormGeometry {
        batch,
        channels,
        plane: h * w,
    }
}

/// The `[outer, C, inner]` shape of a layer norm's input along `axis`.
///
/// # Panics
/// If `axis` is not an axis of `x` (a caller bug: the dispatch takes the axis' size first).
fn layer_geometry(x: &FlexTensor, axis: usize) -> LayerGeometry {
    let shape = dims(x);
    LayerGeometry::of(&shape, axis)
        .unwrap_or_else(|| panic!("a layer norm along axis {axis} of a {shape:?} tensor"))
}
