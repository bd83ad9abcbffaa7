//! The arguments of `track-sam2` and its prompt syntax: `FRAME:OBJECT:points=x,y,label;…`,
//! `FRAME:OBJECT:box=x0,y0,x1,y1` or `FRAME:OBJECT:mask=FILE`, frames counted from 0 in the
//! folder's order, coordinates in the frames' pixels.

use std::path::PathBuf;

use anyhow::{bail, Context};
use segburn_train::sam2::user_prompts::{parse_box, parse_clicks};

use crate::commands::sam2::predict_args::InferencePrecision;
use crate::device::DeviceConfig;

/// Which way `track-sam2` propagates from the first prompted frame (or `--start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Direction {
    /// Towards the end of the video.
    Forward,
    /// Towards its start.
    Backward,
    /// Forward, then backward from the same frame: every frame gets a mask.
    Both,
}

/// Parsed `track-sam2` arguments.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "track-sam2",
    about = "Track objects through a folder of video frames with SAM 2.1: prompts on any frame, \
             then a mask per object on every frame (DAVIS palette PNGs and overlays)"
)]
pub struct TrackSam2Args {
    /// An official SAM 2.1 checkpoint (sam2.1_hiera_tiny.pt, _small, _base_plus, _large; the
    /// size is recognised from its tensors), video memory included.
    #[arg(long, value_name = "PATH")]
    pub checkpoint: PathBuf,
    /// The folder of frames (JPEG or PNG, one video): sorted by number when every file name
    /// is one (`00000.jpg`, …), else by name.
    #[arg(long, value_name = "DIR")]
    pub frames: PathBuf,
    /// A prompt `FRAME:OBJECT:points=x,y,label;…` (label 1 inside, 0 outside),
    /// `FRAME:OBJECT:box=x0,y0,x1,y1` or `FRAME:OBJECT:mask=FILE` (non-zero pixels); repeat for
    /// more objects or frames. OBJECT is any number from 1 to 254: the id in the output PNGs.
    #[arg(
        long = "prompt",
        value_name = "FRAME:OBJECT:KIND=VALUE",
        allow_hyphen_values = true
    )]
    pub prompts: Vec<String>,
    /// A first-frame annotation (a DAVIS palette PNG): every id in it (not 0 or 255) is an
    /// object, prompted with its mask on frame 0.
    #[arg(long, value_name = "FILE")]
    pub first_masks: Option<PathBuf>,
    /// Where the masks (`masks/<frame>.png`), overlays (`overlays/<frame>.png`) and
    /// `tracking.json` go.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Which way to propagate.
    #[arg(long, value_enum, default_value = "forward")]
    pub direction: Direction,
    /// The frame to start from (default: the first prompted frame).
    #[arg(long, value_name = "N")]
    pub start: Option<usize>,
    /// At most this many frames after (or before) the start.
    #[arg(long, value_name = "N")]
    pub max_frames: Option<usize>,
    /// Background holes of at most this many pixels (at the decoder's 4× lower resolution)
    /// are filled, as the official predictor does with its CUDA extension; 0: never.
    #[arg(long, value_name = "PIXELS", default_value_t = 8)]
    pub fill_holes: usize,
    /// Only the masks, no overlays.
    #[arg(long)]
    pub no_overlays: bool,
    /// Only for an official-format checkpoint of another shape than the four official models:
    /// its model configuration, a JSON `Sam2Config` with `video`.
    #[arg(long, value_name = "FILE")]
    pub model_config: Option<PathBuf>,
    /// The float type the model computes in.
    #[arg(long, value_enum, default_value = "f32", ignore_case = true)]
    pub precision: InferencePrecision,
    /// Where the model runs: Cpu, Wgpu(N) or Cuda(N).
    #[arg(long, value_name = "DEVICE", default_value = "Cpu", value_parser = crate::commands::sam2::predict_args::parse_device)]
    pub device: DeviceConfig,
}

/// What a prompt gives.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptValue {
    /// Clicks `(x, y, label)`.
    Clicks(Vec<(f32, f32, i32)>),
    /// A box.
    Box([f32; 4]),
    /// A mask file (non-zero = inside).
    Mask(PathBuf),
}

/// One `--prompt`.
#[derive(Debug, Clone, PartialEq)]
pub struct TrackPrompt {
    pub frame: usize,
    pub object: u32,
    pub value: PromptValue,
}

/// Parses `FRAME:OBJECT:KIND=VALUE`.
pub fn parse_prompt(text: &str) -> anyhow::Result<TrackPrompt> {
    let context =
        || format!("--prompt {text:?} (FRAME:OBJECT:points=x,y,1 | box=x0,y0,x1,y1 | mask=FILE)");
    let mut parts = text.splitn(3, ':');
    let (Some(frame), Some(object), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
        bail!("{}: three fields separated by `:`", context());
    };
    let frame: usize = frame
        .trim()
        .parse()
        .with_context(|| format!("{}: frame `{frame}`", context()))?;
    let object: u32 = object
        .trim()
        .parse()
        .with_context(|| format!("{}: object `{object}`", context()))?;
    if !(1..=254).contains(&object) {
        bail!(
            "{}: object {object} must be from 1 to 254 (0 and 255 are background and void)",
            context()
        );
    }
    let Some((kind, value)) = rest.split_once('=') else {
        bail!("{}: `points=…`, `box=…` or `mask=…`", context());
    };
    let value = match kind.trim() {
        "points" => PromptValue::Clicks(
            parse_clicks(value)
                .with_context(context)?
                .into_iter()
                .map(|c| (c.x, c.y, c.label))
                .collect(),
        ),
        "box" => PromptValue::Box(parse_box(value).with_context(context)?),
        "mask" => PromptValue::Mask(PathBuf::from(value)),
        other => bail!("{}: unknown kind `{other}`", context()),
    };
    Ok(TrackPrompt {
        frame,
        object,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_parse_and_bad_ones_say_what_is_wrong() {
        assert_eq!(
            parse_prompt("3:2:points=10,20,1; 5,6,0").unwrap(),
            TrackPrompt {
                frame: 3,
                object: 2,
                value: PromptValue::Clicks(vec![(10.0, 20.0, 1), (5.0, 6.0, 0)])
            }
        );
        assert_eq!(
            parse_prompt("0:1:box=1,2,30,40").unwrap().value,
            PromptValue::Box([1.0, 2.0, 30.0, 40.0])
        );
        assert_eq!(
            parse_prompt("0:7:mask=a b/ü.png").unwrap().value,
            PromptValue::Mask(PathBuf::from("a b/ü.png"))
        );
        for (bad, says) in [
            ("0:1", "three fields"),
            ("x:1:box=1,2,3,4", "frame `x`"),
            ("0:0:box=1,2,3,4", "from 1 to 254"),
            ("0:1:circle=3", "unknown kind `circle`"),
            ("0:1:points=1,2", "--prompt"),
        ] {
            let message = format!("{:#}", parse_prompt(bad).unwrap_err());
            assert!(message.contains(says), "{bad}: {message}");
        }
    }
}
