//! [`CpuKernels`] on Flex: the kernels read Flex's contiguous buffers as slices, in f32 or
//! f64; other float types go to Burn's op.

use burn::backend::Flex;
use burn::tensor::ops::{
    ActivationOps, ConvOptions, FloatTensor, FloatTensorOps, InterpolateMode, InterpolateOptions,
    ModuleOps,
};
use burn::tensor::{DType, Element, IndexingUpdateOp, Int, Tensor, TensorData, TensorPrimitive};
use burn_flex::FlexTensor;

use super::batch_norm::{
    batch_norm_backward, batch_norm_forward, BatchStatistics, NormFloat, NormGeometry,
};
use super::bilinear::{bilinear_forward, bilinear_input_grad, BilinearFloat, BilinearGeometry};
use super::class_log_probs::{class_log_probs, class_log_probs_grad, ClassPlanes, SoftmaxFloat};
use super::conv::{conv2d_forward, conv2d_input_grad, conv2d_weight_grad, ConvGeometry, GemmFloat};
use super::direct_conv::{conv2d_forward_direct, direct_conv_is_fast_here, Epilogue};
use super::gelu::{gelu_forward, gelu_grad};
use super::layer_norm::{layer_norm_backward, layer_norm_forward, LayerGeometry, LayerStatistics};
use super::mask_loss::{mask_loss_sums_by_burn, Focal};
use super::permute::copy_strided;
use super::pixel_gate::{self, GateGeometry};
use super::CpuKernels;

mod sam2_heads;
use sam2_heads::{
    attend, attend_grad, attention_by_burn, attention_grad_by_burn, blocks_by_burn,
    linear_grad_by_burn, linear_on_flex_by_burn, mask_sums, mask_sums_grad, mask_sums_grad_by_burn,
    move_blocks, project, project_grad, Direction,
};

