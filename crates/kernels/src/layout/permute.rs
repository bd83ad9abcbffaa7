//! The copy of a strided view (a permutation of a row-major tensor, possibly narrowed) into a
//! new row-major buffer, run by run and in parallel.
//!
//! Why our own: Flex copies a view that does not collapse to two dimensions element by element
//! through a generic strided index iterator, on one thread. Hiera's window partitions
//! (`[B, H/ws, ws, W/ws, ws, C]` permuted), its `[N, T, 3, heads, d]` → `[3, N, heads, T, d]`
//! split of the attention's projections and the heads' merge are such views: the iterator and
//! the copies around it were about 20 % of the Hiera-T encoder forward. Here each innermost run
//! (usually `ws·C` or `d` contiguous values) is one slice copy, and the runs are shared out
//! over the threads in pieces of fixed size.

use rayon::prelude::*;

/// Values per task (whole runs; at least one run).
const BLOCK: usize = 32 * 1024;

/// `(shape, strides)` without size-1 dimensions and with neighbours merged where one steps
/// exactly over the other (`stride[i] = stride[i+1]·shape[i+1]`).
fn collapse(shape: &[usize], strides: &[isize]) -> (Vec<usize>, Vec<isize>) {
    let mut dims: Vec<(usize, isize)> = Vec::with_capacity(shape.len());
    for (&size, &stride) in shape.iter().zip(strides) {
        if size == 1 {
            continue;
        }
        match dims.last_mut() {
            Some((outer, outer_stride)) if *outer_stride == stride * size as isize => {
                *outer *= size;
                *outer_stride = stride;
            }
            _ => dims.push((size, stride)),
        }
    }
    dims.into_iter().unzip()
}

/// The values of the view `(shape, strides, offset)` of `source`, row-major. `None` where a
/// stride is negative or the view reaches outside `source` (the caller then copies another way).
pub fn copy_strided<T: Copy + Default + Send + Sync>(
    source: &[T],
    shape: &[usize],
    strides: &[isize],
    offset: usize,
) -> Option<Vec<T>> {
    if shape.len() != strides.len() || strides.iter().any(|&s| s < 0) {
        return None;
    }
    let len: usize = shape.iter().product();
    if len == 0 {
        return Some(Vec::new());
    }
    let (shape, strides) = collapse(shape, strides);
    let strides: Vec<usize> = strides.into_iter().map(|s| s as usize).collect();
    // The last element the view addresses must lie in `source`.
    let last = offset
        + shape
            .iter()
            .zip(&strides)
            .map(|(&size, &stride)| (size - 1) * stride)
            .sum::<usize>();
    if last >= source.len() {
        return None;
    }
    if shape.is_empty() {
        return Some(vec![source[offset]]);
    }
    let rank = shape.len();
    let (run, run_stride) = (shape[rank - 1], strides[rank - 1]);
    let (outer_shape, outer_strides) = (&shape[..rank - 1], &strides[..rank - 1]);
    // Where run `r` (row-major over the outer dimensions) starts in `source`.
    let run_start = |mut r: usize| {
        let mut at = offset;
        for (&size, &stride) in outer_shape.iter().zip(outer_strides).rev() {
            at += (r % size) * stride;
            r /= size;
        }
        at
    };
    let runs_per_task = (BLOCK / run).max(1);
    let mut out = vec![T::default(); len];
    out.par_chunks_mut(runs_per_task * run)
        .enumerate()
        .for_each(|(task, out)| {
            for (i, out) in out.chunks_exact_mut(run).enumerate() {
                let start = run_start(task * runs_per_task + i);
                if run_stride == 1 {
                    out.copy_from_slice(&source[start..start + run]);
                } else {
                    for (k, value) in out.iter_mut().enumerate() {
                        *value = source[start + k * run_stride];
                    }
                }
            }
        });
    Some(out)
}

