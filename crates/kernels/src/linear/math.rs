//! A fully connected layer `y = x Wᵀ + b` and its gradients on plain row-major slices, with
//! the weight in PyTorch's `[out, in]` layout, each as one `gemm` product.
//!
//! Why our own: Flex's matmul allocates every output zeroed and then copies it once more (to
//! align it), adds the bias as a separate broadcast, and its gradient products go through
//! transposed views. SAM2's decoder runs some fifty linears per forward pass on small
//! matrices, where those extra passes cost as much as the products.
//!
//! Orientation: `gemm` packs (copies) its left operand unless it is column-major, and which
//! operand that is follows from the output's layout. For `y = x Wᵀ` it is the weight; with
//! few rows (SAM2's output tokens: 7 to 10 per prompt) the product computes `yᵀ = W xᵀ`
//! instead, whose packed operand is `x`, and transposes the small result.

use burn::tensor::{backend::Backend, module::linear, Tensor};
use gemm::Parallelism;

use crate::layout::copy_2d;
use crate::product::{threads_for, GemmFloat, Product};

/// Up to this many rows the forward computes `(W xᵀ)ᵀ` instead of `x Wᵀ`.
const FEW_ROWS: usize = 64;

/// The shapes of one linear: `x` `[rows, inputs]`, `W` `[outputs, inputs]`, `y`
/// `[rows, outputs]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinearShape {
    pub rows: usize,
    pub inputs: usize,
    pub outputs: usize,
}

impl LinearShape {
    /// Whether slices of these lengths are `x`, `W` and, if given, `b` of this shape.
    pub fn fits<T>(&self, x: &[T], weight: &[T], bias: Option<&[T]>) -> bool {
        x.len() == self.rows * self.inputs
            && weight.len() == self.outputs * self.inputs
            && bias.is_none_or(|b| b.len() == self.outputs)
    }

    fn threads(&self) -> Parallelism {
        threads_for(self.rows * self.inputs * self.outputs)
    }
}

/// `y = x Wᵀ + b` (`[rows, outputs]`, row-major).
///
/// # Panics
/// If the slices do not fit `shape` (a caller bug: both come from tensor shapes).
pub fn linear_forward<T: GemmFloat>(
    x: &[T],
    weight: &[T],
    bias: Option<&[T]>,
    shape: &LinearShape,
) -> Vec<T> {
    assert!(shape.fits(x, weight, bias), "linear {shape:?}");
    let LinearShape {
        rows,
        inputs,
        outputs,
    } = *shape;
    if rows <= FEW_ROWS {
        // yᵀ (O×R) = W (O×I) · xᵀ (I×R), then y[r][o] = yᵀ[o][r] + b[o].
        let mut transposed = vec![T::default(); outputs * rows];
        Product {
            shape: [outputs, rows, inputs],
            lhs: (weight, [inputs, 1]),
            rhs: (x, [1, inputs]),
        }
        .into_rows(&mut transposed, rows, false, shape.threads());
        let mut y = vec![T::default(); rows * outputs];
        for (r, row) in y.chunks_exact_mut(outputs.max(1)).enumerate() {
            for (o, value) in row.iter_mut().enumerate() {
                *value = transposed[o * rows + r];
                if let Some(bias) = bias {
                    *value += bias[o];
                }
            }
        }
        return y;
    }
    let mut y = vec![T::default(); rows * outputs];
    if let Some(bias) = bias {
        for row in y.chunks_exact_mut(outputs.max(1)) {
            row.copy_from_slice(bias);
        }
    }
    // y (R×O) [+]= x (R×I) · Wᵀ (I×O).
    Product {
        shape: [rows, outputs, inputs],
        lhs: (x, [inputs, 1]),
        rhs: (weight, [1, inputs]),
    }
    .into_rows(&mut y, outputs, bias.is_some(), shape.threads());
    y
}

