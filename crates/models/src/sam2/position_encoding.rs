//! Random Fourier-feature position encoding (`PositionEmbeddingRandom`).
//!
//! Coordinates in `[0, 1]²` are mapped to `[sin(2π(2c−1)G), cos(2π(2c−1)G)]` with a fixed
//! Gaussian matrix `G` (`[2, num_pos_feats]`). `G` is a buffer in the official model: it is saved
//! in the state dict but never trained, so here it is a `Param` with `require_grad = false`: it is
//! visited on import/export, yet produces no gradient and the optimizer never touches it (no
//! weight decay either).

use std::f64::consts::PI;

use burn::config::Config;
use burn::module::{Module, Param, ParamId};
use burn::tensor::{backend::Backend, Distribution, Tensor, TensorData};

/// Configuration of a [`PositionEmbeddingRandom`].
#[derive(Config, Debug)]
pub struct PositionEmbeddingRandomConfig {
    /// Half the output channels (128 for SAM2's 256-channel embeddings).
    pub num_pos_feats: usize,
    /// Standard deviation of the Gaussian matrix.
    #[config(default = 1.0)]
    pub scale: f64,
}

/// The random Fourier position encoding; the output has `2 · num_pos_feats` channels.
#[derive(Module, Debug)]
pub struct PositionEmbeddingRandom<B: Backend> {
    /// `[2, num_pos_feats]`, a non-trained buffer.
    pub positional_encoding_gaussian_matrix: Param<Tensor<B, 2>>,
}

impl PositionEmbeddingRandomConfig {
    /// Draws `G ~ scale · N(0, 1)` from the backend's RNG.
    pub fn init<B: Backend>(&self, device: &B::Device) -> PositionEmbeddingRandom<B> {
        let matrix = Tensor::random(
            [2, self.num_pos_feats],
            Distribution::Normal(0.0, 1.0),
            device,
        ) * self.scale;
        PositionEmbeddingRandom {
            positional_encoding_gaussian_matrix: buffer(matrix),
        }
    }
}

/// Wraps a tensor as a non-trained parameter (a PyTorch buffer).
pub(crate) fn buffer<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> Param<Tensor<B, D>> {
    Param::initialized(ParamId::new(), tensor).set_require_grad(false)
}

impl<B: Backend> PositionEmbeddingRandom<B> {
    /// Encodes normalised coordinates: `[..., 2]` (x, y in `[0, 1]`) -> `[..., 2·num_pos_feats]`.
    fn pe_encoding<const D: usize>(&self, coords: Tensor<B, D>) -> Tensor<B, D> {
        let matrix = self.positional_encoding_gaussian_matrix.val();
        let [_, feats] = matrix.dims();
        let mut shape = coords.dims();
        let rows: usize = shape[..D - 1].iter().product();
        let flat = coords.reshape([rows, 2]) * 2.0 - 1.0;
        // torch evaluates `2 * np.pi * coords` as one f32 multiply by the rounded 2π.
        let projected = flat.matmul(matrix) * (2.0 * PI);
        let encoded = Tensor::cat(vec![projected.clone().sin(), projected.cos()], 1);
        shape[D - 1] = 2 * feats;
        encoded.reshape(shape)
    }

    /// The dense encoding of an `h × w` grid of cell centres: `[2·num_pos_feats, h, w]`.
    ///
    /// Coordinates are `((j + 0.5)/w, (i + 0.5)/h)`, x first.
    pub fn forward(&self, size: [usize; 2]) -> Tensor<B, 3> {
        let [h, w] = size;
        let mut grid = Vec::with_capacity(h * w * 2);
        for i in 0..h {
            for j in 0..w {
                grid.push((j as f32 + 0.5) / w as f32);
                grid.push((i as f32 + 0.5) / h as f32);
            }
        }
        let matrix = self.positional_encoding_gaussian_matrix.val();
        // The grid is built in f32 as upstream, then follows the matrix's dtype (f64 runs).
        let coords = Tensor::<B, 3>::from_data(
            TensorData::new(grid, [h, w, 2]),
            (&matrix.device(), matrix.dtype()),
        );
        self.pe_encoding(coords).permute([2, 0, 1])
    }

    /// Encodes points given in input-image pixels: `[B, N, 2]` (x, y) -> `[B, N, 2·num_pos_feats]`.
    ///
    /// `image_size` is `(H, W)` of the input image; x is divided by W and y by H.
    pub fn forward_with_coords(
        &self,
        coords: Tensor<B, 3>,
        image_size: [usize; 2],
    ) -> Tensor<B, 3> {
        let [height, width] = image_size;
        let device = coords.device();
        let divisor = Tensor::<B, 1>::from_data(
            TensorData::new(vec![width as f32, height as f32], [2]),
            (&device, coords.dtype()),
        )
        .reshape([1, 1, 2]);
        self.pe_encoding(coords / divisor)
    }
}
