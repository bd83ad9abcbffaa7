//! Pillow's convolution filters as a table: each [`PillowFilter`] is a support and a weight
//! function (`struct filter` and the `*_filter` functions of Pillow's
//! `src/libImaging/Resample.c`).

/// Pillow's convolution filters (`PIL.Image.Resampling`, but NEAREST, which takes another
/// code path, and MKS2013/MKS2021, which are not ported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PillowFilter {
    /// `Resampling.BOX`.
    Box,
    /// `Resampling.BILINEAR` (the triangle filter).
    Bilinear,
    /// `Resampling.HAMMING`.
    Hamming,
    /// `Resampling.BICUBIC` (Keys' cubic with a = -0.5): `Image.resize`'s default.
    Bicubic,
    /// `Resampling.LANCZOS` (a sinc windowed by a sinc, 3 lobes).
    Lanczos,
}

/// One filter: its support (half-width at scale 1) and its weight function.
pub(super) struct Kernel {
    pub(super) support: f64,
    pub(super) weight: fn(f64) -> f64,
}

impl PillowFilter {
    /// Every filter, in Pillow's `Resampling` order of definition.
    pub const ALL: [PillowFilter; 5] = [
        PillowFilter::Box,
        PillowFilter::Bilinear,
        PillowFilter::Hamming,
        PillowFilter::Bicubic,
        PillowFilter::Lanczos,
    ];

    /// The filter's entry in the table (Pillow's `struct filter` values).
    pub(super) fn kernel(self) -> &'static Kernel {
        match self {
            PillowFilter::Box => &Kernel {
                support: 0.5,
                weight: box_weight,
            },
            PillowFilter::Bilinear => &Kernel {
                support: 1.0,
                weight: bilinear_weight,
            },
            PillowFilter::Hamming => &Kernel {
                support: 1.0,
                weight: hamming_weight,
            },
            PillowFilter::Bicubic => &Kernel {
                support: 2.0,
                weight: bicubic_weight,
            },
            PillowFilter::Lanczos => &Kernel {
                support: 3.0,
                weight: lanczos_weight,
            },
        }
    }

    /// Pillow's name of the filter (`Image.Resampling.<name>`).
    pub fn name(self) -> &'static str {
        match self {
            PillowFilter::Box => "BOX",
            PillowFilter::Bilinear => "BILINEAR",
            PillowFilter::Hamming => "HAMMING",
            PillowFilter::Bicubic => "BICUBIC",
            PillowFilter::Lanczos => "LANCZOS",
        }
    }
}

// The weight functions keep Pillow's expressions and their order of evaluation, so that every
// f64 weight, and hence every rounded fixed-point weight, is the same.

fn box_weight(x: f64) -> f64 {
    if x > -0.5 && x <= 0.5 {
        1.0
    } else {
        0.0
    }
}

fn bilinear_weight(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        1.0 - x
    } else {
        0.0
    }
}

fn hamming_weight(x: f64) -> f64 {
    let x = x.abs();
    if x == 0.0 {
        return 1.0;
    }
    if x >= 1.0 {
        return 0.0;
    }
    let x = x * std::f64::consts::PI;
    // Pillow writes the window's constants as C floats (`0.54f`, `0.46f`).
    x.sin() / x * (f64::from(0.54f32) + f64::from(0.46f32) * x.cos())
}

fn bicubic_weight(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        return 1.0;
    }
    let x = x * std::f64::consts::PI;
    x.sin() / x
}

fn lanczos_weight(x: f64) -> f64 {
    if (-3.0..3.0).contains(&x) {
        sinc(x) * sinc(x / 3.0)
    } else {
        0.0
    }
}