impl CpuKernels for Flex {
    fn conv2d_forward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let mut operands = vec![&x, &weight];
        operands.extend(bias.as_ref());
        let own = match float_type(&operands) {
            Some(DType::F32) => forward::<f32>(&x, &weight, bias.as_ref(), &options),
            Some(_) => forward::<f64>(&x, &weight, bias.as_ref(), &options),
            None => None,
        };
        own.unwrap_or_else(|| Flex::conv2d(x, weight, bias, options))
    }

    fn conv2d_input_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let kernels: [GradientKernel; 2] = [input_grad::<f32>, input_grad::<f64>];
        gradient(kernels, [&x, &weight, &output_grad], &options)
            .unwrap_or_else(|| Flex::conv2d_x_backward(x, weight, output_grad, options))
    }

    fn conv2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let kernels: [GradientKernel; 2] = [weight_grad::<f32>, weight_grad::<f64>];
        gradient(kernels, [&x, &weight, &output_grad], &options)
            .unwrap_or_else(|| Flex::conv2d_weight_backward(x, weight, output_grad, options))
    }

    fn bilinear_forward(
        x: FloatTensor<Self>,
        output_size: [usize; 2],
        align_corners: bool,
    ) -> FloatTensor<Self> {
        let own = match float_type(&[&x]) {
            Some(DType::F32) => resize::<f32>(&x, output_size, align_corners),
            Some(_) => resize::<f64>(&x, output_size, align_corners),
            None => None,
        };
        own.unwrap_or_else(|| Flex::interpolate(x, output_size, bilinear(align_corners)))
    }

    fn bilinear_input_grad(
        input_shape: [usize; 4],
        output_grad: FloatTensor<Self>,
        align_corners: bool,
    ) -> FloatTensor<Self> {
        let own = match float_type(&[&output_grad]) {
            Some(DType::F32) => resize_grad::<f32>(input_shape, &output_grad, align_corners),
            Some(_) => resize_grad::<f64>(input_shape, &output_grad, align_corners),
            None => None,
        };
        own.unwrap_or_else(|| {
            // Burn's backward reads only the input's shape and dtype.
            let x = FlexTensor::zeros(input_shape.to_vec().into(), output_grad.dtype());
            let output_size = output_size(&output_grad).unwrap_or([0, 0]);
            Flex::interpolate_backward(x, output_grad, output_size, bilinear(align_corners))
        })
    }

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

    fn channel_dot(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self> {
        gate_channel_dot(a, b)
    }

    fn scale_by_pixel(x: FloatTensor<Self>, s: FloatTensor<Self>) -> FloatTensor<Self> {
        gate_scale_by_pixel(x, s)
    }

    fn gate_blend(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        s: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        gate_blend_tensors(x, y, s)
    }

    fn gate_blend_grad(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        s: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3] {
        gate_blend_grad_tensors(x, y, s, output_grad)
    }

    fn permuted_copy(x: FloatTensor<Self>, axes: &[usize]) -> FloatTensor<Self> {
        let view = x.permute(axes);
        fn copy<T: Element + bytemuck::Pod + Default>(view: &FlexTensor) -> Option<FlexTensor> {
            let layout = view.layout();
            let shape = layout.shape().to_vec();
            let values = copy_strided(
                view.storage::<T>(),
                &shape,
                layout.strides(),
                layout.start_offset(),
            )?;
            Some(tensor_of(values, shape))
        }
        let own = match view.dtype() {
            _ if view.is_contiguous() => None,
            DType::F32 => copy::<f32>(&view),
            DType::F64 => copy::<f64>(&view),
            _ => None,
        };
        own.unwrap_or_else(|| view.to_contiguous())
    }

    fn exact_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        if x.dtype() != DType::F32 {
            return <Flex as ActivationOps<Flex>>::gelu(x);
        }
        let x = contiguous(&x);
        tensor_of(gelu_forward(slice::<f32>(&x)), dims(&x))
    }

    fn exact_gelu_grad(x: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self> {
        if float_type(&[&x, &output_grad]) != Some(DType::F32) || dims(&x) != dims(&output_grad) {
            return <Flex as ActivationOps<Flex>>::gelu_backward(x, output_grad);
        }
        let [x, output_grad] = [&x, &output_grad].map(contiguous);
        let grad = gelu_grad(slice::<f32>(&x), slice::<f32>(&output_grad));
        tensor_of(grad, dims(&x))
    }

    fn blocks_to_space(x: FloatTensor<Self>, block: usize) -> FloatTensor<Self> {
        let own = match float_type(&[&x]) {
            Some(DType::F32) => move_blocks::<f32>(&x, block, Direction::ToSpace),
            Some(_) => move_blocks::<f64>(&x, block, Direction::ToSpace),
            None => None,
        };
        own.unwrap_or_else(|| blocks_by_burn(x, block, Direction::ToSpace))
    }

    fn space_to_blocks(x: FloatTensor<Self>, block: usize) -> FloatTensor<Self> {
        let own = match float_type(&[&x]) {
            Some(DType::F32) => move_blocks::<f32>(&x, block, Direction::ToBlocks),
            Some(_) => move_blocks::<f64>(&x, block, Direction::ToBlocks),
            None => None,
        };
        own.unwrap_or_else(|| blocks_by_burn(x, block, Direction::ToBlocks))
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
            let [logits, targets] = [logits, targets].map(TensorPrimitive::Float);
            mask_loss_sums_by_burn(
                Tensor::<Flex, 3>::from_primitive(logits),
                Tensor::<Flex, 2>::from_primitive(targets),
                focal,
            )
            .into_primitive()
            .tensor()
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

    fn multi_head_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        heads: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let own = match float_type(&[&q, &k, &v]) {
            Some(DType::F32) => attend::<f32>(&q, &k, &v, heads),
            Some(_) => attend::<f64>(&q, &k, &v, heads),
            None => None,
        };
        own.unwrap_or_else(|| attention_by_burn(q, k, v, heads))
    }

    fn multi_head_attention_grad(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        probs: FloatTensor<Self>,
        heads: usize,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3] {
        let operands = [&q, &k, &v, &probs, &output_grad];
        let own = match float_type(&operands) {
            Some(DType::F32) => attend_grad::<f32>(operands, heads),
            Some(_) => attend_grad::<f64>(operands, heads),
            None => None,
        };
        own.unwrap_or_else(|| attention_grad_by_burn(q, k, v, heads, output_grad))
    }

    fn linear_layer(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self> {
        let mut operands = vec![&x, &weight];
        operands.extend(bias.as_ref());
        let own = match float_type(&operands) {
            Some(DType::F32) => project::<f32>(&x, &weight, bias.as_ref()),
            Some(_) => project::<f64>(&x, &weight, bias.as_ref()),
            None => None,
        };
        own.unwrap_or_else(|| linear_on_flex_by_burn(x, weight, bias))
    }

    fn linear_layer_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        with_bias: bool,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        Option<FloatTensor<Self>>,
    ) {
        let operands = [&x, &weight, &output_grad];
        let own = match float_type(&operands) {
            Some(DType::F32) => project_grad::<f32>(operands, with_bias),
            Some(_) => project_grad::<f64>(operands, with_bias),
            None => None,
        };
        own.unwrap_or_else(|| linear_grad_by_burn(x, weight, output_grad, with_bias))
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

/// [`CpuKernels::class_log_probs`] by Burn's ops, for the dtypes and shapes our kernel does
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

/// [`CpuKernels::class_log_probs_grad`] by Burn's ops.
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

fn bilinear(align_corners: bool) -> InterpolateOptions {
    InterpolateOptions::new(InterpolateMode::Bilinear).with_align_corners(align_corners)
}

/// The geometry of resizing `[N, C, H, W]` to `output_size`; `None` for an empty input (then
/// Burn's op runs and reports it).
fn resize_geometry(
    [batch, channels, in_h, in_w]: [usize; 4],
    output_size: [usize; 2],
    align_corners: bool,
) -> Option<BilinearGeometry> {
    (in_h > 0 && in_w > 0).then_some(BilinearGeometry {
        planes: batch * channels,
        in_size: [in_h, in_w],
        out_size: output_size,
        align_corners,
    })
}

/// The resize by [`bilinear_forward`]; `None` where `x` is not 4-D or empty.
fn resize<T: BilinearFloat + Element + bytemuck::Pod>(
    x: &FlexTensor,
    output_size: [usize; 2],
    align_corners: bool,
) -> Option<FlexTensor> {
    let shape: [usize; 4] = dims(x).try_into().ok()?;
    let geometry = resize_geometry(shape, output_size, align_corners)?;
    let x = contiguous(x);
    let values = bilinear_forward(slice::<T>(&x), &geometry);
    let [oh, ow] = output_size;
    Some(tensor_of(values, vec![shape[0], shape[1], oh, ow]))
}

/// The input gradient by [`bilinear_input_grad`]; `None` where the shapes do not fit.
fn resize_grad<T: BilinearFloat + Element + bytemuck::Pod>(
    input_shape: [usize; 4],
    output_grad: &FlexTensor,
    align_corners: bool,
) -> Option<FlexTensor> {
    let [n, c, oh, ow]: [usize; 4] = dims(output_grad).try_into().ok()?;
    if [n, c] != [input_shape[0], input_shape[1]] {
        return None;
    }
    let geometry = resize_geometry(input_shape, [oh, ow], align_corners)?;
    let output_grad = contiguous(output_grad);
    let values = bilinear_input_grad(slice::<T>(&output_grad), &geometry);
    Some(tensor_of(values, input_shape.to_vec()))
}

/// F32 or F64 when all `tensors` have it (what the kernels compute in); `None` otherwise.
fn float_type(tensors: &[&FlexTensor]) -> Option<DType> {
    let dtype = tensors.first()?.dtype();
    (matches!(dtype, DType::F32 | DType::F64) && tensors.iter().all(|t| t.dtype() == dtype))
        .then_some(dtype)
}

/// A gradient kernel of `(x, weight, output_grad)` in one float type.
type GradientKernel =
    fn(&FlexTensor, &FlexTensor, &FlexTensor, &ConvOptions<2>) -> Option<FlexTensor>;

/// The f32 or f64 kernel of `kernels`, as the tensors' float type says; `None` if they have
/// neither or differ.
fn gradient(
    [for_f32, for_f64]: [GradientKernel; 2],
    [x, weight, output_grad]: [&FlexTensor; 3],
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    match float_type(&[x, weight, output_grad])? {
        DType::F32 => for_f32(x, weight, output_grad, options),
        _ => for_f64(x, weight, output_grad, options),
    }
}

/// `tensor` with a row-major buffer (no copy if it already had one).
fn contiguous(tensor: &FlexTensor) -> FlexTensor {
    tensor.to_contiguous()
}

/// The buffer of a contiguous tensor as `T`s (the caller checked the dtype; a mismatch gives
/// an empty slice, which the kernel's length checks report).
fn slice<T: Element + bytemuck::Pod>(tensor: &FlexTensor) -> &[T] {
    tensor.as_slice::<T>().unwrap_or(&[])
}

fn tensor_of<T: Element>(values: Vec<T>, shape: Vec<usize>) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape))
}