/// The gradients of [`linear_forward`] given `dL/dy`: `dx = dy W`, `dW = dyᵀ x` and, with
/// `with_bias`, `db = Σ_rows dy` (summed row after row).
///
/// # Panics
/// If the slices do not fit `shape` (a caller bug).
pub fn linear_backward<T: GemmFloat>(
    x: &[T],
    weight: &[T],
    output_grad: &[T],
    with_bias: bool,
    shape: &LinearShape,
) -> (Vec<T>, Vec<T>, Option<Vec<T>>) {
    assert!(shape.fits(x, weight, None), "linear {shape:?}");
    let LinearShape {
        rows,
        inputs,
        outputs,
    } = *shape;
    assert_eq!(output_grad.len(), rows * outputs, "linear {shape:?}");
    let threads = shape.threads();
    // dx (R×I) = dy (R×O) · W (O×I).
    let mut x_grad = vec![T::default(); rows * inputs];
    Product {
        shape: [rows, inputs, outputs],
        lhs: (output_grad, [outputs, 1]),
        rhs: (weight, [inputs, 1]),
    }
    .into_rows(&mut x_grad, inputs, false, threads);
    // dW (O×I) = dyᵀ (O×R) · x (R×I).
    let mut weight_grad = vec![T::default(); outputs * inputs];
    Product {
        shape: [outputs, inputs, rows],
        lhs: (output_grad, [1, outputs]),
        rhs: (x, [inputs, 1]),
    }
    .into_rows(&mut weight_grad, inputs, false, threads);
    let bias_grad = with_bias.then(|| {
        let mut sum = vec![T::default(); outputs];
        for row in output_grad.chunks_exact(outputs.max(1)) {
            sum.iter_mut().zip(row).for_each(|(s, &g)| *s += g);
        }
        sum
    });
    (x_grad, weight_grad, bias_grad)
}

