//! Window partitioning and 2×2 max pooling of channel-last (BHWC) maps, as Hiera uses them.
//!
//! `window_partition` pads the bottom and right with zeros and cuts the map into `ws × ws`
//! windows, ordered (batch, window row, window column); `window_unpartition` reverses it and
//! crops the padding. The padding is added to whatever the caller passes (Hiera passes the
//! normed input), and nothing masks it later: padded tokens take part in attention.

use burn::tensor::{backend::Backend, Tensor};

use segburn_kernels as kernels;

/// Zero-pads `[B, H, W, C]` at the bottom and the right to `[B, H + ph, W + pw, C]`.
fn pad_bottom_right<B: Backend>(x: Tensor<B, 4>, ph: usize, pw: usize) -> Tensor<B, 4> {
    let [b, h, w, c] = x.dims();
    let device = x.device();
    let dtype = x.dtype();
    let x = if pw > 0 {
        Tensor::cat(vec![x, Tensor::zeros([b, h, pw, c], (&device, dtype))], 2)
    } else {
        x
    };
    if ph > 0 {
        Tensor::cat(
            vec![x, Tensor::zeros([b, ph, w + pw, c], (&device, dtype))],
            1,
        )
    } else {
        x
    }
}

/// The padded size of `[h, w]` for windows of `ws`.
pub fn padded_size([h, w]: [usize; 2], ws: usize) -> [usize; 2] {
    [h.div_ceil(ws) * ws, w.div_ceil(ws) * ws]
}

/// `[B, H, W, C]` -> `[B·nH·nW, ws, ws, C]` and the padded size `[Hp, Wp]`.
pub fn window_partition<B: Backend>(x: Tensor<B, 4>, ws: usize) -> (Tensor<B, 4>, [usize; 2]) {
    let [b, h, w, c] = x.dims();
    let [hp, wp] = padded_size([h, w], ws);
    let x = pad_bottom_right(x, hp - h, wp - w);
    // A row-major copy (`kernels::permute`): Flex would copy this view element by element.
    let windows = kernels::permute(
        x.reshape([b, hp / ws, ws, wp / ws, ws, c]),
        [0, 1, 3, 2, 4, 5],
    )
    .reshape([b * (hp / ws) * (wp / ws), ws, ws, c]);
    (windows, [hp, wp])
}

/// `[B·nH·nW, ws, ws, C]` -> `[B, H, W, C]`: reassembles the `[Hp, Wp]` map and crops it to
/// `[H, W]`.
pub fn window_unpartition<B: Backend>(
    windows: Tensor<B, 4>,
    ws: usize,
    [hp, wp]: [usize; 2],
    [h, w]: [usize; 2],
) -> Tensor<B, 4> {
    let [n, _, _, c] = windows.dims();
    let b = n / ((hp / ws) * (wp / ws));
    let x = kernels::permute(
        windows.reshape([b, hp / ws, wp / ws, ws, ws, c]),
        [0, 1, 3, 2, 4, 5],
    )
    .reshape([b, hp, wp, c]);
    if hp == h && wp == w {
        x
    } else {
        x.slice([0..b, 0..h, 0..w, 0..c])
    }
}

