//! The `sam2-real` rows: the SAM 2.1 decoder with 1 and 64 one-click objects on one 64×64
//! embedding, and one "segment everything" pass with Hiera-T on a 1024² image, twice: as
//! candidate masks decoded per second (clicks × 3, whatever the weights) and as masks kept per
//! second (this model's and image's; the kept count is `value × median_ms / 1000`).

use burn::tensor::backend::Backend;

use super::row_spec::{row, RowSpec};
use crate::bench::plan::SuitePlan;
use crate::bench::results::SuiteRow;
use crate::bench::workloads::{
    everything_candidates, sam2_everything, sam2_real_decoder, with_peak_rss, EverythingInputs,
};

/// Objects (one click each) of the decoder rows: one prompt, and one everything batch.
const DECODER_PROMPTS: [usize; 2] = [1, 64];

pub(super) fn sam2_real_rows<B: Backend>(
    plan: &SuitePlan,
    device: &B::Device,
    cuda_memory_note: Option<&str>,
) -> Result<Vec<SuiteRow>, String> {
    let side = plan.sam2_real_side;
    let e = side / 16;
    let mut rows = Vec::new();
    for prompts in DECODER_PROMPTS {
        let (timing, peak) =
            with_peak_rss(|| sam2_real_decoder::<B>(prompts, side, device, plan.repeats));
        let timing = timing.map_err(|e| format!("sam2-real benchmark: {e}"))?;
        let spec = RowSpec {
            workload: "sam2-real",
            model: format!("decoder+prompts x{prompts}"),
            precision: "f32",
            shape: format!("{prompts}x256x{e}x{e}"),
            unit: "calls/s",
            items_per_run: 1.0,
        };
        rows.push(row(spec, &timing, peak, cuda_memory_note));
    }
    let inputs = EverythingInputs {
        checkpoint: plan.sam2_checkpoint.as_deref(),
        image: plan.sam2_image.as_deref(),
    };
    let (result, peak) =
        with_peak_rss(|| sam2_everything::<B>(&inputs, side, device, plan.repeats));
    let (timing, kept) = result.map_err(|e| format!("sam2-real everything: {e}"))?;
    let shape = format!("1x3x{side}x{side}");
    let spec = |model: &str, unit: &'static str, items: usize| RowSpec {
        workload: "sam2-real",
        model: model.into(),
        precision: "f32",
        shape: shape.clone(),
        unit,
        items_per_run: items as f64,
    };
    let candidates = everything_candidates(side);
    rows.push(row(
        spec("everything Hiera-T", "candidates/s", candidates),
        &timing,
        peak,
        cuda_memory_note,
    ));
    rows.push(row(
        spec("everything Hiera-T kept", "masks/s", kept),
        &timing,
        peak,
        cuda_memory_note,
    ));
    Ok(rows)
}