fn dims(tensor: &FlexTensor) -> Vec<usize> {
    tensor.layout().shape().to_vec()
}

/// The shape of a 4-D tensor; `None` for other ranks.
fn four(tensor: &FlexTensor) -> Option<[usize; 4]> {
    dims(tensor).try_into().ok()
}

/// The geometry of `conv2d(x, weight)` with `options` giving an output of `out_size`; `None`
/// where the tensors are not 4-D.
fn geometry(
    x: &FlexTensor,
    weight: &FlexTensor,
    out_size: Option<[usize; 2]>,
    options: &ConvOptions<2>,
) -> Option<ConvGeometry> {
    let ([batch, in_channels, in_h, in_w], [out_channels, _, kh, kw]) = (four(x)?, four(weight)?);
    let mut geometry = ConvGeometry {
        batch,
        in_channels,
        in_size: [in_h, in_w],
        out_channels,
        kernel: [kh, kw],
        out_size: [0, 0],
        stride: options.stride,
        padding: options.padding,
        dilation: options.dilation,
        groups: options.groups,
    };
    geometry.out_size = out_size.unwrap_or(geometry.expected_out_size());
    (geometry.expected_out_size() == geometry.out_size
        && options.groups > 0
        && in_channels.is_multiple_of(options.groups)
        && out_channels.is_multiple_of(options.groups))
    .then_some(geometry)
}