/// `nn.MaxPool2d(2, 2)` over H and W of `[B, H, W, C]` -> `[B, H/2, W/2, C]` (odd sizes are
/// floored).
///
/// One copy gathers the four corners of every 2×2 block into four contiguous quarters (our
/// permute kernel), then three element-wise maxima: `max(max(top-left, top-right),
/// max(bottom-left, bottom-right))`. `max_pair` keeps its left operand on a tie, so with ties
/// (padded tokens all carry the same value) the value and its gradient come from the first
/// element in row-major order, as in PyTorch. (A reduction with `max_dim` over the size-2 axes
/// walked Flex's strided indices element by element: 8 % of the Hiera-T forward.)
pub fn max_pool_2x2<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 4> {
    let [b, h, w, c] = x.dims();
    let [h2, w2] = [h / 2, w / 2];
    let x = if h % 2 == 1 || w % 2 == 1 {
        x.slice([0..b, 0..2 * h2, 0..2 * w2, 0..c])
    } else {
        x
    };
    // [B·H/2, row in block, W/2, column in block, C] -> [row, column, B·H/2, W/2, C]
    let quarters = kernels::permute(x.reshape([b * h2, 2, w2, 2, c]), [1, 3, 0, 2, 4]);
    let corner = |row: usize, column: usize| {
        quarters
            .clone()
            .narrow(0, row, 1)
            .narrow(1, column, 1)
            .reshape([b, h2, w2, c])
    };
    let top = corner(0, 0).max_pair(corner(0, 1));
    let bottom = corner(1, 0).max_pair(corner(1, 1));
    top.max_pair(bottom)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{flex::FlexDevice, Flex};
    use burn::tensor::TensorData;

    #[test]
    fn partition_pads_with_zeros_and_unpartition_crops_back() {
        let device = FlexDevice;
        let values: Vec<f32> = (0..2 * 5 * 3 * 2).map(|v| v as f32 + 1.0).collect();
        let x = Tensor::<Flex, 4>::from_data(TensorData::new(values, [2, 5, 3, 2]), &device);
        let (windows, padded) = window_partition(x.clone(), 2);
        assert_eq!(padded, [6, 4]);
        assert_eq!(windows.dims(), [2 * 3 * 2, 2, 2, 2]);
        // Window (batch 0, row 0, col 1) holds column 2 of rows 0-1 and the zero padding.
        let second: Vec<f32> = windows
            .clone()
            .narrow(0, 1, 1)
            .into_data()
            .to_vec()
            .unwrap();
        assert_eq!(second, [5.0, 6.0, 0.0, 0.0, 11.0, 12.0, 0.0, 0.0]);
        let back = window_unpartition(windows, 2, padded, [5, 3]);
        assert_eq!(back.into_data(), x.into_data());
    }

    #[test]
    fn max_pool_floors_odd_sizes() {
        let device = FlexDevice;
        let values: Vec<f32> = (0..15).map(|v| v as f32).collect();
        let x = Tensor::<Flex, 4>::from_data(TensorData::new(values, [1, 3, 5, 1]), &device);
        let pooled: Vec<f32> = max_pool_2x2(x).into_data().to_vec().unwrap();
        assert_eq!(pooled, [6.0, 8.0]);
    }

    #[test]
    fn max_pool_matches_a_max_reduction_and_breaks_ties_row_major() {
        use burn::backend::Autodiff;
        let device = FlexDevice;
        let values: Vec<f32> = (0..2 * 6 * 4 * 3).map(|v| ((v * 37) % 23) as f32).collect();
        let x = Tensor::<Flex, 4>::from_data(TensorData::new(values, [2, 6, 4, 3]), &device);
        let reference = x
            .clone()
            .reshape([2, 3, 2, 2, 2, 3])
            .max_dim(4)
            .max_dim(2)
            .reshape([2, 3, 2, 3]);
        assert_eq!(max_pool_2x2(x).into_data(), reference.into_data());

        // A block of equal values: the gradient goes to its first element only, and the two
        // channels are pooled apart.
        let tied = Tensor::<Autodiff<Flex>, 4>::from_data(
            TensorData::new(
                vec![1.0f32, 5.0, 1.0, 2.0, 1.0, 9.0, 1.0, 3.0],
                [1, 2, 2, 2],
            ),
            &device,
        )
        .require_grad();
        let pooled = max_pool_2x2(tied.clone());
        let pooled_values: Vec<f32> = pooled.clone().inner().into_data().to_vec().unwrap();
        assert_eq!(pooled_values, [1.0, 9.0]);
        let grads = pooled.sum().backward();
        let grad: Vec<f32> = tied.grad(&grads).unwrap().into_data().to_vec().unwrap();
        assert_eq!(grad, [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
    }
}
