//! The attention family: multi-head scaled dot-product attention on `[B, N, H·d]` token rows,
//! forward and gradients, one task per image and head, a tile of query rows at a time
//! (`math.rs`; Burn's composition copied the heads' gradients element by element and kept
//! every probability for the backward), with the row softmax in `softmax.rs`.

mod autodiff;
mod flex;
mod math;
mod softmax;

use burn::backend::Flex;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;

pub use math::{
    attention_and_probs_by_burn, attention_backward, attention_by_burn, attention_by_burn_op,
    attention_forward, AttentionFloat, AttentionShape, TokenRows,
};

use crate::dispatch::{flex_primitive, from_flex, route, same_backend, Route};

/// The attention kernels of a backend.
pub trait AttentionKernels: Backend {
    /// `softmax(q kᵀ / √d) v` per head: the output `[B, Nq, H·dv]` and what the gradient
    /// needs besides q, k and v (the kernels: the `[B, H, Nq, 2]` softmax row statistics in
    /// f64; an empty tensor where the gradient recomputes everything).
    fn multi_head_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        heads: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// `[dq, dk, dv]` of [`AttentionKernels::multi_head_attention`].
    fn multi_head_attention_grad(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        saved: FloatTensor<Self>,
        heads: usize,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3];
}

/// Multi-head scaled dot-product attention, `softmax(q kᵀ / √d) v` per head, on token rows:
/// q `[B, Nq, H·d]`, k `[B, Nk, H·d]`, v `[B, Nk, H·dv]` -> `[B, Nq, H·dv]` (what SAM's
/// attention computes between its projections). By our kernels on the CPU in f32/f64, in
/// training with our gradients; by Burn's ops everywhere else ([`attention_by_burn`]).
///
/// # Panics
/// If the shapes disagree or `heads` does not divide the widths (a programming error: the
/// layer's configuration fixes them).
pub fn multi_head_attention<B: Backend>(
    q: Tensor<B, 3>,
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
    heads: usize,
) -> Tensor<B, 3> {
    dispatch(q, k, v, heads, attention_by_burn)
}

/// [`multi_head_attention`], by Burn's `attention` op where our kernels do not run: the fused
/// kernel on CUDA and wgpu, Flex's own in half precision. For layers built on that op (Hiera),
/// so that moving them onto our CPU kernels changes nothing elsewhere.
///
/// # Panics
/// As [`multi_head_attention`].
pub fn fused_multi_head_attention<B: Backend>(
    q: Tensor<B, 3>,
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
    heads: usize,
) -> Tensor<B, 3> {
    dispatch(q, k, v, heads, attention_by_burn_op)
}

/// An attention by Burn's ops: q, k, v and the number of heads to the output.
type BurnAttention<B> = fn(Tensor<B, 3>, Tensor<B, 3>, Tensor<B, 3>, usize) -> Tensor<B, 3>;

/// The attention on `B`: our kernels where the route allows, `by_burn` elsewhere.
fn dispatch<B: Backend>(
    q: Tensor<B, 3>,
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
    heads: usize,
    by_burn: BurnAttention<B>,
) -> Tensor<B, 3> {
    let ([batch, queries, width], [k_batch, keys, k_width], [v_batch, v_keys, v_width]) =
        (q.dims(), k.dims(), v.dims());
    assert!(
        heads > 0
            && width == k_width
            && (batch, keys) == (k_batch, v_keys)
            && batch == v_batch
            && width.is_multiple_of(heads)
            && v_width.is_multiple_of(heads),
        "attention shapes q {:?}, k {:?}, v {:?} with {heads} heads",
        q.dims(),
        k.dims(),
        v.dims()
    );
    let empty = [batch, queries, keys, width, v_width].contains(&0);
    let same_dtype = q.dtype() == k.dtype() && q.dtype() == v.dtype();
    match route::<B>(q.dtype()) {
        Route::Burn => by_burn(q, k, v, heads),
        _ if empty || !same_dtype => by_burn(q, k, v, heads),
        Route::OwnInference => {
            let [q, k, v] = [q, k, v].map(flex_primitive);
            from_flex(Flex::multi_head_attention(q, k, v, heads).0)
        }
        Route::OwnTraining => same_backend(autodiff::attention_tracked::<Flex>(
            same_backend(q),
            same_backend(k),
            same_backend(v),
            heads,
        )),
    }
}
