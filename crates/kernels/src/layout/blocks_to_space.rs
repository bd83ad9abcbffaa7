//! The rearrangement that turns a transposed convolution whose kernel equals its stride into a
//! matrix product: `[N, C·k·k, H, W] -> [N, C, k·H, k·W]`, channel `(c, i, j)` at `(y, x)`
//! going to pixel `(k·y + i, k·x + j)` of channel `c`, and its inverse (the gradient).
//!
//! Such a convolution (SAM2's mask-decoder upscaling: 2×2, stride 2) writes every output pixel
//! from exactly one input pixel, so it is `Wᵀ X` per image (`W` as `[C_in, C_out·k·k]`, `X` as
//! `[C_in, H·W]`) followed by this copy. Flex runs the product at its matrix speed; its own
//! transposed convolution, and above all that convolution's weight gradient (a convolution over
//! an expanded 3-D view, copied element by element), took 9 % of a SAM2 training step. Both
//! directions here are plain copies of rows, in parallel over output planes.

use rayon::prelude::*;

/// The shape `[N, C, H, W]` of the small side and the block size `k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocks {
    pub batch: usize,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub block: usize,
}

impl Blocks {
    /// Values on either side.
    pub fn len(&self) -> usize {
        self.batch * self.channels * self.block * self.block * self.height * self.width
    }

    /// Whether there is nothing to move.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// For output plane `plane` (image and channel), block row `y` and block position
    /// `(i, j)`: where the `W` values of block channel `(c, i, j)`, row `y`, start on the
    /// small side, and where they start on the large side (at a stride of `k` there).
    fn offsets(&self, plane: usize, y: usize, i: usize, j: usize) -> (usize, usize) {
        let (k, h, w) = (self.block, self.height, self.width);
        let (image, channel) = (plane / self.channels, plane % self.channels);
        let block_channel = (image * self.channels + channel) * k * k + i * k + j;
        let input = (block_channel * h + y) * w;
        let output = plane * k * h * k * w + (k * y + i) * k * w + j;
        (input, output)
    }
}

/// Fills `out` (planes of `k·k·H·W` values, one per image and channel, in parallel) row by
/// row: `copy_row(plane values, small, large)` for every block row `y` and block position
/// `(i, j)` of every plane, where `small` and `large` are where that row starts on the small
/// and the large side (both relative to the buffer's start; on the large side its `W` values
/// lie `k` apart).
fn for_each_block_row<T: Send>(
    out: &mut [T],
    blocks: &Blocks,
    copy_row: impl Fn(&mut [T], usize, usize, usize) + Sync,
) {
    let (k, h) = (blocks.block, blocks.height);
    let plane_len = (k * k * h * blocks.width).max(1);
    out.par_chunks_mut(plane_len)
        .enumerate()
        .for_each(|(plane, values)| {
            for y in 0..h {
                for i in 0..k {
                    for j in 0..k {
                        let (small, large) = blocks.offsets(plane, y, i, j);
                        copy_row(values, plane * plane_len, small, large);
                    }
                }
            }
        });
}

/// `[N, C·k·k, H, W] -> [N, C, k·H, k·W]`.
///
/// # Panics
/// If `input` does not have `blocks.len()` values (a caller bug: the dispatch checks shapes).
pub fn blocks_to_space<T: Copy + Default + Send + Sync>(input: &[T], blocks: &Blocks) -> Vec<T> {
    assert_eq!(input.len(), blocks.len(), "{blocks:?}");
    let (k, w) = (blocks.block, blocks.width);
    let mut output = vec![T::default(); input.len()];
    for_each_block_row(&mut output, blocks, |plane, start, small, large| {
        for (x, &value) in input[small..small + w].iter().enumerate() {
            plane[large - start + k * x] = value;
        }
    });
    output
}