/// The axes that undo the permutation `axes` (`inverse[axes[i]] = i`).
pub fn inverse_axes(axes: &[usize]) -> Vec<usize> {
    let mut inverse = vec![0; axes.len()];
    for (i, &axis) in axes.iter().enumerate() {
        inverse[axis] = i;
    }
    inverse
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The view's values by the definition: every multi-index in row-major order.
    fn by_definition(
        source: &[u32],
        shape: &[usize],
        strides: &[isize],
        offset: usize,
    ) -> Vec<u32> {
        let len: usize = shape.iter().product();
        (0..len)
            .map(|mut i| {
                let mut at = offset as isize;
                for (&size, &stride) in shape.iter().zip(strides).rev() {
                    at += (i % size) as isize * stride;
                    i /= size;
                }
                source[at as usize]
            })
            .collect()
    }

    fn row_major_strides(shape: &[usize]) -> Vec<isize> {
        let mut strides = vec![1isize; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * shape[i + 1] as isize;
        }
        strides
    }

    #[test]
    fn permuted_and_narrowed_views_copy_as_the_definition_says() {
        // Hiera's window partition, its projection split, size-1 dimensions, a transpose with
        // strided runs, and runs longer than a block.
        let cases: [(&[usize], &[usize]); 5] = [
            (&[1, 3, 4, 5, 4, 6], &[0, 1, 3, 2, 4, 5]),
            (&[2, 7, 3, 2, 5], &[2, 0, 3, 1, 4]),
            (&[3, 1, 5, 1], &[3, 2, 1, 0]),
            (&[17, 13], &[1, 0]),
            (&[2, 3, 40_000], &[1, 0, 2]),
        ];
        for (shape, axes) in cases {
            let len: usize = shape.iter().product();
            let source: Vec<u32> = (0..len as u32).collect();
            let strides = row_major_strides(shape);
            let view_shape: Vec<usize> = axes.iter().map(|&a| shape[a]).collect();
            let view_strides: Vec<isize> = axes.iter().map(|&a| strides[a]).collect();
            let copied = copy_strided(&source, &view_shape, &view_strides, 0).expect("copies");
            let want = by_definition(&source, &view_shape, &view_strides, 0);
            assert_eq!(copied, want, "{shape:?} permuted by {axes:?}");
            let back = copy_strided(
                &copied,
                shape,
                &{
                    let inverse = inverse_axes(axes);
                    let s = row_major_strides(&view_shape);
                    inverse.iter().map(|&a| s[a]).collect::<Vec<_>>()
                },
                0,
            )
            .expect("copies");
            assert_eq!(
                back, source,
                "the inverse permutation of {axes:?} restores it"
            );
        }
        // A narrowed view: rows 1..3 of a [4, 6] tensor, columns 2..5, offset 8.
        let source: Vec<u32> = (0..24).collect();
        let copied = copy_strided(&source, &[2, 3], &[6, 1], 8).expect("copies");
        assert_eq!(copied, [8, 9, 10, 14, 15, 16]);
    }

    #[test]
    fn views_it_cannot_copy_are_refused() {
        let source: Vec<u32> = (0..12).collect();
        assert!(
            copy_strided(&source, &[3, 4], &[-4, 1], 8).is_none(),
            "negative stride"
        );
        assert!(
            copy_strided(&source, &[3, 5], &[5, 1], 0).is_none(),
            "reaches past the end"
        );
        assert!(
            copy_strided(&source, &[3, 4], &[4], 0).is_none(),
            "rank mismatch"
        );
        assert_eq!(copy_strided(&source, &[0, 4], &[4, 1], 0), Some(vec![]));
    }

    /// `kernels::permute` on `Autodiff<Flex>` (training) and plain Flex (inference), f32 and
    /// f64, against Burn's permuted view: the same values, and the same gradient through a
    /// reshape of the result (what the models do with it).
    #[test]
    fn dispatch_matches_burns_permute_values_and_gradient() {
        use burn::backend::{Autodiff, Flex};
        use burn::tensor::{DType, Tensor, TensorData};

        use crate::accuracy::tensor_values;
        use crate::accuracy::test_values;
        use crate::permute;

        type Ad = Autodiff<Flex>;
        let shape = [2, 3, 4, 5, 2, 3];
        let axes = [0, 1, 3, 2, 4, 5];
        let len: usize = shape.iter().product();
        for dtype in [DType::F32, DType::F64] {
            let input = || {
                Tensor::<Ad, 1>::from_data(
                    TensorData::new(test_values(len, 3), [len]),
                    &Default::default(),
                )
                .cast(dtype)
                .reshape(shape)
                .require_grad()
            };
            let probe = Tensor::<Ad, 1>::from_data(
                TensorData::new(test_values(len, 5), [len]),
                &Default::default(),
            )
            .cast(dtype)
            .reshape([2 * 3 * 5, 4 * 2 * 3]);
            let run = |ours: bool| {
                let x = input();
                let y = if ours {
                    permute(x.clone(), axes)
                } else {
                    x.clone().permute(axes)
                };
                let rows = y.clone().reshape([2 * 3 * 5, 4 * 2 * 3]);
                let grads = (rows * probe.clone()).sum().backward();
                let dx = tensor_values(x.grad(&grads).expect("tracked"));
                (tensor_values(y.inner()), dx, x.inner())
            };
            let (want_y, want_dx, _) = run(false);
            let (y, dx, x) = run(true);
            assert_eq!(y, want_y, "{dtype:?} values");
            assert_eq!(dx, want_dx, "{dtype:?} gradient");
            let plain = tensor_values(permute(x, axes));
            assert_eq!(plain, want_y, "{dtype:?} inference");
        }
    }
}
