//! The inference options shared by `eval` and `predict`.

use anyhow::bail;
use segburn_train::inference::{InferenceConfig, InferenceMode};
use segburn_train::mixed_precision::Precision;

/// Whole image or sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// The whole image in one pass (the official evaluation).
    Whole,
    /// Windows of --crop every --stride pixels, overlapping logits averaged.
    Slide,
}

/// The compute precision of the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PrecisionArg {
    F32,
    Bf16,
}

/// `--mode`, `--crop`, `--stride`, `--scales`, `--flip`, `--precision`.
#[derive(Debug, Clone, clap::Args)]
pub struct InferenceArgs {
    /// whole (official) or slide.
    #[arg(long, value_enum, default_value = "whole")]
    pub mode: ModeArg,
    /// Slide window size as H,W (e.g. 1024,1024).
    #[arg(long, value_name = "H,W", value_parser = parse_pair)]
    pub crop: Option<[usize; 2]>,
    /// Slide step as H,W (default: 2/3 of the crop, as the official multi-scale inference).
    #[arg(long, value_name = "H,W", value_parser = parse_pair)]
    pub stride: Option<[usize; 2]>,
    /// Input scales, averaged (e.g. 0.5,0.75,1.0,1.25,1.5,1.75).
    #[arg(
        long,
        value_name = "S,S,…",
        value_delimiter = ',',
        default_value = "1.0"
    )]
    pub scales: Vec<f64>,
    /// Also predict the mirrored image and average.
    #[arg(long)]
    pub flip: bool,
    /// Compute precision of the network (logits are averaged in f32).
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: PrecisionArg,
}

/// `H,W` (or a single `N` for `N,N`).
pub fn parse_pair(text: &str) -> Result<[usize; 2], String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let number = |s: &str| {
        s.parse::<usize>()
            .map_err(|_| format!("`{text}` is not H,W in pixels (e.g. 1024,1024)"))
    };
    match parts.as_slice() {
        [n] => number(n).map(|n| [n, n]),
        [h, w] => Ok([number(h)?, number(w)?]),
        _ => Err(format!("`{text}` is not H,W in pixels (e.g. 1024,1024)")),
    }
}

impl InferenceArgs {
    /// The inference settings these options ask for.
    pub fn config(&self) -> anyhow::Result<InferenceConfig> {
        let mode = match self.mode {
            ModeArg::Whole => {
                if self.crop.is_some() || self.stride.is_some() {
                    bail!("--crop and --stride apply to --mode slide only");
                }
                InferenceMode::Whole
            }
            ModeArg::Slide => {
                let Some(crop) = self.crop else {
                    bail!("--mode slide needs --crop H,W (and optionally --stride H,W)");
                };
                let stride = self
                    .stride
                    .unwrap_or([(crop[0] * 2).div_ceil(3), (crop[1] * 2).div_ceil(3)]);
                InferenceMode::Slide { crop, stride }
            }
        };
        let config = InferenceConfig {
            mode,
            scales: self.scales.clone(),
            flip: self.flip,
            precision: match self.precision {
                PrecisionArg::F32 => Precision::F32,
                PrecisionArg::Bf16 => Precision::Bf16,
            },
        };
        config.check()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        inference: InferenceArgs,
    }

    fn config(args: &[&str]) -> anyhow::Result<InferenceConfig> {
        let cli = Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))?;
        cli.inference.config()
    }

    #[test]
    fn options_become_inference_settings() {
        assert_eq!(config(&[]).unwrap(), InferenceConfig::default());
        let slide = config(&[
            "--mode", "slide", "--crop", "512,1024", "--scales", "0.5,1", "--flip",
        ])
        .unwrap();
        assert_eq!(
            slide.mode,
            InferenceMode::Slide {
                crop: [512, 1024],
                stride: [342, 683]
            }
        );
        assert_eq!(slide.scales, vec![0.5, 1.0]);
        assert!(slide.flip);
        assert!(config(&["--mode", "slide"])
            .unwrap_err()
            .to_string()
            .contains("--crop"));
        assert!(config(&["--crop", "8,8"]).is_err());
        assert!(config(&["--mode", "slide", "--crop", "8,x"]).is_err());
        assert!(config(&["--scales", "0"]).is_err());
        assert_eq!(
            config(&["--precision", "bf16"]).unwrap().precision,
            Precision::Bf16
        );
    }
}