/// The forward by [`conv2d_forward`]; `None` where the shapes do not fit (then Burn's op runs
/// and reports them).
fn forward<T: GemmFloat + Element + bytemuck::Pod>(
    x: &FlexTensor,
    weight: &FlexTensor,
    bias: Option<&FlexTensor>,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    forward_by(x, weight, bias, options, |x, w, b, g| {
        Some(conv2d_forward::<T>(x, w, b, g))
    })
}

/// A forward kernel on Flex's buffers: the geometry from the tensors' shapes, contiguous
/// slices in, the `[N, O, OH, OW]` output out; `None` where the shapes do not fit or `kernel`
/// declines.
fn forward_by<T: Element + bytemuck::Pod>(
    x: &FlexTensor,
    weight: &FlexTensor,
    bias: Option<&FlexTensor>,
    options: &ConvOptions<2>,
    kernel: impl FnOnce(&[T], &[T], Option<&[T]>, &ConvGeometry) -> Option<Vec<T>>,
) -> Option<FlexTensor> {
    let geometry = geometry(x, weight, None, options)?;
    if bias.is_some_and(|bias| dims(bias) != [geometry.out_channels]) {
        return None;
    }
    let [x, weight] = [x, weight].map(contiguous);
    let bias = bias.map(contiguous);
    let values = kernel(
        slice::<T>(&x),
        slice::<T>(&weight),
        bias.as_ref().map(slice::<T>),
        &geometry,
    )?;
    let [oh, ow] = geometry.out_size;
    Some(tensor_of(
        values,
        vec![geometry.batch, geometry.out_channels, oh, ow],
    ))
}

/// The convolution of inference (no gradients follow), plus `residual` and then ReLU where
/// asked: in f32 by [`conv2d_forward_direct`] (both in its output write) where it applies and
/// is the faster kernel on this CPU, otherwise as [`CpuKernels::conv2d_forward`] followed by
/// Flex's add and ReLU.
///
/// Training keeps the unfolding kernel, whose sums gemm blocks as PyTorch's CPU GEMM path does:
/// the real-photo f32 step's boundary-head gradient (`pidnet_grads_parity`) amplifies the
/// forward's rounding, and with the direct kernel's blocking it measured 1.35× the test's bound
/// (`seghead_d.conv1.weight`), against 0.04× with the unfolding kernel.
pub(super) fn conv2d_inference(
    x: FloatTensor<Flex>,
    weight: FloatTensor<Flex>,
    bias: Option<FloatTensor<Flex>>,
    options: ConvOptions<2>,
    residual: Option<FloatTensor<Flex>>,
    relu: bool,
) -> FloatTensor<Flex> {
    let mut operands = vec![&x, &weight];
    operands.extend(bias.as_ref());
    operands.extend(residual.as_ref());
    let direct = match float_type(&operands) {
        Some(DType::F32) => forward_direct(
            &x,
            &weight,
            bias.as_ref(),
            &options,
            residual.as_ref(),
            relu,
        ),
        _ => None,
    };
    if let Some(out) = direct {
        return out;
    }
    let out = Flex::conv2d_forward(x, weight, bias, options);
    let out = match residual {
        Some(residual) => Flex::float_add(out, residual),
        None => out,
    };
    if relu {
        Flex::relu(out)
    } else {
        out
    }
}

