//! Row-major values that the parallel tasks of a convolution kernel write in disjoint parts.

use gemm::Parallelism;

use crate::product::{GemmFloat, Product};

/// Row-major `rows × row_len` values that parallel tasks write in disjoint parts (column
/// ranges of every row, or whole rows).
pub(super) struct SharedRows<T> {
    ptr: *mut T,
    rows: usize,
    row_len: usize,
}

// SAFETY: `write_columns`'s contract keeps tasks on disjoint elements.
unsafe impl<T: Send> Sync for SharedRows<T> {}

impl<T: GemmFloat> SharedRows<T> {
    pub(super) fn new(values: &mut [T], row_len: usize) -> Self {
        Self {
            ptr: values.as_mut_ptr(),
            rows: values.len() / row_len.max(1),
            row_len,
        }
    }

    /// Row `row`, to add into.
    ///
    /// # Safety
    /// No other task may touch this row while the slice lives.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn row(&self, row: usize) -> &mut [T] {
        assert!(row < self.rows);
        // SAFETY: the row lies inside the buffer (asserted); the caller keeps others off it.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(row * self.row_len), self.row_len) }
    }

    /// Writes (with `accumulate`, adds) `product` (`rows × columns.len()`) into `columns` of
    /// every row.
    ///
    /// # Safety
    /// No other task may touch these columns while this runs.
    pub(super) unsafe fn write_columns(
        &self,
        columns: std::ops::Range<usize>,
        product: Product<'_, T>,
        accumulate: bool,
        threads: Parallelism,
    ) {
        assert!(columns.end <= self.row_len);
        assert_eq!(
            [product.shape[0], product.shape[1]],
            [self.rows, columns.len()]
        );
        // SAFETY: rows × columns lies inside the buffer (asserted), and the caller keeps other
        // tasks off these elements.
        unsafe {
            product.into_ptr(
                self.ptr.add(columns.start),
                self.row_len,
                accumulate,
                threads,
            )
        }
    }
}
