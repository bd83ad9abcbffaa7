//! Materialised transposes, for tensors that many later ops read.
//!
//! Burn's `swap_dims` is a view. On Flex every element-wise op, reduction or attention whose
//! operand is such a view walks it through a strided index, element by element; in SAM2's
//! mask decoder the image tokens (`[B, C, h, w]` seen as `[B, h·w, C]`) went through that walk
//! in every addition of a position encoding, 40 % of the decoder's forward time. Copying the
//! view once, image by image (each image a 2-D transpose, which Flex copies in cache-sized
//! tiles), makes every later read contiguous. On other backends the copy is what their own
//! `into_contiguous` would do.

use burn::tensor::{backend::Backend, Tensor};
pub use segburn_kernels::copy_2d;

/// `[B, M, N] -> [B, N, M]`, contiguous.
pub fn transposed_copy<B: Backend>(x: Tensor<B, 3>) -> Tensor<B, 3> {
    let [batch, m, n] = x.dims();
    let x = x.swap_dims(1, 2);
    if batch == 1 {
        return copy_2d(x.reshape([n, m])).reshape([1, n, m]);
    }
    // A reshape of a 3-D view that does not collapse to 2-D copies element by element on
    // Flex; one 2-D copy per image does not.
    let images = (0..batch)
        .map(|i| copy_2d(x.clone().narrow(0, i, 1).reshape([n, m])).reshape([1, n, m]))
        .collect();
    Tensor::cat(images, 0)
}

/// `[B, C, h, w] -> [B, h·w, C]` (token `y·w + x` of each image), contiguous.
pub fn channels_last_tokens<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 3> {
    let [batch, channels, h, w] = x.dims();
    transposed_copy(x.reshape([batch, channels, h * w]))
}

/// `[B, h·w, C] -> [B, C, h, w]`, contiguous: the inverse of [`channels_last_tokens`].
pub fn channels_first_image<B: Backend>(tokens: Tensor<B, 3>, [h, w]: [usize; 2]) -> Tensor<B, 4> {
    let [batch, _, channels] = tokens.dims();
    transposed_copy(tokens).reshape([batch, channels, h, w])
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::{Tensor, TensorData, Tolerance};

    use super::*;

    fn ramp<B: Backend, const D: usize>(shape: [usize; D]) -> Tensor<B, D> {
        let len = shape.iter().product::<usize>();
        Tensor::<B, 1>::from_data(
            TensorData::new((0..len).map(|v| v as f32).collect::<Vec<_>>(), [len]),
            &Default::default(),
        )
        .reshape(shape)
    }

    #[test]
    fn transposed_copy_equals_the_view_for_one_and_several_images() {
        for batch in [1, 3] {
            let x = ramp::<Flex, 3>([batch, 5, 7]);
            let view = x.clone().swap_dims(1, 2).into_data();
            let copy = transposed_copy(x).into_data();
            assert_eq!(copy.shape, view.shape);
            assert_eq!(copy.to_vec::<f32>().unwrap(), view.to_vec::<f32>().unwrap());
        }
    }

    #[test]
    fn tokens_round_trip_to_the_image() {
        let image = ramp::<Flex, 4>([2, 3, 4, 5]);
        let tokens = channels_last_tokens(image.clone());
        assert_eq!(tokens.dims(), [2, 20, 3]);
        // Token y·w + x of image n holds the channel vector at (y, x).
        let token = tokens.clone().narrow(0, 1, 1).narrow(1, 2 * 5 + 3, 1);
        let pixel = image
            .clone()
            .narrow(0, 1, 1)
            .narrow(2, 2, 1)
            .narrow(3, 3, 1);
        assert_eq!(
            token.into_data().to_vec::<f32>().unwrap(),
            pixel.into_data().to_vec::<f32>().unwrap()
        );
        let back = channels_first_image(tokens, [4, 5]).into_data();
        back.assert_approx_eq::<f32>(&image.into_data(), Tolerance::absolute(0.0));
    }

    #[test]
    fn gradient_flows_back_through_the_copy() {
        type Ad = Autodiff<Flex>;
        let x = ramp::<Ad, 3>([2, 3, 4]).require_grad();
        let weights = ramp::<Ad, 3>([2, 4, 3]);
        let loss = (transposed_copy(x.clone()) * weights.clone()).sum();
        let grad = x.grad(&loss.backward()).expect("x requires a gradient");
        let expected = weights.inner().swap_dims(1, 2).into_data();
        grad.into_data()
            .assert_approx_eq::<f32>(&expected, Tolerance::absolute(0.0));
    }
}