/// The f32 forward by [`conv2d_forward_direct`], the residual and ReLU in its output write,
/// where it applies and is the faster kernel on this CPU; `None` elsewhere (and where the
/// residual is not of the output's shape: Burn's add broadcasts that).
fn forward_direct(
    x: &FlexTensor,
    weight: &FlexTensor,
    bias: Option<&FlexTensor>,
    options: &ConvOptions<2>,
    residual: Option<&FlexTensor>,
    relu: bool,
) -> Option<FlexTensor> {
    if !direct_conv_is_fast_here() {
        return None;
    }
    let residual = residual.map(contiguous);
    forward_by(x, weight, bias, options, |x, w, b, g| {
        let residual = match &residual {
            Some(residual) => {
                let [oh, ow] = g.out_size;
                if dims(residual) != [g.batch, g.out_channels, oh, ow] {
                    return None;
                }
                Some(slice::<f32>(residual))
            }
            None => None,
        };
        conv2d_forward_direct(x, w, b, g, Epilogue { residual, relu })
    })
}

/// The `[N, C, H·W]` geometry of `x` and the float type shared with `others`, where `x` is 4-D,
/// each of `others` is `[N, C, H, W]` (`false`) or `[N, 1, H, W]` (`true`), and all are f32 or
/// f64; `None` otherwise.
fn gate_geometry(x: &FlexTensor, others: &[(&FlexTensor, bool)]) -> Option<(GateGeometry, DType)> {
    let [batch, channels, h, w] = four(x)?;
    let fits = others.iter().all(|(t, per_pixel)| {
        let c = if *per_pixel { 1 } else { channels };
        four(t) == Some([batch, c, h, w])
    });
    let mut tensors = vec![x];
    tensors.extend(others.iter().map(|(t, _)| *t));
    let dtype = float_type(&tensors)?;
    fits.then_some((
        GateGeometry {
            batch,
            channels,
            plane: h * w,
        },
        dtype,
    ))
}

/// Flex's tensor as one of Burn's, for the reference ops.
fn burn_tensor(tensor: FlexTensor) -> Tensor<Flex, 4> {
    Tensor::from_primitive(TensorPrimitive::Float(tensor))
}

fn flex_tensor(tensor: Tensor<Flex, 4>) -> FlexTensor {
    tensor.into_primitive().tensor()
}

/// [`pixel_gate::channel_dot`], or Burn's ops where the shapes or types do not fit.
fn gate_channel_dot(a: FlexTensor, b: FlexTensor) -> FlexTensor {
    let Some((g, dtype)) = gate_geometry(&a, &[(&b, false)]) else {
        return flex_tensor(super::channel_dot_by_burn(burn_tensor(a), burn_tensor(b)));
    };
    let [a, b] = [&a, &b].map(contiguous);
    let shape = per_pixel_shape(&a);
    match dtype {
        DType::F32 => tensor_of(
            pixel_gate::channel_dot::<f32>(slice(&a), slice(&b), &g),
            shape,
        ),
        _ => tensor_of(
            pixel_gate::channel_dot::<f64>(slice(&a), slice(&b), &g),
            shape,
        ),
    }
}

/// `[N, 1, H, W]` of an `[N, C, H, W]` tensor.
fn per_pixel_shape(x: &FlexTensor) -> Vec<usize> {
    let mut shape = dims(x);
    if let Some(channels) = shape.get_mut(1) {
        *channels = 1;
    }
    shape
}

/// [`pixel_gate::scale_by_pixel`], or Burn's ops where the shapes or types do not fit.
fn gate_scale_by_pixel(x: FlexTensor, s: FlexTensor) -> FlexTensor {
    let Some((g, dtype)) = gate_geometry(&x, &[(&s, true)]) else {
        return flex_tensor(burn_tensor(x) * burn_tensor(s));
    };
    let [x, s] = [&x, &s].map(contiguous);
    let shape = dims(&x);
    match dtype {
        DType::F32 => tensor_of(
            pixel_gate::scale_by_pixel::<f32>(slice(&x), slice(&s), &g),
            shape,
        ),
        _ => tensor_of(
            pixel_gate::scale_by_pixel::<f64>(slice(&x), slice(&s), &g),
            shape,
        ),
    }
}

