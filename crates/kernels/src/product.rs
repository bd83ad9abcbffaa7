//! One matrix product on strided slices, by the `gemm` crate Flex's matmul also uses: the
//! building block of the convolution and attention kernels.

use gemm::Parallelism;

/// Below this many multiply-adds a product runs on the calling thread. Measured with 2
/// threads on a 2-core AVX-512 machine (f32, `[m, n, k]`): `[256, 256, 256]` took 235 µs on
/// one thread and 389 on two, `[512, 256, 256]` 546 against 402. Waking gemm's helper
/// threads costs tens of microseconds, and each thread packs its own copy of an operand.
const THREADED_MULTIPLY_ADDS: usize = 24 << 20;

/// gemm's threads for a product of `multiply_adds` (`m·n·k`): all of them above
/// [`THREADED_MULTIPLY_ADDS`], none below.
pub(crate) fn threads_for(multiply_adds: usize) -> Parallelism {
    if multiply_adds >= THREADED_MULTIPLY_ADDS {
        Parallelism::Rayon(0)
    } else {
        Parallelism::None
    }
}

/// The float types the product runs in.
pub trait GemmFloat: Copy + Default + Send + Sync + std::ops::AddAssign + 'static {
    const ONE: Self;
}

impl GemmFloat for f32 {
    const ONE: Self = 1.0;
}

impl GemmFloat for f64 {
    const ONE: Self = 1.0;
}

/// One matrix product `dst (m×n) [+]= lhs (m×k) · rhs (k×n)`, each operand with its (row,
/// column) strides in elements.
pub(crate) struct Product<'a, T> {
    /// `[m, n, k]`.
    pub shape: [usize; 3],
    pub lhs: (&'a [T], [usize; 2]),
    pub rhs: (&'a [T], [usize; 2]),
}

impl<T: GemmFloat> Product<'_, T> {
    /// Writes (or with `accumulate`, adds) the product into row-major `dst` (`m×n`), with
    /// gemm's own threads.
    pub fn into(self, dst: &mut [T], accumulate: bool) {
        let n = self.shape[1];
        self.into_rows(dst, n, accumulate, Parallelism::Rayon(0));
    }

    /// Writes (or adds) the product into the first `n` columns of the `m` rows of `dst`, rows
    /// `row_stride` apart.
    pub fn into_rows(
        self,
        dst: &mut [T],
        row_stride: usize,
        accumulate: bool,
        threads: Parallelism,
    ) {
        let [m, n, _] = self.shape;
        assert!(n <= row_stride && dst.len() >= (m.max(1) - 1) * row_stride + n);
        // SAFETY: the rows lie inside `dst` (asserted), which is exclusively borrowed.
        unsafe { self.into_ptr(dst.as_mut_ptr(), row_stride, accumulate, threads) }
    }

    /// # Safety
    /// `dst` must address `m` rows of `n` writable elements, `row_stride` apart, that nothing
    /// else reads or writes meanwhile (and that do not overlap the operands).
    pub unsafe fn into_ptr(
        self,
        dst: *mut T,
        row_stride: usize,
        accumulate: bool,
        threads: Parallelism,
    ) {
        let [m, n, k] = self.shape;
        let (lhs, [lhs_rs, lhs_cs]) = self.lhs;
        let (rhs, [rhs_rs, rhs_cs]) = self.rhs;
        let last = |rows: usize, cols: usize, [rs, cs]: [usize; 2]| {
            (rows.max(1) - 1) * rs + (cols.max(1) - 1) * cs + 1
        };
        assert!(lhs.len() >= last(m, k, [lhs_rs, lhs_cs]));
        assert!(rhs.len() >= last(k, n, [rhs_rs, rhs_cs]));
        let s = |stride: usize| stride as isize;
        // SAFETY: every operand element the strides address lies inside its slice (asserted
        // above); the caller vouches for `dst`.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                dst,
                1,
                s(row_stride),
                accumulate,
                lhs.as_ptr(),
                s(lhs_cs),
                s(lhs_rs),
                rhs.as_ptr(),
                s(rhs_cs),
                s(rhs_rs),
                T::ONE,
                T::ONE,
                false,
                false,
                false,
                threads,
            );
        }
    }
}
