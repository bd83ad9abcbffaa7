//! The `bench` suite's flags and the checked plan they make: device, PIDNet sizes,
//! precisions, crop and batch, eval size, workloads and repeats; `--smoke` shrinks everything
//! to a few seconds of work.

use std::path::PathBuf;

use segburn_models::pidnet::PidNetSize;
use segburn_models::sam2::official_model::{size_name, OFFICIAL_SIZES};
use segburn_models::sam2::HieraSize;
use segburn_train::mixed_precision::Precision;

use crate::bench::workloads::Repeats;

/// Where the suite runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchDevice {
    Cpu,
    Cuda(usize),
    /// Burn's wgpu backend, adapter N of `doctor`'s list.
    Wgpu(usize),
}

/// The suite's flags (the `bench` binary flattens them into its top level).
#[derive(Debug, Clone, clap::Args)]
pub struct SuiteArgs {
    /// cpu, cuda:N (a build with --features cuda) or wgpu:N (--features wgpu; N as `doctor`
    /// lists the adapters).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// PIDNet sizes, comma-separated: s,m,l.
    #[arg(long, default_value = "s", value_delimiter = ',')]
    pub sizes: Vec<String>,
    /// Compute precisions, comma-separated: f32,bf16,f16 (the input batch is cast, as the trainer does).
    #[arg(long, default_value = "f32", value_delimiter = ',')]
    pub precision: Vec<String>,
    /// Training crop H,W (multiples of 8).
    #[arg(long, default_value = "512,512")]
    pub crop: String,
    /// Training batch size.
    #[arg(long, default_value_t = 2)]
    pub batch: usize,
    /// Eval input H,W (multiples of 8).
    #[arg(long, default_value = "1024,2048")]
    pub eval_size: String,
    /// Which workloads, comma-separated: train,eval,sam2,loader, and (not in the default)
    /// replicas (the trainer's steps plain vs through the data-parallel path on the same
    /// device), hiera (SAM 2.1 encoder forward and fine-tuning steps at 1×3×1024×1024) and
    /// sam2-real (SAM 2.1 decoder with 1 and 64 clicks on a 64×64 embedding, and one "segment
    /// everything" pass on a 1024×1024 image with Hiera-T).
    #[arg(long, default_value = "train,eval,sam2,loader", value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// SAM 2.1 sizes of the hiera workload, comma-separated: t,s,b+,l.
    #[arg(long, default_value = "t,s", value_delimiter = ',')]
    pub hiera_sizes: Vec<String>,
    /// The sam2-real everything pass's model: an official-format SAM 2.1 Hiera-T checkpoint
    /// (default: random weights).
    #[arg(long, value_name = "FILE")]
    pub sam2_checkpoint: Option<PathBuf>,
    /// The sam2-real everything pass's RGB image (default: a 1024×1024 gradient).
    #[arg(long, value_name = "FILE")]
    pub sam2_image: Option<PathBuf>,
    /// Timed runs per workload (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Untimed runs before timing (kernel compilation, autotuning, allocator warm-up).
    #[arg(long, default_value_t = 1)]
    pub warmups: usize,
    /// Cityscapes-layout dataset root for the loader row.
    #[arg(long, default_value = "datasets/sample")]
    pub loader_data: PathBuf,
    /// Print new/old ratios against a JSON file written earlier with --json.
    #[arg(long, value_name = "FILE")]
    pub compare: Option<PathBuf>,
}

/// What to run, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct SuitePlan {
    pub device: BenchDevice,
    pub sizes: Vec<PidNetSize>,
    pub precisions: Vec<Precision>,
    pub crop: [usize; 2],
    pub batch: usize,
    pub eval_size: [usize; 2],
    pub workloads: Vec<String>,
    pub hiera_sizes: Vec<HieraSize>,
    /// Side of the hiera workload's square input (1024; 64 with --smoke).
    pub hiera_side: usize,
    /// Side of the sam2-real workload's input (1024; 64 with --smoke).
    pub sam2_real_side: usize,
    pub sam2_checkpoint: Option<PathBuf>,
    pub sam2_image: Option<PathBuf>,
    pub repeats: Repeats,
    pub loader_data: PathBuf,
    pub smoke: bool,
}

const WORKLOADS: [&str; 7] = [
    "train",
    "eval",
    "sam2",
    "loader",
    "replicas",
    "hiera",
    "sam2-real",
];

/// `cpu`, `cuda`, `cuda:N`, `wgpu`, `wgpu:N`.
pub fn parse_device(text: &str) -> Result<BenchDevice, String> {
    let text = text.trim().to_ascii_lowercase();
    let indexed = |prefix: &str| -> Option<usize> {
        match text.strip_prefix(prefix)? {
            "" => Some(0),
            rest => rest.strip_prefix(':')?.parse().ok(),
        }
    };
    if text == "cpu" {
        Ok(BenchDevice::Cpu)
    } else if let Some(index) = indexed("cuda") {
        Ok(BenchDevice::Cuda(index))
    } else if let Some(index) = indexed("wgpu") {
        Ok(BenchDevice::Wgpu(index))
    } else {
        Err(format!(
            "--device {text}: use cpu, cuda:N or wgpu:N (e.g. cuda:0)"
        ))
    }
}

pub fn parse_precision(text: &str) -> Result<Precision, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "f32" => Ok(Precision::F32),
        "bf16" => Ok(Precision::Bf16),
        "f16" => Ok(Precision::F16),
        other => Err(format!("--precision {other}: use f32, bf16 or f16")),
    }
}

/// `t`, `s`, `b+`, `l` (the official config names).
pub fn parse_hiera_size(text: &str) -> Result<HieraSize, String> {
    OFFICIAL_SIZES
        .into_iter()
        .find(|&size| size_name(size) == text.trim().to_ascii_lowercase())
        .ok_or_else(|| format!("--hiera-sizes {text}: use t, s, b+ or l"))
}

