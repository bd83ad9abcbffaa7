//! [`LossKernels`] on Flex: the kernels on Flex's buffers in f32 or f64, Burn's ops for other
//! float types and shapes the kernels do not take.

use burn::backend::{Autodiff, Flex};
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, Element, IndexingUpdateOp, Int, Tensor, TensorData, TensorPrimitive};
use burn_flex::FlexTensor;

use super::class_log_probs::{class_log_probs, class_log_probs_grad};
use super::mask_loss::{mask_loss_sums, mask_loss_sums_grad};
use super::{
    mask_loss_sums_by_burn, ClassPlanes, Focal, LossKernels, MaskRows, SoftmaxFloat, MASK_LOSS_SUMS,
};
use crate::flex_buffers::{
    burn_tensor, contiguous, dims, flex_tensor, float_type, slice, tensor_of,
};
use crate::float::NormFloat;

impl LossKernels for Flex {
    fn class_log_probs(
        x: FloatTensor<Self>,
        classes: &[usize],
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let own = match float_type(&[&x]) {
            Some(DType::F32) => log_probs::<f32>(&x, classes),
            Some(_) => log_probs::<f64>(&x, classes),
            None => None,
        };
        own.unwrap_or_else(|| log_probs_by_burn(x, classes))
    }

    fn class_log_probs_grad(
        x: FloatTensor<Self>,
        classes: &[usize],
        lse: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let own = match float_type(&[&x, &lse, &output_grad]) {
            Some(DType::F32) => log_probs_grad::<f32>(&x, classes, &lse, &output_grad),
            Some(_) => log_probs_grad::<f64>(&x, classes, &lse, &output_grad),
            None => None,
        };
        own.unwrap_or_else(|| log_probs_grad_by_burn(x, classes, lse, output_grad))
    }

    fn mask_loss_sums(
        logits: FloatTensor<Self>,
        targets: FloatTensor<Self>,
        focal: Focal,
    ) -> FloatTensor<Self> {
        let own = match float_type(&[&logits, &targets]) {
            Some(DType::F32) => mask_sums::<f32>(&logits, &targets, focal),
            Some(_) => mask_sums::<f64>(&logits, &targets, focal),
            None => None,
        };
        own.unwrap_or_else(|| {
            let sums = mask_loss_sums_by_burn(burn_tensor(logits), burn_tensor(targets), focal);
            flex_tensor::<3>(sums)
        })
    }

    fn mask_loss_sums_grad(
        logits: FloatTensor<Self>,
        targets: FloatTensor<Self>,
        focal: Focal,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let own = match float_type(&[&logits, &targets, &output_grad]) {
            Some(DType::F32) => mask_sums_grad::<f32>(&logits, &targets, focal, &output_grad),
            Some(_) => mask_sums_grad::<f64>(&logits, &targets, focal, &output_grad),
            None => None,
        };
        own.unwrap_or_else(|| mask_sums_grad_by_burn(logits, targets, focal, output_grad))
    }
}

/// The `[N, C, P]` view of `[N, C, H, W]` logits; `None` where `x` is not 4-D.
fn class_planes(x: &FlexTensor) -> Option<ClassPlanes> {
    let [batch, classes, h, w]: [usize; 4] = dims(x).try_into().ok()?;
    Some(ClassPlanes {
        batch,
        classes,
        pixels: h * w,
    })
}

fn log_probs<T: SoftmaxFloat + Element + bytemuck::Pod>(
    x: &FlexTensor,
    classes: &[usize],
) -> Option<(FlexTensor, FlexTensor)> {
    let planes = class_planes(x)?;
    let x = contiguous(x);
    if !planes.fits(slice::<T>(&x), classes) {
        return None;
    }
    let (out, lse) = class_log_probs(slice::<T>(&x), classes, &planes);
    let shape = pixel_shape(&x);
    Some((tensor_of(out, shape.clone()), tensor_of(lse, shape)))
}

fn log_probs_grad<T: SoftmaxFloat + Element + bytemuck::Pod>(
    x: &FlexTensor,
    classes: &[usize],
    lse: &FlexTensor,
    output_grad: &FlexTensor,
) -> Option<FlexTensor> {
    let planes = class_planes(x)?;
    let shape = pixel_shape(x);
    if dims(lse) != shape || dims(output_grad) != shape {
        return None;
    }
    let [x, lse, output_grad] = [x, lse, output_grad].map(contiguous);
    if !planes.fits(slice::<T>(&x), classes) {
        return None;
    }
    let grad = class_log_probs_grad(
        slice::<T>(&x),
        classes,
        slice::<T>(&lse),
        slice::<T>(&output_grad),
        &planes,
    );
    Some(tensor_of(grad, dims(&x)))
}

/// `[N, H, W]` of `[N, C, H, W]` logits.
fn pixel_shape(x: &FlexTensor) -> Vec<usize> {
    let d = dims(x);
    [d[0], d[2], d[3]].to_vec()
}