/// `x Wᵀ + b` by Burn's ops, for every backend and dtype our kernels do not cover, and the
/// reference in the parity tests. Few rows as `(W xᵀ + b)ᵀ`, for the packing reason above
/// (measured on the decoder MLP at 10 rows on Flex: 1.8 → 0.66 ms).
pub fn linear_by_burn<B: Backend>(
    x: Tensor<B, 2>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
) -> Tensor<B, 2> {
    let [rows, _] = x.dims();
    if rows > FEW_ROWS {
        // Flex runs a rank-2 matmul against the transposed (view) weight at full speed.
        return linear(x, weight.transpose(), bias);
    }
    let [outputs, _] = weight.dims();
    let transposed = weight.matmul(x.transpose());
    let transposed = match bias {
        // `[out, 1]`: a column, the broadcast Flex runs fast.
        Some(bias) => transposed + bias.reshape([outputs, 1]),
        None => transposed,
    };
    copy_2d(transposed.transpose())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accuracy::test_values;

    /// `(y, dx, dW, db)` by the definition in f64 for the loss `Σ y · g`.
    fn by_definition(x: &[f64], w: &[f64], b: &[f64], g: &[f64], s: &LinearShape) -> [Vec<f64>; 4] {
        let (r, i, o) = (s.rows, s.inputs, s.outputs);
        let mut y = vec![0.0; r * o];
        let (mut dx, mut dw, mut db) = (vec![0.0; r * i], vec![0.0; o * i], vec![0.0; o]);
        for row in 0..r {
            for out in 0..o {
                y[row * o + out] =
                    b[out] + (0..i).map(|c| x[row * i + c] * w[out * i + c]).sum::<f64>();
                let grad = g[row * o + out];
                db[out] += grad;
                for c in 0..i {
                    dx[row * i + c] += grad * w[out * i + c];
                    dw[out * i + c] += grad * x[row * i + c];
                }
            }
        }
        [y, dx, dw, db]
    }

    #[test]
    fn forward_and_backward_match_the_definition() {
        // Few rows (the transposed product) and many (the direct one), odd widths.
        for s in [
            LinearShape {
                rows: 10,
                inputs: 32,
                outputs: 48,
            },
            LinearShape {
                rows: 3,
                inputs: 5,
                outputs: 1,
            },
            LinearShape {
                rows: 97,
                inputs: 24,
                outputs: 17,
            },
            LinearShape {
                rows: 130,
                inputs: 7,
                outputs: 64,
            },
            // SAM2's sizes: a decoder MLP's few token rows, and many with a short last block.
            LinearShape {
                rows: 10,
                inputs: 256,
                outputs: 1000,
            },
            LinearShape {
                rows: 100,
                inputs: 130,
                outputs: 97,
            },
        ] {
            let x = test_values(s.rows * s.inputs, 3);
            let w = test_values(s.outputs * s.inputs, 5);
            let b = test_values(s.outputs, 7);
            let g = test_values(s.rows * s.outputs, 11);
            let want = by_definition(&x, &w, &b, &g, &s);
            let y = linear_forward(&x, &w, Some(&b), &s);
            let unbiased = linear_forward(&x, &w, None, &s);
            let (dx, dw, db) = linear_backward(&x, &w, &g, true, &s);
            let db = db.expect("asked for");
            let minus_bias: Vec<f64> = want[0]
                .chunks_exact(s.outputs)
                .flat_map(|row| row.iter().zip(&b).map(|(y, b)| y - b))
                .collect();
            for (what, got, want) in [
                ("y", &y, &want[0]),
                ("y without bias", &unbiased, &minus_bias),
                ("dx", &dx, &want[1]),
                ("dW", &dw, &want[2]),
                ("db", &db, &want[3]),
            ] {
                assert_eq!(got.len(), want.len(), "{what} {s:?}");
                for (a, b) in got.iter().zip(want.iter()) {
                    assert!(
                        (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                        "{what} {s:?}: {a} vs {b}"
                    );
                }
            }
            assert!(linear_backward(&x, &w, &g, false, &s).2.is_none());
        }
    }

    /// Values and gradients of the dispatch (our kernel on `Autodiff<Flex>` and on plain
    /// `Flex`) against [`linear_by_burn`] on `Autodiff<Flex>`: in f64 to rounding, in f32
    /// within 3× the f32 error of Burn's ops (both against the f64 result).
    #[test]
    fn dispatch_matches_burns_ops_values_and_gradients() {
        use burn::backend::{Autodiff, Flex};
        use burn::tensor::{DType, TensorData};

        use crate::accuracy::assert_as_accurate_as_burn;
        use crate::accuracy::tensor_values;
        use crate::linear as dispatched;

        type Ad = Autodiff<Flex>;
        fn tensor<const D: usize>(shape: [usize; D], seed: u64, dtype: DType) -> Tensor<Ad, D> {
            let values = test_values(shape.iter().product(), seed);
            Tensor::<Ad, D>::from_data(TensorData::new(values, shape), &Default::default())
                .cast(dtype)
        }
        // `[y, dx, dW, db]` for the loss `Σ y · g` (db empty without a bias).
        let run = |s: LinearShape, with_bias: bool, dtype: DType, own: bool| {
            let x = tensor([s.rows, s.inputs], 61, dtype).require_grad();
            let w = tensor([s.outputs, s.inputs], 67, dtype).require_grad();
            let b = with_bias.then(|| tensor([s.outputs], 71, dtype).require_grad());
            let g = tensor([s.rows, s.outputs], 73, dtype);
            let y = if own {
                dispatched(x.clone(), w.clone(), b.clone())
            } else {
                linear_by_burn(x.clone(), w.clone(), b.clone())
            };
            let grads = (y.clone() * g).sum().backward();
            if own {
                // Inference (plain Flex) gives the same output.
                let plain = dispatched(
                    x.clone().inner(),
                    w.clone().inner(),
                    b.clone().map(|b| b.inner()),
                );
                assert_eq!(tensor_values(plain), tensor_values(y.clone().inner()));
            }
            let bias_grad = b.map_or(Vec::new(), |b| {
                tensor_values(b.grad(&grads).expect("tracked"))
            });
            [
                tensor_values(y.inner()),
                tensor_values(x.grad(&grads).expect("tracked")),
                tensor_values(w.grad(&grads).expect("tracked")),
                bias_grad,
            ]
        };
        for (s, with_bias) in [
            // SAM2's output tokens through the decoder MLP, image tokens, an odd one.
            (
                LinearShape {
                    rows: 10,
                    inputs: 256,
                    outputs: 2048,
                },
                true,
            ),
            (
                LinearShape {
                    rows: 256,
                    inputs: 256,
                    outputs: 128,
                },
                true,
            ),
            (
                LinearShape {
                    rows: 7,
                    inputs: 5,
                    outputs: 3,
                },
                false,
            ),
        ] {
            let exact = run(s, with_bias, DType::F64, false);
            let ours64 = run(s, with_bias, DType::F64, true);
            let ours32 = run(s, with_bias, DType::F32, true);
            let burn32 = run(s, with_bias, DType::F32, false);
            for i in 0..4 {
                let what = ["y", "dx", "dW", "db"][i];
                assert_eq!(exact[i].is_empty(), i == 3 && !with_bias, "{what}");
                if exact[i].is_empty() {
                    continue;
                }
                assert_as_accurate_as_burn(
                    &format!("{what} {s:?}"),
                    [&exact[i], &ours64[i], &ours32[i], &burn32[i]],
                );
            }
        }
    }

    #[test]
    fn slices_that_do_not_fit_are_refused() {
        let s = LinearShape {
            rows: 2,
            inputs: 3,
            outputs: 4,
        };
        assert!(s.fits(&[0.0; 6], &[0.0; 12], Some(&[0.0; 4])));
        assert!(!s.fits(&[0.0; 6], &[0.0; 12], Some(&[0.0; 3])));
        assert!(!s.fits(&[0.0; 5], &[0.0; 12], None));
    }
}
