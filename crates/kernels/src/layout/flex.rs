//! [`LayoutKernels`] on Flex: the copies on Flex's buffers in f32 or f64, Burn's ops for other
//! float types and shapes the kernels do not take.

use burn::backend::Flex;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, Element};
use burn_flex::FlexTensor;

use super::{blocks_to_space, copy_strided, space_to_blocks, Blocks, LayoutKernels};
use crate::flex_buffers::{
    burn_tensor, contiguous, dims, flex_tensor, float_type, slice, tensor_of,
};

impl LayoutKernels for Flex {
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
}

/// Which way [`move_blocks`] goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// `[N, C·k·k, H, W] -> [N, C, k·H, k·W]`.
    ToSpace,
    /// `[N, C, k·H, k·W] -> [N, C·k·k, H, W]`.
    ToBlocks,
}

/// The small-side shape of `x` going `direction`; `None` where `x` is not 4-D or its sizes
/// are not multiples of what `k` needs.
fn blocks_of(x: &FlexTensor, k: usize, direction: Direction) -> Option<Blocks> {
    let [batch, channels, h, w]: [usize; 4] = dims(x).try_into().ok()?;
    match direction {
        Direction::ToSpace => (k > 0 && channels % (k * k) == 0).then_some(Blocks {
            batch,
            channels: channels / (k * k),
            height: h,
            width: w,
            block: k,
        }),
        Direction::ToBlocks => (k > 0 && h % k == 0 && w % k == 0).then_some(Blocks {
            batch,
            channels,
            height: h / k,
            width: w / k,
            block: k,
        }),
    }
}

fn move_blocks<T: Element + bytemuck::Pod + Default>(
    x: &FlexTensor,
    k: usize,
    direction: Direction,
) -> Option<FlexTensor> {
    let blocks = blocks_of(x, k, direction)?;
    let x = contiguous(x);
    let values = slice::<T>(&x);
    if values.len() != blocks.len() {
        return None;
    }
    let (c, h, w) = (blocks.channels, blocks.height, blocks.width);
    let (moved, shape) = match direction {
        Direction::ToSpace => (
            blocks_to_space(values, &blocks),
            [blocks.batch, c, k * h, k * w],
        ),
        Direction::ToBlocks => (
            space_to_blocks(values, &blocks),
            [blocks.batch, c * k * k, h, w],
        ),
    };
    Some(tensor_of(moved, shape.to_vec()))
}

/// [`move_blocks`] by Burn's ops (a 6-D permutation), for the dtypes and shapes the kernel does
/// not take.
fn blocks_by_burn(x: FlexTensor, k: usize, direction: Direction) -> FlexTensor {
    let x = burn_tensor::<4>(x);
    let [n, c, h, w] = x.dims();
    let k = k.max(1);
    let out = match direction {
        Direction::ToSpace => {
            let c = c / (k * k);
            x.reshape([n, c, k, k, h, w])
                .permute([0, 1, 4, 2, 5, 3])
                .reshape([n, c, k * h, k * w])
        }
        Direction::ToBlocks => {
            let (h, w) = (h / k, w / k);
            x.reshape([n, c, h, k, w, k])
                .permute([0, 1, 3, 5, 2, 4])
                .reshape([n, c * k * k, h, w])
        }
    };
    flex_tensor(out)
}
