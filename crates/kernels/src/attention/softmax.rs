//! The attention's row softmax in f64, the statistics that let the backward step recompute
//! its probabilities bit for bit, and its gradient.
//!
//! The forward keeps, per row, the maximum score and `1 / Σ exp` instead of the probabilities
//! themselves (2 numbers per query instead of one per key: for a Hiera global block, 64 KiB
//! instead of 256 MiB). [`probs_from_stats`] evaluates exactly the expression
//! [`softmax_rows`] evaluated, so the backward sees the forward's probabilities to the bit.

use crate::float::NormFloat;
use crate::vector_math::exp_nonpositive;
#[cfg(target_arch = "x86_64")]
use crate::vector_math::{has_avx2, has_avx512};

/// Numbers kept per query row: the maximum score and the inverse of the exponentials' sum.
pub const STATS_PER_ROW: usize = 2;

/// Each `row_len` row of `scores` becomes `softmax(scale · row)`, computed in f64; each row's
/// `[max, 1 / Σ exp]` goes to `stats` (`STATS_PER_ROW` numbers per row).
pub fn softmax_rows<T: NormFloat>(scores: &mut [T], row_len: usize, scale: f64, stats: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: the CPU has AVX-512F.
        return unsafe { softmax_rows_avx512(scores, row_len, scale, stats) };
    } else if has_avx2() {
        // SAFETY: the CPU has AVX2.
        return unsafe { softmax_rows_avx2(scores, row_len, scale, stats) };
    }
    softmax_rows_portable(scores, row_len, scale, stats)
}

/// The probabilities [`softmax_rows`] gave, from the same `scores` and the `stats` it wrote.
pub fn probs_from_stats<T: NormFloat>(scores: &mut [T], row_len: usize, scale: f64, stats: &[f64]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: the CPU has AVX-512F.
        return unsafe { probs_from_stats_avx512(scores, row_len, scale, stats) };
    } else if has_avx2() {
        // SAFETY: the CPU has AVX2.
        return unsafe { probs_from_stats_avx2(scores, row_len, scale, stats) };
    }
    probs_from_stats_portable(scores, row_len, scale, stats)
}

/// [`softmax_rows_portable`] compiled with AVX-512 (the same bits: nothing is reordered).
///
/// # Safety
/// The CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn softmax_rows_avx512<T: NormFloat>(
    scores: &mut [T],
    row_len: usize,
    scale: f64,
    stats: &mut [f64],
) {
    softmax_rows_portable(scores, row_len, scale, stats)
}

/// [`softmax_rows_portable`] compiled with AVX2.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn softmax_rows_avx2<T: NormFloat>(
    scores: &mut [T],
    row_len: usize,
    scale: f64,
    stats: &mut [f64],
) {
    softmax_rows_portable(scores, row_len, scale, stats)
}

#[inline(always)]
pub(super) fn softmax_rows_portable<T: NormFloat>(
    scores: &mut [T],
    row_len: usize,
    scale: f64,
    stats: &mut [f64],
) {
    let mut exps = vec![0.0f64; row_len];
    let rows = scores.chunks_exact_mut(row_len);
    for (row, stats) in rows.zip(stats.chunks_exact_mut(STATS_PER_ROW)) {
        // The row's maximum (a NaN score makes every probability NaN below).
        let max = lane_max(row);
        for (e, &s) in exps.iter_mut().zip(row.iter()) {
            *e = exp_nonpositive(scale * (s.to_f64() - max));
        }
        let total = lane_sum(&exps);
        let inverse = 1.0 / total;
        for (p, &e) in row.iter_mut().zip(&exps) {
            *p = T::from_f64(e * inverse);
        }
        stats.copy_from_slice(&[max, inverse]);
    }
}

/// [`probs_from_stats_portable`] compiled with AVX-512.
///
/// # Safety
/// The CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn probs_from_stats_avx512<T: NormFloat>(
    scores: &mut [T],
    row_len: usize,
    scale: f64,
    stats: &[f64],
) {
    probs_from_stats_portable(scores, row_len, scale, stats)
}

/// [`probs_from_stats_portable`] compiled with AVX2.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn probs_from_stats_avx2<T: NormFloat>(
    scores: &mut [T],
    row_len: usize,
    scale: f64,
    stats: &[f64],
) {
    probs_from_stats_portable(scores, row_len, scale, stats)
}

#[inline(always)]
fn probs_from_stats_portable<T: NormFloat>(
    scores: &mut [T],
    row_len: usize,
    scale: f64,
    stats: &[f64],
) {
    let rows = scores.chunks_exact_mut(row_len);
    for (row, stats) in rows.zip(stats.chunks_exact(STATS_PER_ROW)) {
        let (max, inverse) = (stats[0], stats[1]);
        for p in row.iter_mut() {
            *p = T::from_f64(exp_nonpositive(scale * (p.to_f64() - max)) * inverse);
        }
    }
}

/// `dS = scale · P ⊙ (dP − rowsum(dP ⊙ P))` in place of `dP`, row by row, in f64.
pub fn softmax_grad_rows<T: NormFloat>(grad: &mut [T], probs: &[T], row_len: usize, scale: f64) {
    for (g, p) in grad
        .chunks_exact_mut(row_len)
        .zip(probs.chunks_exact(row_len))
    {
        let dot = lane_dot(g, p);
        for (g, &p) in g.iter_mut().zip(p) {
            *g = T::from_f64(scale * p.to_f64() * (g.to_f64() - dot));
        }
    }
}