/// [`pixel_gate::gate_blend`], or Burn's ops where the shapes or types do not fit.
fn gate_blend_tensors(x: FlexTensor, y: FlexTensor, s: FlexTensor) -> FlexTensor {
    let Some((g, dtype)) = gate_geometry(&x, &[(&y, false), (&s, true)]) else {
        let [x, y, s] = [x, y, s].map(burn_tensor);
        return flex_tensor(super::gate_blend_by_burn(x, y, s));
    };
    let [x, y, s] = [&x, &y, &s].map(contiguous);
    let shape = dims(&x);
    match dtype {
        DType::F32 => tensor_of(
            pixel_gate::gate_blend::<f32>(slice(&x), slice(&y), slice(&s), &g),
            shape,
        ),
        _ => tensor_of(
            pixel_gate::gate_blend::<f64>(slice(&x), slice(&y), slice(&s), &g),
            shape,
        ),
    }
}

/// [`pixel_gate::gate_blend_grad`], or Burn's ops where the shapes or types do not fit.
fn gate_blend_grad_tensors(
    x: FlexTensor,
    y: FlexTensor,
    s: FlexTensor,
    output_grad: FlexTensor,
) -> [FlexTensor; 3] {
    let Some((g, dtype)) = gate_geometry(&x, &[(&y, false), (&s, true), (&output_grad, false)])
    else {
        let [x, y, s, dout] = [x, y, s, output_grad].map(burn_tensor);
        let dx = dout.clone() * (s.clone().neg() + 1.0);
        let dy = dout.clone() * s;
        let ds = (dout * (y - x)).sum_dim(1);
        return [dx, dy, ds].map(flex_tensor);
    };
    let [x, y, s, dout] = [&x, &y, &s, &output_grad].map(contiguous);
    let (shape, pixel_shape) = (dims(&x), per_pixel_shape(&x));
    fn tensors<T: Element>(
        grads: [Vec<T>; 3],
        shape: Vec<usize>,
        pixel: Vec<usize>,
    ) -> [FlexTensor; 3] {
        let [dx, dy, ds] = grads;
        [
            tensor_of(dx, shape.clone()),
            tensor_of(dy, shape),
            tensor_of(ds, pixel),
        ]
    }
    match dtype {
        DType::F32 => tensors(
            pixel_gate::gate_blend_grad::<f32>(slice(&x), slice(&y), slice(&s), slice(&dout), &g),
            shape,
            pixel_shape,
        ),
        _ => tensors(
            pixel_gate::gate_blend_grad::<f64>(slice(&x), slice(&y), slice(&s), slice(&dout), &g),
            shape,
            pixel_shape,
        ),
    }
}

/// The input gradient by [`conv2d_input_grad`]; `None` where the shapes do not fit (then
/// Burn's op runs and reports them).
fn input_grad<T: GemmFloat + Element + bytemuck::Pod>(
    x: &FlexTensor,
    weight: &FlexTensor,
    output_grad: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    let geometry = geometry(x, weight, Some(output_size(output_grad)?), options)?;
    let [weight, output_grad] = [weight, output_grad].map(contiguous);
    let values = conv2d_input_grad(slice::<T>(&weight), slice::<T>(&output_grad), &geometry);
    Some(tensor_of(values, dims(x)))
}

/// `[H, W]` of an `[N, C, H, W]` tensor.
fn output_size(tensor: &FlexTensor) -> Option<[usize; 2]> {
    match dims(tensor).as_slice() {
        [_, _, h, w] => Some([*h, *w]),
        _ => None,
    }
}

/// The weight gradient by [`conv2d_weight_grad`]; `None` where the shapes are not those of a
/// 2-D convolution with `options` (then Burn's op runs).
fn weight_grad<T: GemmFloat + Element + bytemuck::Pod>(
    x: &FlexTensor,
    weight: &FlexTensor,
    output_grad: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    let geometry = geometry(x, weight, Some(output_size(output_grad)?), options)?;
    let [x, output_grad] = [x, output_grad].map(contiguous);
    let values = conv2d_weight_grad(slice::<T>(&x), slice::<T>(&output_grad), &geometry);
    Some(tensor_of(values, dims(weight)))
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