/// `H,W` with both multiples of 8 (PIDNet's stride).
pub fn parse_hw(flag: &str, text: &str) -> Result<[usize; 2], String> {
    let parts: Vec<Option<usize>> = text
        .split([',', 'x'])
        .map(|p| p.trim().parse().ok())
        .collect();
    match parts.as_slice() {
        [Some(h), Some(w)] if *h > 0 && *w > 0 && h % 8 == 0 && w % 8 == 0 => Ok([*h, *w]),
        [Some(_), Some(_)] => Err(format!(
            "{flag} {text}: height and width must be positive multiples of 8"
        )),
        _ => Err(format!("{flag} {text}: expected H,W such as 512,1024")),
    }
}

impl SuitePlan {
    /// Checks the flags; `--smoke` shrinks every size to a few seconds of work.
    pub fn from_args(args: &SuiteArgs, smoke: bool) -> Result<Self, String> {
        let sizes = args
            .sizes
            .iter()
            .map(|s| crate::bench::subcommands::parse_size(s).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let precisions = args
            .precision
            .iter()
            .map(|p| parse_precision(p))
            .collect::<Result<Vec<_>, _>>()?;
        let workloads: Vec<String> = args
            .workloads
            .iter()
            .map(|w| w.trim().to_ascii_lowercase())
            .collect();
        if let Some(bad) = workloads.iter().find(|w| !WORKLOADS.contains(&w.as_str())) {
            return Err(format!(
                "--workloads {bad}: choose from {}",
                WORKLOADS.join(",")
            ));
        }
        let hiera_sizes = args
            .hiera_sizes
            .iter()
            .map(|s| parse_hiera_size(s))
            .collect::<Result<Vec<_>, _>>()?;
        if args.batch == 0 || args.reps == 0 {
            return Err("--batch and --reps must be at least 1".into());
        }
        let mut plan = SuitePlan {
            device: parse_device(&args.device)?,
            sizes,
            precisions,
            crop: parse_hw("--crop", &args.crop)?,
            batch: args.batch,
            eval_size: parse_hw("--eval-size", &args.eval_size)?,
            workloads,
            hiera_sizes,
            hiera_side: crate::bench::workloads::HIERA_IMAGE_SIDE,
            sam2_real_side: crate::bench::workloads::SAM2_REAL_SIDE,
            sam2_checkpoint: args
                .sam2_checkpoint
                .as_deref()
                .map(crate::experiment::absolute),
            sam2_image: args.sam2_image.as_deref().map(crate::experiment::absolute),
            repeats: Repeats {
                warmups: args.warmups,
                reps: args.reps,
            },
            loader_data: crate::experiment::absolute(&args.loader_data),
            smoke,
        };
        if smoke {
            plan.crop = [64, 64];
            plan.batch = 1;
            plan.eval_size = [64, 128];
            plan.hiera_side = 64;
            plan.sam2_real_side = 64;
            plan.repeats = Repeats {
                warmups: 0,
                reps: 1,
            };
        }
        Ok(plan)
    }

    /// Whether `workload` is selected.
    pub fn runs(&self, workload: &str) -> bool {
        self.workloads.iter().any(|w| w == workload)
    }
}

/// The suite's flags parsed from `line` as the `bench` binary would (for tests).
#[cfg(test)]
pub(crate) fn parse_suite_args(line: &[&str]) -> SuiteArgs {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        suite: SuiteArgs,
    }
    Cli::parse_from(std::iter::once("bench").chain(line.iter().copied())).suite
}

#[cfg(test)]
mod tests {
    use super::parse_suite_args as args;
    use super::*;

    #[test]
    fn flags_are_parsed_and_checked() {
        let plan = SuitePlan::from_args(
            &args(&[
                "--device",
                "cuda:1",
                "--sizes",
                "s,l",
                "--precision",
                "bf16,f16",
                "--crop",
                "1024,1024",
                "--batch",
                "12",
            ]),
            false,
        )
        .unwrap();
        assert_eq!(plan.device, BenchDevice::Cuda(1));
        assert_eq!(plan.sizes, vec![PidNetSize::S, PidNetSize::L]);
        assert_eq!(plan.precisions, vec![Precision::Bf16, Precision::F16]);
        assert_eq!((plan.crop, plan.batch), ([1024, 1024], 12));
        for bad in [
            &["--device", "gpu"][..],
            &["--sizes", "xl"],
            &["--precision", "f8"],
            &["--crop", "500,500"],
            &["--crop", "512"],
            &["--batch", "0"],
            &["--workloads", "train,fly"],
            &["--hiera-sizes", "t,xl"],
        ] {
            assert!(SuitePlan::from_args(&args(bad), false).is_err(), "{bad:?}");
        }
        let hiera = SuitePlan::from_args(&args(&["--hiera-sizes", "b+,L"]), false).unwrap();
        assert_eq!(hiera.hiera_sizes, [HieraSize::BasePlus, HieraSize::Large]);
        assert_eq!(hiera.hiera_side, 1024);
        let real = args(&["--workloads", "sam2-real", "--sam2-checkpoint", "t.pt"]);
        let real = SuitePlan::from_args(&real, false).unwrap();
        assert!(real.runs("sam2-real") && real.sam2_image.is_none());
        assert!(real.sam2_checkpoint.is_some_and(|p| p.is_absolute()));
        let smoke = SuitePlan::from_args(&args(&[]), true).unwrap();
        assert_eq!(
            (smoke.crop, smoke.batch, smoke.repeats.reps),
            ([64, 64], 1, 1)
        );
    }
}