/// Partial results a row reduction keeps apart: one AVX-512 register of f64, so that the loop
/// vectorises (one running sum would wait on each addition).
const LANES: usize = 8;

/// The largest of `row` as f64, NaN ignored (as `>` ignores it), in [`LANES`] interleaved
/// running maxima: the same value as one running maximum.
#[inline(always)]
fn lane_max<T: NormFloat>(row: &[T]) -> f64 {
    let mut lanes = [f64::NEG_INFINITY; LANES];
    let chunks = row.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, &s) in lanes.iter_mut().zip(chunk) {
            let s = s.to_f64();
            if s > *lane {
                *lane = s;
            }
        }
    }
    for (lane, &s) in lanes.iter_mut().zip(rest) {
        let s = s.to_f64();
        if s > *lane {
            *lane = s;
        }
    }
    lanes
        .into_iter()
        .fold(f64::NEG_INFINITY, |max, s| if s > max { s } else { max })
}

/// The sum of `values` in [`LANES`] interleaved partial sums, added up in a fixed order (the
/// bits depend only on the values, never on the machine or the thread).
#[inline(always)]
fn lane_sum(values: &[f64]) -> f64 {
    let mut lanes = [0.0f64; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane += v;
        }
    }
    for (lane, &v) in lanes.iter_mut().zip(rest) {
        *lane += v;
    }
    lanes.into_iter().sum()
}

/// `Σ a·b` in f64, in [`LANES`] interleaved partial sums as [`lane_sum`].
#[inline(always)]
fn lane_dot<T: NormFloat>(a: &[T], b: &[T]) -> f64 {
    let mut lanes = [0.0f64; LANES];
    let (chunks_a, chunks_b) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let rest = chunks_a.remainder().iter().zip(chunks_b.remainder());
    for (chunk_a, chunk_b) in chunks_a.zip(chunks_b) {
        for ((lane, &a), &b) in lanes.iter_mut().zip(chunk_a).zip(chunk_b) {
            *lane += a.to_f64() * b.to_f64();
        }
    }
    for (lane, (&a, &b)) in lanes.iter_mut().zip(rest) {
        *lane += a.to_f64() * b.to_f64();
    }
    lanes.into_iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accuracy::test_values;

    fn scores(rows: usize, row_len: usize) -> Vec<f32> {
        test_values(rows * row_len, 29)
            .iter()
            .map(|v| (12.0 * v) as f32)
            .collect()
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vector_builds_of_the_softmax_give_the_same_bits() {
        let scores = scores(7, 61);
        let mut portable = scores.clone();
        let mut portable_stats = vec![0.0; 7 * STATS_PER_ROW];
        softmax_rows_portable(&mut portable, 61, 0.25, &mut portable_stats);
        let mut stats = vec![0.0; 7 * STATS_PER_ROW];
        if has_avx2() {
            let mut avx2 = scores.clone();
            // SAFETY: the CPU has AVX2 (checked).
            unsafe { softmax_rows_avx2(&mut avx2, 61, 0.25, &mut stats) };
            assert_eq!((&avx2, &stats), (&portable, &portable_stats));
        }
        if has_avx512() {
            let mut avx512 = scores;
            // SAFETY: the CPU has AVX-512F (checked).
            unsafe { softmax_rows_avx512(&mut avx512, 61, 0.25, &mut stats) };
            assert_eq!((&avx512, &stats), (&portable, &portable_stats));
        }
    }

    #[test]
    fn probabilities_recomputed_from_the_stats_are_the_forwards_bits() {
        let original = scores(9, 130);
        let mut forward = original.clone();
        let mut stats = vec![0.0; 9 * STATS_PER_ROW];
        softmax_rows(&mut forward, 130, 0.3, &mut stats);
        let mut recomputed = original;
        probs_from_stats(&mut recomputed, 130, 0.3, &stats);
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&recomputed), bits(&forward));
        // The stats are each row's maximum and the inverse of a sum of at least one 1.
        assert!(stats
            .chunks(2)
            .all(|s| s[0].is_finite() && s[1] > 0.0 && s[1] <= 1.0));
    }

    #[test]
    fn the_lane_reductions_are_the_row_max_and_an_exact_sum() {
        let row: Vec<f32> = scores(1, 61);
        // One running maximum with the same `>` (a NaN would never be taken, as in lane_max).
        let mut serial = f64::NEG_INFINITY;
        for &s in &row {
            if f64::from(s) > serial {
                serial = f64::from(s);
            }
        }
        assert!(serial.is_finite());
        assert_eq!(lane_max(&row), serial);
        assert_eq!(lane_max(&[f32::NAN, -3.0, f32::NAN]), -3.0);
        // Integers sum exactly in any order.
        let integers: Vec<f64> = (1..=61).map(f64::from).collect();
        assert_eq!(lane_sum(&integers), 61.0 * 62.0 / 2.0);
        assert_eq!(lane_dot(&integers, &integers), 61.0 * 62.0 * 123.0 / 6.0);
        assert_eq!(lane_sum(&[]), 0.0);
    }

    #[test]
    fn a_nan_score_makes_its_row_nan_in_both_directions() {
        let mut row = vec![0.5f64, f64::NAN, -1.0];
        let original = row.clone();
        let mut stats = [0.0; STATS_PER_ROW];
        softmax_rows(&mut row, 3, 1.0, &mut stats);
        assert!(row.iter().all(|p| p.is_nan()));
        let mut again = original;
        probs_from_stats(&mut again, 3, 1.0, &stats);
        assert!(again.iter().all(|p| p.is_nan()));
    }
}
