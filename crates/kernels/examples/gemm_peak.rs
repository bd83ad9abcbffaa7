//! The machine's matrix-product peak as segburn reaches it: one f32 product `C = A·B` of
//! `N × N` matrices (default 2048) by the `gemm` crate every kernel of ours and Flex's matmul
//! run on, at `--threads` threads (default 2). Prints the median of `--reps` runs (default 9,
//! after 2 warm-ups) in GFLOP/s (2 per multiply-add), and with `--json FILE` writes it there
//! (`scripts/cpu_side_by_side.sh` puts it beside PyTorch's `torch.mm` on the same matrices).
//!
//! `cargo build --release --workspace --example gemm_peak && target/release/examples/gemm_peak`

use std::time::Instant;

use gemm::Parallelism;

struct Options {
    size: usize,
    threads: usize,
    reps: usize,
    json: Option<std::path::PathBuf>,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        size: 2048,
        threads: 2,
        reps: 9,
        json: None,
    };
    let mut args = std::env::args_os().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("{} needs a value", flag.to_string_lossy()))?;
        let number = || {
            value
                .to_str()
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("{}: not a positive whole number", flag.to_string_lossy()))
        };
        match flag.to_str() {
            Some("--size") => options.size = number()?,
            Some("--threads") => options.threads = number()?,
            Some("--reps") => options.reps = number()?,
            Some("--json") => options.json = Some(value.into()),
            _ => return Err(format!("unknown flag {}", flag.to_string_lossy())),
        }
    }
    Ok(options)
}

/// `dst = lhs · rhs`, all row-major `size × size`.
fn product(dst: &mut [f32], lhs: &[f32], rhs: &[f32], size: usize, threads: Parallelism) {
    assert!(dst.len() == size * size && lhs.len() == dst.len() && rhs.len() == dst.len());
    let n = size as isize;
    // SAFETY: the three buffers hold `size × size` elements (asserted), addressed row-major.
    unsafe {
        gemm::gemm(
            size,
            size,
            size,
            dst.as_mut_ptr(),
            1,
            n,
            false,
            lhs.as_ptr(),
            1,
            n,
            rhs.as_ptr(),
            1,
            n,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            threads,
        );
    }
}

fn main() {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("error: {message}\nusage: gemm_peak [--size N] [--threads N] [--reps N] [--json FILE]");
            std::process::exit(2);
        }
    };
    let size = options.size;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(options.threads)
        .build()
        .unwrap_or_else(|e| panic!("a pool of {} threads: {e}", options.threads));
    let lhs: Vec<f32> = (0..size * size).map(|i| (i % 7) as f32 * 0.25).collect();
    let rhs: Vec<f32> = (0..size * size).map(|i| (i % 5) as f32 * 0.5).collect();
    let mut dst = vec![0.0f32; size * size];
    let threads = if options.threads == 1 {
        Parallelism::None
    } else {
        Parallelism::Rayon(options.threads)
    };
    let mut runs: Vec<f64> = pool.install(|| {
        (0..options.reps + 2)
            .map(|_| {
                let start = Instant::now();
                product(&mut dst, &lhs, &rhs, size, threads);
                start.elapsed().as_secs_f64() * 1e3
            })
            .skip(2)
            .collect()
    });
    // Every entry of row 0 is Σ_k lhs[0][k] · rhs[k][j]: check one, so the product is real.
    let expected: f32 = (0..size).map(|k| lhs[k] * rhs[k * size]).sum();
    assert!((dst[0] - expected).abs() <= 1e-3 * expected.abs().max(1.0));
    runs.sort_by(f64::total_cmp);
    let median_ms = runs[runs.len() / 2];
    let gflops = 2.0 * (size as f64).powi(3) / (median_ms * 1e-3) / 1e9;
    println!(
        "gemm f32 {size}×{size}×{size}, {} threads: median {median_ms:.1} ms of {}, {gflops:.1} GFLOP/s",
        options.threads, options.reps
    );
    if let Some(path) = options.json {
        let json = format!(
            "{{\"size\": {size}, \"threads\": {}, \"median_ms\": {median_ms}, \"gflops\": {gflops}}}\n",
            options.threads
        );
        if let Err(e) = std::fs::write(&path, json) {
            eprintln!("error: writing {}: {e}", path.display());
            std::process::exit(1);
        }
    }
}
