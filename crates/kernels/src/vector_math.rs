//! Element-wise math the kernels run in SIMD registers: written without branches or calls, so
//! that the compiler vectorises the loops around it, and compiled a second time with AVX2 where
//! the CPU has it ([`has_avx2`]; the default x86-64 target has 128-bit registers only).

/// `1/k!` for `k = 0..=12`, the Taylor coefficients of [`exp_nonpositive`].
const INVERSE_FACTORIALS: [f64; 13] = {
    let mut c = [1.0; 13];
    let mut k = 1;
    while k < 13 {
        c[k] = c[k - 1] / k as f64;
        k += 1;
    }
    c
};

/// `e^x` for `x ≤ 0`, in f64 and without branches or calls, so that loops over it vectorise.
///
/// `x = n ln 2 + r` with `|r| ≤ ln 2 / 2` (ln 2 split in two, Cody–Waite, so `n ln 2` is exact),
/// `e^r` by its Taylor polynomial to degree 12 (truncation error below 2e-16), and `2^n` written
/// into the exponent bits. Below −708, where `2^n` would be subnormal, the result is 0
/// (`e^−708` ≈ 3e-308). NaN stays NaN.
#[inline(always)]
pub fn exp_nonpositive(x: f64) -> f64 {
    // 1.5 · 2^52: adding it rounds to an integer, which then sits in the low mantissa bits.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    // Comparisons rather than `max`, which would turn NaN into the bound.
    let clamped = if x < -708.0 { -708.0 } else { x };
    let shifted = clamped * std::f64::consts::LOG2_E + SHIFT;
    let n = shifted - SHIFT;
    let r = (clamped - n * LN2_HI) - n * LN2_LO;
    let mut poly = INVERSE_FACTORIALS[12];
    for &c in INVERSE_FACTORIALS[..12].iter().rev() {
        poly = poly * r + c;
    }
    let exponent = shifted.to_bits().wrapping_sub(SHIFT.to_bits());
    let two_to_n = f64::from_bits(exponent.wrapping_add(1023) << 52);
    if x < -708.0 {
        0.0
    } else {
        poly * two_to_n
    }
}

/// Whether the kernels' AVX2 builds may run (checked once, then cached by the standard
/// library). Both builds give the same bits: no operation is reordered or fused.
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the kernels' AVX-512 builds may run (checked once, then cached by the standard
/// library). Like the AVX2 builds they give the same bits as the portable code.
pub fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The widest vector instructions the matrix products can use on this CPU: gemm picks its
/// kernels at run time, and its AVX-512 ones are built in by the `x86-v4` feature the
/// workspace turns on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorInstructions {
    Avx512,
    Avx2Fma,
    Neon,
    /// None of the above: gemm falls back to SSE or scalar kernels.
    Baseline,
}

impl std::fmt::Display for VectorInstructions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Avx512 => "AVX-512",
            Self::Avx2Fma => "AVX2 + FMA",
            Self::Neon => "NEON",
            Self::Baseline => "no AVX2, FMA or NEON",
        })
    }
}

/// What this CPU offers (see [`VectorInstructions`]).
pub fn vector_instructions() -> VectorInstructions {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            VectorInstructions::Avx512
        } else if has_avx2() && std::arch::is_x86_feature_detected!("fma") {
            VectorInstructions::Avx2Fma
        } else {
            VectorInstructions::Baseline
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        VectorInstructions::Neon
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        VectorInstructions::Baseline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_matches_the_standard_library_to_a_few_ulp() {
        let mut worst = 0.0f64;
        for i in 0..=200_000 {
            // x from −750 to 0, finer near 0.
            let u = f64::from(i) / 200_000.0;
            let x = -750.0 * u * u * u;
            let (got, want) = (exp_nonpositive(x), x.exp());
            if x >= -708.0 {
                worst = worst.max(((got - want) / want).abs());
            } else {
                assert_eq!(got, 0.0, "e^{x}");
            }
        }
        assert!(worst <= 1e-15, "{worst:e}");
        assert!(exp_nonpositive(f64::NAN).is_nan());
        assert_eq!(exp_nonpositive(0.0), 1.0);
    }
}