/// `[N, C, k·H, k·W] -> [N, C·k·k, H, W]`, the inverse of [`blocks_to_space`] (and so its
/// gradient: a permutation's gradient is the inverse permutation).
///
/// # Panics
/// If `space` does not have `blocks.len()` values.
pub fn space_to_blocks<T: Copy + Default + Send + Sync>(space: &[T], blocks: &Blocks) -> Vec<T> {
    assert_eq!(space.len(), blocks.len(), "{blocks:?}");
    let (k, w) = (blocks.block, blocks.width);
    let mut output = vec![T::default(); space.len()];
    // The `k·k` block channels of one image and channel are one contiguous run of the result,
    // as long as one plane of the large side.
    for_each_block_row(&mut output, blocks, |plane, start, small, large| {
        for (x, slot) in plane[small - start..small - start + w]
            .iter_mut()
            .enumerate()
        {
            *slot = space[large + k * x];
        }
    });
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_each_block_channel_to_its_pixel_and_back() {
        let blocks = Blocks {
            batch: 2,
            channels: 3,
            height: 4,
            width: 5,
            block: 2,
        };
        let input: Vec<usize> = (0..blocks.len()).collect();
        let space = blocks_to_space(&input, &blocks);
        let (c, h, w, k) = (3, 4, 5, 2);
        for n in 0..2 {
            for ch in 0..c {
                for i in 0..k {
                    for j in 0..k {
                        for y in 0..h {
                            for x in 0..w {
                                let from = (((n * c + ch) * k * k + i * k + j) * h + y) * w + x;
                                let to = ((n * c + ch) * k * h + k * y + i) * k * w + k * x + j;
                                assert_eq!(space[to], input[from]);
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(space_to_blocks(&space, &blocks), input);
    }

    /// `kernels::conv_transpose2d` (product + our copy) against Burn's `conv_transpose2d` on
    /// `Autodiff<Flex>`, values and the gradients of input, weight and bias; and the copy's two
    /// directions on plain Flex against Burn's 6-D permutation.
    #[test]
    fn conv_transpose_as_products_matches_burns_op() {
        use burn::backend::{Autodiff, Flex};
        use burn::tensor::ops::ConvTransposeOptions;
        use burn::tensor::{DType, Tensor, TensorData, TensorPrimitive};

        use crate::accuracy::test_values;
        use crate::accuracy::{rel_l2, tensor_values};
        use crate::{conv_transpose2d, LayoutKernels};

        type Ad = Autodiff<Flex>;
        let tensor = |shape: Vec<usize>, seed: u64, dtype: DType| {
            let len = shape.iter().product::<usize>();
            Tensor::<Ad, 1>::from_data(
                TensorData::new(test_values(len, seed), [len]),
                &Default::default(),
            )
            .cast(dtype)
        };
        for (input, out_channels, k) in [([2, 6, 5, 7], 4, 2), ([1, 3, 4, 3], 2, 3)] {
            for dtype in [DType::F64, DType::F32] {
                let [n, c, h, w] = input;
                let run =
                    |ours: bool| {
                        let x = tensor(input.to_vec(), 1, dtype)
                            .reshape(input)
                            .require_grad();
                        let weight = tensor(vec![c, out_channels, k, k], 2, dtype)
                            .reshape([c, out_channels, k, k])
                            .require_grad();
                        let bias = tensor(vec![out_channels], 3, dtype)
                            .reshape([out_channels])
                            .require_grad();
                        let options = ConvTransposeOptions::new([k, k], [0, 0], [0, 0], [1, 1], 1);
                        let out = if ours {
                            conv_transpose2d(
                                x.clone(),
                                weight.clone(),
                                Some(bias.clone()),
                                options.clone(),
                            )
                        } else {
                            burn::tensor::module::conv_transpose2d(
                                x.clone(),
                                weight.clone(),
                                Some(bias.clone()),
                                options.clone(),
                            )
                        };
                        assert_eq!(out.dims(), [n, out_channels, k * h, k * w]);
                        let probe = tensor(vec![n, out_channels, k * h, k * w], 4, dtype)
                            .reshape([n, out_channels, k * h, k * w]);
                        let grads = (out.clone() * probe).sum().backward();
                        if ours {
                            let plain = conv_transpose2d(
                                x.clone().inner(),
                                weight.clone().inner(),
                                Some(bias.clone().inner()),
                                options,
                            );
                            let e =
                                rel_l2(&tensor_values(plain), &tensor_values(out.clone().inner()));
                            assert!(e == 0.0, "inference differs from training: {e:e}");
                        }
                        let grad =
                            |t: Tensor<Ad, 4>| tensor_values(t.grad(&grads).expect("tracked"));
                        [
                            tensor_values(out.inner()),
                            grad(x),
                            grad(weight),
                            tensor_values(bias.grad(&grads).expect("tracked")),
                        ]
                    };
                let (ours, burn) = (run(true), run(false));
                // The copy both ways on plain Flex against Burn's permutation (`blocks_by_burn`
                // is what the trait falls back to for other dtypes).
                let blocks = tensor(vec![n, out_channels * k * k, h, w], 5, dtype)
                    .reshape([n, out_channels * k * k, h, w])
                    .inner();
                let space = Tensor::<Flex, 4>::from_primitive(TensorPrimitive::Float(
                    Flex::blocks_to_space(blocks.clone().into_primitive().tensor(), k),
                ));
                let by_permutation = blocks
                    .clone()
                    .reshape([n, out_channels, k, k, h, w])
                    .permute([0, 1, 4, 2, 5, 3])
                    .reshape([n, out_channels, k * h, k * w]);
                assert_eq!(tensor_values(space.clone()), tensor_values(by_permutation));
                let back = Flex::space_to_blocks(space.into_primitive().tensor(), k);
                let back = Tensor::<Flex, 4>::from_primitive(TensorPrimitive::Float(back));
                assert_eq!(tensor_values(back), tensor_values(blocks));
                let tolerance = if dtype == DType::F64 { 1e-12 } else { 1e-6 };
                for (what, (a, b)) in ["output", "dx", "dweight", "dbias"]
                    .iter()
                    .zip(ours.iter().zip(&burn))
                {
                    let e = rel_l2(a, b);
                    assert!(e <= tolerance, "{what} {input:?} k {k} {dtype:?}: {e:e}");
                }
            }
        }
    }
}
