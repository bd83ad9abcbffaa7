//! The plan's workloads on one backend: PIDNet training and eval per size and precision, the
//! replica path, the SAM2 decoder, the Hiera encoder, the real-size SAM 2.1 rows and the
//! loader, each timed into a row.

use burn::tensor::backend::AutodiffBackend;
use segburn_models::sam2::official_model::size_name;
use segburn_train::inference::InferenceConfig;

use super::data_rows::{loader_row, replica_rows};
use super::row_spec::{precision_name, row, RowSpec};
use super::sam2_real_rows::sam2_real_rows;
use crate::bench::plan::SuitePlan;
use crate::bench::results::SuiteRow;
use crate::bench::workloads::{
    hiera_encoder_forward, hiera_finetune_step, pidnet_inference, pidnet_train_step_in,
    sam2_decoder_forward, sam2_train_step, with_peak_rss,
};

/// Runs the plan's workloads on backend `B`; `cuda_memory_note` replaces the RSS figure on a
/// GPU (where the host's RSS says nothing about device memory).
pub(super) fn run_on<B: AutodiffBackend>(
    plan: &SuitePlan,
    device: &B::Device,
    cuda_memory_note: Option<&str>,
) -> Result<Vec<SuiteRow>, String> {
    let mut rows = Vec::new();
    let [h, w] = plan.crop;
    let [eh, ew] = plan.eval_size;
    for &size in &plan.sizes {
        for &precision in &plan.precisions {
            let dtype = precision_name(precision);
            if plan.runs("train") {
                let (timing, peak) = with_peak_rss(|| {
                    pidnet_train_step_in::<B>(
                        size,
                        [plan.batch, h, w],
                        precision,
                        device,
                        plan.repeats,
                    )
                });
                let spec = RowSpec {
                    workload: "train",
                    model: format!("PIDNet-{size:?}"),
                    precision: dtype,
                    shape: format!("{}x3x{h}x{w}", plan.batch),
                    unit: "images/s",
                    items_per_run: plan.batch as f64,
                };
                rows.push(row(spec, &timing, peak, cuda_memory_note));
            }
            if plan.runs("eval") {
                // The other `bench eval` workload: end to end as `eval` runs it (network,
                // upsampling to full resolution, argmax, class map to the host).
                let config = InferenceConfig::whole(precision);
                let (timing, peak) = with_peak_rss(|| {
                    pidnet_inference::<B::InnerBackend>(
                        size,
                        [eh, ew],
                        &config,
                        device,
                        plan.repeats,
                    )
                });
                let timing = timing.map_err(|e| format!("eval benchmark: {e}"))?;
                let spec = RowSpec {
                    workload: "eval",
                    model: format!("PIDNet-{size:?}"),
                    precision: dtype,
                    shape: format!("1x3x{eh}x{ew}"),
                    unit: "FPS",
                    items_per_run: 1.0,
                };
                rows.push(row(spec, &timing, peak, cuda_memory_note));
            }
            if plan.runs("replicas") {
                rows.extend(replica_rows::<B>(
                    plan,
                    size,
                    precision,
                    device,
                    cuda_memory_note,
                )?);
            }
        }
    }
    if plan.runs("sam2") {
        let (timing, peak) =
            with_peak_rss(|| sam2_decoder_forward::<B::InnerBackend>(device, plan.repeats));
        let spec = RowSpec {
            workload: "sam2",
            model: "decoder-fwd".into(),
            precision: "f32",
            shape: "1x256x16x16".into(),
            unit: "calls/s",
            items_per_run: 1.0,
        };
        rows.push(row(spec, &timing, peak, cuda_memory_note));
        let n = if plan.smoke { 1 } else { 4 };
        let (timing, peak) = with_peak_rss(|| sam2_train_step::<B>(n, device, plan.repeats));
        let spec = RowSpec {
            workload: "sam2",
            model: "train-step".into(),
            precision: "f32",
            shape: format!("{n}x256x16x16"),
            unit: "steps/s",
            items_per_run: 1.0,
        };
        rows.push(row(spec, &timing, peak, cuda_memory_note));
    }
    if plan.runs("hiera") {
        rows.extend(hiera_rows::<B>(plan, device, cuda_memory_note)?);
    }
    if plan.runs("sam2-real") {
        rows.extend(sam2_real_rows::<B::InnerBackend>(
            plan,
            device,
            cuda_memory_note,
        )?);
    }
    if plan.runs("loader") {
        rows.push(loader_row(plan)?);
    }
    Ok(rows)
}

/// For each SAM 2.1 size: the encoder forward and the fine-tuning step with the encoder
/// frozen and trainable, batch 1, f32.
fn hiera_rows<B: AutodiffBackend>(
    plan: &SuitePlan,
    device: &B::Device,
    cuda_memory_note: Option<&str>,
) -> Result<Vec<SuiteRow>, String> {
    let side = plan.hiera_side;
    let mut rows = Vec::new();
    for &size in &plan.hiera_sizes {
        let model = format!("Hiera-{}", size_name(size).to_ascii_uppercase());
        let spec = |what: &str, unit: &'static str| RowSpec {
            workload: "hiera",
            model: format!("{model} {what}"),
            precision: "f32",
            shape: format!("1x3x{side}x{side}"),
            unit,
            items_per_run: 1.0,
        };
        let (timing, peak) = with_peak_rss(|| {
            hiera_encoder_forward::<B::InnerBackend>(size, side, device, plan.repeats)
        });
        let timing = timing.map_err(|e| format!("hiera benchmark: {e}"))?;
        rows.push(row(
            spec("encoder-fwd", "images/s"),
            &timing,
            peak,
            cuda_memory_note,
        ));
        for (frozen, what) in [(true, "finetune-frozen"), (false, "finetune-full")] {
            let (timing, peak) = with_peak_rss(|| {
                hiera_finetune_step::<B>(size, side, frozen, device, plan.repeats)
            });
            let timing = timing.map_err(|e| format!("hiera benchmark: {e}"))?;
            rows.push(row(spec(what, "steps/s"), &timing, peak, cuda_memory_note));
        }
    }
    Ok(rows)
}