/// [`LossKernels::class_log_probs`] by Burn's ops, for the dtypes and shapes our kernel does
/// not take.
fn log_probs_by_burn(x: FlexTensor, classes: &[usize]) -> (FlexTensor, FlexTensor) {
    let x = Tensor::<Flex, 4>::from_primitive(TensorPrimitive::Float(x));
    let [n, _, h, w] = x.dims();
    let index = class_index(classes, [n, h, w], &x.device());
    let lse = x.clone().exp().sum_dim(1).log();
    let out = (x.gather(1, index) - lse.clone()).reshape([n, h, w]);
    (
        out.into_primitive().tensor(),
        lse.reshape([n, h, w]).into_primitive().tensor(),
    )
}

/// [`LossKernels::class_log_probs_grad`] by Burn's ops.
fn log_probs_grad_by_burn(
    x: FlexTensor,
    classes: &[usize],
    lse: FlexTensor,
    output_grad: FlexTensor,
) -> FlexTensor {
    let x = Tensor::<Flex, 4>::from_primitive(TensorPrimitive::Float(x));
    let [n, c, h, w] = x.dims();
    let lse = Tensor::<Flex, 3>::from_primitive(TensorPrimitive::Float(lse)).reshape([n, 1, h, w]);
    let g = Tensor::<Flex, 3>::from_primitive(TensorPrimitive::Float(output_grad))
        .reshape([n, 1, h, w]);
    let index = class_index(classes, [n, h, w], &x.device());
    let hit = Tensor::<Flex, 4>::zeros([n, c, h, w], &x.device())
        .cast(x.dtype())
        .scatter(1, index, g.clone().ones_like(), IndexingUpdateOp::Add);
    ((hit - (x - lse).exp()) * g).into_primitive().tensor()
}

fn class_index(
    classes: &[usize],
    [n, h, w]: [usize; 3],
    device: &burn::tensor::Device<Flex>,
) -> Tensor<Flex, 4, Int> {
    let values: Vec<i64> = classes.iter().map(|&k| k as i64).collect();
    Tensor::from_data(TensorData::new(values, [n, 1, h, w]), device)
}

/// The `[N, M, L]` rows of mask logits, if the targets are `[N, L]`.
fn mask_rows(logits: &FlexTensor, targets: &FlexTensor, focal: Focal) -> Option<MaskRows> {
    let [objects, masks, pixels]: [usize; 3] = dims(logits).try_into().ok()?;
    (dims(targets) == [objects, pixels]).then_some(MaskRows {
        objects,
        masks,
        pixels,
        focal,
    })
}

fn mask_sums<T: NormFloat + Element + bytemuck::Pod>(
    logits: &FlexTensor,
    targets: &FlexTensor,
    focal: Focal,
) -> Option<FlexTensor> {
    let rows = mask_rows(logits, targets, focal)?;
    let [logits, targets] = [logits, targets].map(contiguous);
    let (logits, targets) = (slice::<T>(&logits), slice::<T>(&targets));
    if !rows.fits(logits, targets) {
        return None;
    }
    let sums = mask_loss_sums(logits, targets, &rows);
    Some(tensor_of(
        sums,
        vec![rows.objects, rows.masks, MASK_LOSS_SUMS],
    ))
}

fn mask_sums_grad<T: NormFloat + Element + bytemuck::Pod>(
    logits: &FlexTensor,
    targets: &FlexTensor,
    focal: Focal,
    output_grad: &FlexTensor,
) -> Option<FlexTensor> {
    let rows = mask_rows(logits, targets, focal)?;
    if dims(output_grad) != [rows.objects, rows.masks, MASK_LOSS_SUMS] {
        return None;
    }
    let [logits, targets, output_grad] = [logits, targets, output_grad].map(contiguous);
    let (x, t) = (slice::<T>(&logits), slice::<T>(&targets));
    if !rows.fits(x, t) {
        return None;
    }
    let grad = mask_loss_sums_grad(x, t, slice::<T>(&output_grad), &rows);
    Some(tensor_of(grad, dims(&logits)))
}

/// [`LossKernels::mask_loss_sums_grad`] by Burn's ops: the gradient of `Σ sums · output_grad`
/// through [`mask_loss_sums_by_burn`] on `Autodiff<Flex>`.
fn mask_sums_grad_by_burn(
    logits: FlexTensor,
    targets: FlexTensor,
    focal: Focal,
    output_grad: FlexTensor,
) -> FlexTensor {
    let float = |t: FlexTensor| TensorPrimitive::Float(t);
    let logits = Tensor::<Autodiff<Flex>, 3>::from_inner(Tensor::from_primitive(float(logits)))
        .require_grad();
    let targets = Tensor::<Autodiff<Flex>, 2>::from_inner(Tensor::from_primitive(float(targets)));
    let weights =
        Tensor::<Autodiff<Flex>, 3>::from_inner(Tensor::from_primitive(float(output_grad)));
    let total = (mask_loss_sums_by_burn(logits.clone(), targets, focal) * weights).sum();
    let grads = total.backward();
    match logits.grad(&grads) {
        Some(grad) => grad.into_primitive().tensor(),
        None => unreachable!("the logits require a gradient"),
    }
}
