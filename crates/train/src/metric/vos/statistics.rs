//! The official per-object statistics (`davis2017/utils.py`, `db_statistics`) and numpy's
//! summation order, so that means agree with the official ones bit for bit.

use super::VosError;

/// Mean, recall and decay of one object's per-frame J (or F) values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VosStatistics {
    /// The mean over the evaluated frames.
    pub mean: f64,
    /// The fraction of frames scoring strictly above 0.5.
    pub recall: f64,
    /// The mean over the first quarter of the frames minus the mean over the last quarter.
    pub decay: f64,
}

/// `db_statistics` of one object's per-frame values: mean, recall (> 0.5) and decay.
///
/// The decay splits the frames at `round(linspace(1, n, 5)) - 1` (halves rounded up) into four
/// bins that share their end frames and subtracts the mean of the last bin from the mean of the
/// first. The official code casts these indices to `uint8`, which wraps above 255 evaluated
/// frames (no DAVIS 2017 sequence is that long); the indices here do not wrap. An error for no
/// values (the official mean is NaN) and for a NaN value (the measures never produce one).
pub fn statistics(per_frame: &[f64]) -> Result<VosStatistics, VosError> {
    let n = per_frame.len();
    if n == 0 {
        return Err(VosError::Empty {
            what: "per-frame values".into(),
        });
    }
    if let Some(index) = per_frame.iter().position(|v| v.is_nan()) {
        return Err(VosError::NotANumber { index });
    }
    let above = per_frame.iter().filter(|&&v| v > 0.5).count();
    let ids: Vec<usize> = (0..5).map(|i| (i * (n - 1) + 2) / 4).collect();
    let first = &per_frame[ids[0]..=ids[1]];
    let last = &per_frame[ids[3]..=ids[4]];
    Ok(VosStatistics {
        mean: numpy_mean(per_frame),
        recall: above as f64 / n as f64,
        decay: numpy_mean(first) - numpy_mean(last),
    })
}

/// `np.mean` of a contiguous f64 array: numpy's pairwise sum divided by the count (NaN for no
/// values, as numpy).
pub fn numpy_mean(values: &[f64]) -> f64 {
    numpy_sum(values) / values.len() as f64
}

/// `np.sum` of a contiguous f64 array: the reduction's identity 0.0 plus numpy's pairwise sum
/// (blocks of at most 128 values summed with 8 accumulators, split in halves rounded down to a
/// multiple of 8 above that).
pub fn numpy_sum(values: &[f64]) -> f64 {
    0.0 + pairwise_sum(values)
}

fn pairwise_sum(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        let mut sum = 0.0;
        for &v in a {
            sum += v;
        }
        sum
    } else if n <= 128 {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&a[..8]);
        let whole = n - n % 8;
        let mut i = 8;
        while i < whole {
            for (j, acc) in r.iter_mut().enumerate() {
                *acc += a[i + j];
            }
            i += 8;
        }
        let mut sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &v in &a[whole..] {
            sum += v;
        }
        sum
    } else {
        let half = n / 2;
        let half = half - half % 8;
        pairwise_sum(&a[..half]) + pairwise_sum(&a[half..])
    }
}
