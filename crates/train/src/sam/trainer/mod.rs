//! The SAM2 training loop: batch of images → features (the image encoder, our CNN or SAM 2.1's
//! Hiera, trained or frozen; or cached embeddings) →
//! per object, the first prompt and the correction clicks, each step's masks upsampled to the
//! input size → SAM2's multi-step loss → backward → unscale + finite check + clip → AdamW
//! step → cosine LR → log → periodic evaluation → periodic checkpoint.
//!
//! The building blocks are the PIDNet trainer's (optimizer groups, schedule, clipping,
//! checkpoint format, `TrainState`), so a resume is exact in the same way: the model, the
//! optimizer state and the position (step, epoch, batch) are in the checkpoint; batches are a
//! pure function of `(seed, epoch, index)` and prompts of `(seed, step, object)`.

mod step;
mod weights;

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use segburn_data::objects::{ObjectDataset, ObjectEpochIter, ObjectLoader};
use segburn_models::sam2::{import, Sam2};
use segburn_models::tensor_file::NamedTensors;
use segburn_models::weights::dotted_path;

use super::encoder_lr::EncoderLrScales;
use super::error::Sam2TrainError;
use super::eval::{evaluate, Sam2EvalReport};
use super::events::{Sam2Event, Sam2Observer, Sam2StepReport};
use super::run_log::Sam2MetricsRow;
use super::Sam2TrainerSetup;
use crate::checkpoint::{CheckpointDir, RunDirLock, SavedCheckpoint, TrainState};
use crate::loss::sam::SamLoss;
use crate::mixed_precision::LossScaler;
use crate::optim::{list_params, OptimizerSet, ParamInfo};
use crate::run_schedule::{run_schedule, Cadence, Schedulable, ScheduleEnd, StepTimer};
use crate::stop_signal::{stopped_message, StopSignal};
use crate::trainer::{initialize_now, RunLog};

/// The position-encoding buffer: saved with the model, never trained (spec §10.12).
pub const POSITION_BUFFER_KEY: &str =
    "sam_prompt_encoder.pe_layer.positional_encoding_gaussian_matrix";
const ENCODER_PREFIX: &str = "image_encoder.";

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Sam2RunSummary {
    pub steps: u64,
    /// Whether a [`StopSignal`] ended the run before its configured end.
    pub stopped: bool,
    pub last_checkpoint: Option<PathBuf>,
    pub final_report: Option<Sam2EvalReport>,
    pub seconds: f64,
}

/// A SAM2 training run.
pub struct Sam2Trainer<B: AutodiffBackend> {
    model: Option<Sam2<B>>,
    optimizer: OptimizerSet<Sam2<B>, B>,
    params: Vec<ParamInfo>,
    loss: SamLoss,
    loader: ObjectLoader,
    val: Option<ObjectDataset>,
    setup: Sam2TrainerSetup,
    state: TrainState,
    device: B::Device,
    checkpoints: CheckpointDir,
    log: RunLog,
    last_checkpoint: Option<PathBuf>,
    stop: StopSignal,
    /// Held while the trainer lives: one run per run directory.
    _lock: RunDirLock,
}

fn log_error(dir: &Path) -> impl FnOnce(std::io::Error) -> Sam2TrainError + '_ {
    move |source| Sam2TrainError::Log {
        path: dir.to_path_buf(),
        source,
    }
}

/// The parameters the optimizer owns: not the position buffer, not a frozen encoder.
fn trained_params<B: AutodiffBackend>(model: &Sam2<B>, freeze_encoder: bool) -> Vec<ParamInfo> {
    list_params(model, &dotted_path)
        .into_iter()
        .filter(|p| p.key != POSITION_BUFFER_KEY)
        .filter(|p| !(freeze_encoder && p.key.starts_with(ENCODER_PREFIX)))
        .collect()
}

/// The optimizer of `params`: the configured groups, each split by the image encoder's
/// learning-rate scales (encoder multiplier, layer-wise decay).
fn build_optimizer<B: AutodiffBackend>(
    setup: &Sam2TrainerSetup,
    params: &[ParamInfo],
) -> Result<OptimizerSet<Sam2<B>, B>, Sam2TrainError> {
    let scales = EncoderLrScales::new(&setup.train, &setup.model.image_encoder)
        .map_err(Sam2TrainError::Config)?;
    Ok(OptimizerSet::with_lr_scales(
        &setup.train.optimizer,
        &setup.train.param_groups,
        params,
        &|param| scales.scale(&param.key),
    ))
}

impl<B: AutodiffBackend> Sam2Trainer<B> {
    /// Indexes the data, builds the model (freshly initialised) and the optimizer.
    pub fn new(setup: Sam2TrainerSetup, device: B::Device) -> Result<Self, Sam2TrainError> {
        setup.check()?;
        let seed = setup.train.seed;
        let size = setup.model.image_size;
        let train = ObjectDataset::new(&setup.data, &setup.data.train_split, size, seed)?;
        if train.batches_per_epoch() == 0 {
            return Err(Sam2TrainError::TooFewImages {
                images: train.len(),
                batch_size: setup.data.batch_size,
            });
        }
        let val = if setup.train.validate_at_end || setup.train.validate_every_steps.is_some() {
            Some(ObjectDataset::new(
                &setup.data,
                &setup.data.val_split,
                size,
                seed,
            )?)
        } else {
            None
        };
        // Seeded, and initialised now rather than lazily, so a fresh run starts from the same
        // weights every time.
        B::seed(&device, seed);
        let model = setup.model.sam2().init::<B>(&device);
        initialize_now(&model);
        let params = trained_params(&model, setup.model.freeze_image_encoder);
        let optimizer = build_optimizer(&setup, &params)?;
        let run_dir = setup.train.run_dir.clone();
        let lock = RunDirLock::acquire(&run_dir)?;
        let log = RunLog::open(&run_dir).map_err(log_error(&run_dir))?;
        Ok(Self {
            model: Some(model),
            optimizer,
            params,
            loss: SamLoss::new(setup.loss.clone()),
            loader: ObjectLoader::new(train, setup.data.prefetch),
            val,
            checkpoints: CheckpointDir::of_run(&run_dir),
            state: TrainState {
                step: 0,
                epoch: 0,
                batch_in_epoch: 0,
                seed,
                loss_scaler: LossScaler::new(
                    setup.train.loss_scaler.clone(),
                    setup.train.precision.uses_loss_scaling(),
                ),
                best_metric: None,
                history: Vec::new(),
            },
            setup,
            device,
            log,
            last_checkpoint: None,
            stop: StopSignal::new(),
            _lock: lock,
        })
    }

    /// Stops the run at the next step boundary, with a checkpoint, once `stop` is raised.
    pub fn with_stop_signal(mut self, stop: StopSignal) -> Self {
        self.stop = stop;
        self
    }

    /// The model (between steps).
    pub fn model(&self) -> &Sam2<B> {
        self.model
            .as_ref()
            .expect("the model is only taken out during a step")
    }

    pub fn state(&self) -> &TrainState {
        &self.state
    }

    pub fn checkpoint_dir(&self) -> &CheckpointDir {
        &self.checkpoints
    }

    /// The parameters the optimizer trains.
    pub fn trained_params(&self) -> &[ParamInfo] {
        &self.params
    }

    /// The optimizer state as it would be saved.
    pub fn optimizer_state(&self) -> NamedTensors {
        self.optimizer.export(&self.device)
    }

    pub fn steps_per_epoch(&self) -> u64 {
        self.loader.batches_per_epoch() as u64
    }

    /// The schedule's horizon.
    pub fn total_steps(&self) -> u64 {
        self.setup.train.epochs * self.steps_per_epoch()
    }

    /// The step the run stops at (`max_steps` or the horizon).
    pub fn stop_step(&self) -> u64 {
        let total = self.total_steps();
        self.setup.train.max_steps.map_or(total, |m| m.min(total))
    }

    fn say(
        &mut self,
        observer: &mut dyn Sam2Observer,
        message: String,
    ) -> Result<(), Sam2TrainError> {
        self.log.line(&message).map_err(log_error(self.log.dir()))?;
        observer.event(&Sam2Event::Message(message));
        Ok(())
    }

    /// Trains until the configured end (all epochs, or `max_steps`).
    pub fn run(
        &mut self,
        observer: &mut dyn Sam2Observer,
    ) -> Result<Sam2RunSummary, Sam2TrainError> {
        let started = Instant::now();
        let train = self.setup.train.clone();
        let steps_per_epoch = self.steps_per_epoch();
        let total = self.total_steps();
        let stop_at = self.stop_step();
        let model = &self.setup.model;
        let encoder = match (
            model.image_encoder.is_some(),
            model.image_encoder.is_hiera(),
            model.freeze_image_encoder,
        ) {
            (false, _, _) => "no encoder (cached embeddings)",
            (true, true, true) => "a frozen Hiera encoder",
            (true, true, false) => "the Hiera encoder, end to end",
            (true, false, true) => "a frozen encoder",
            (true, false, false) => "our encoder, end to end",
        };
        self.say(
            observer,
            format!(
                "training SAM2 heads ({} px input, {encoder}) for steps {}..{stop_at} of {total} \
                 ({steps_per_epoch} per epoch, {} image(s) per step, up to {} object(s) each, \
                 {} correction click(s)), precision {:?}, run dir {}",
                self.setup.model.image_size,
                self.state.step,
                self.setup.data.batch_size,
                self.setup.data.objects_per_image,
                self.setup.prompts.correction_steps,
                train.precision,
                train.run_dir.display()
            ),
        )?;
        let cadence = Cadence {
            stop_at,
            batches_per_epoch: steps_per_epoch,
            log_every_steps: train.log_every_steps,
            validate_every_steps: train.validate_every_steps,
            checkpoint_every_steps: train.checkpoint_every_steps,
            validate_every_epochs: 0,
            validate_at_end: train.validate_at_end,
        };
        let timer = StepTimer::new(self.state.step);
        let stop = self.stop.clone();
        let mut run = Sam2Run {
            trainer: self,
            observer,
            total,
            stop_at,
            timer,
        };
        let end = run_schedule(&mut run, &cadence, &stop)?;
        let (final_report, stopped) = match end {
            ScheduleEnd::Finished(report) => (report, false),
            ScheduleEnd::Stopped => {
                let message = stopped_message(self.state.step, self.last_checkpoint.as_deref());
                self.say(observer, message)?;
                (None, true)
            }
        };
        Ok(Sam2RunSummary {
            steps: self.state.step,
            stopped,
            last_checkpoint: self.last_checkpoint.clone(),
            final_report,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    fn log_step(&mut self, report: &Sam2StepReport) -> Result<(), Sam2TrainError> {
        let loss = match report.loss {
            Some(l) => format!(
                "loss {:.4} (mask {:.4} dice {:.4} iou {:.4} class {:.4})",
                l.total, l.mask, l.dice, l.iou, l.class
            ),
            None => "no object in this batch".to_string(),
        };
        let line = format!(
            "step {}/{} epoch {} lr {:.3e} {loss} grad-norm {:.3} {} objects {:.2} s{}",
            report.step,
            report.total_steps,
            report.epoch,
            report.lr,
            report.grad_norm,
            report.objects,
            report.seconds,
            if report.skipped {
                " [skipped: gradient overflow]"
            } else {
                ""
            }
        );
        self.log.line(&line).map_err(log_error(self.log.dir()))?;
        let row = Sam2MetricsRow {
            kind: "train",
            step: report.step,
            epoch: report.epoch,
            lr: report.lr,
            loss: report.loss.map(|l| l.total),
            loss_mask: report.loss.map(|l| l.mask),
            loss_dice: report.loss.map(|l| l.dice),
            loss_iou: report.loss.map(|l| l.iou),
            loss_class: report.loss.map(|l| l.class),
            grad_norm: Some(report.grad_norm),
            objects: Some(report.objects),
            seconds: Some(report.seconds),
            ..Sam2MetricsRow::default()
        };
        self.log.metrics(&row).map_err(log_error(self.log.dir()))
    }

    /// Evaluates the validation split with the current weights.
    pub fn validate(&self) -> Result<Sam2EvalReport, Sam2TrainError> {
        let Some(val) = &self.val else {
            return Err(Sam2TrainError::Config(
                "evaluation is disabled in this configuration (train.validate_at_end: false and \
                 no validate_every_steps)"
                    .into(),
            ));
        };
        let train = &self.setup.train;
        evaluate(
            &self.model().valid(),
            val,
            train.eval_corrections,
            train.gate_masks_by_object_score,
            &self.device,
        )
    }

    fn validate_and_record(
        &mut self,
        observer: &mut dyn Sam2Observer,
    ) -> Result<Sam2EvalReport, Sam2TrainError> {
        let report = self.validate()?;
        let step = self.state.step;
        let headline = report.headline();
        self.state.history.push((step, headline));
        if self
            .state
            .best_metric
            .is_none_or(|(best, _)| headline > best)
        {
            self.state.best_metric = Some((headline, step));
        }
        self.log
            .line(&format!("evaluation at step {step}: {report}"))
            .map_err(log_error(self.log.dir()))?;
        let row = Sam2MetricsRow {
            kind: "val",
            step,
            epoch: self.state.epoch,
            iou_one_click: Some(report.one_click),
            iou_one_box: Some(report.one_box),
            iou_corrected: report.after_corrections.last().copied(),
            ..Sam2MetricsRow::default()
        };
        self.log.metrics(&row).map_err(log_error(self.log.dir()))?;
        observer.event(&Sam2Event::Validation {
            step,
            report: report.clone(),
        });
        Ok(report)
    }

    /// Saves a checkpoint of the current state, updates the pointers and rotates old files.
    pub fn save(&mut self, observer: &mut dyn Sam2Observer) -> Result<PathBuf, Sam2TrainError> {
        let step = self.state.step;
        let model = import::export(self.model());
        let optimizer = self.optimizer.export(&self.device);
        let SavedCheckpoint {
            path,
            bytes,
            seconds,
        } = self.checkpoints.save_step(
            &self.state,
            &self.setup.experiment_text,
            &model,
            &optimizer,
            &self.setup.train.retention,
        )?;
        self.last_checkpoint = Some(path.clone());
        self.log
            .line(&format!(
                "saved {} ({:.1} MB, {seconds:.2} s)",
                path.display(),
                bytes as f64 / 1e6
            ))
            .map_err(log_error(self.log.dir()))?;
        observer.event(&Sam2Event::Checkpoint {
            step,
            path: path.clone(),
            bytes,
            seconds,
        });
        Ok(path)
    }
}

/// A SAM2 run as the shared schedule sees it.
struct Sam2Run<'a, B: AutodiffBackend> {
    trainer: &'a mut Sam2Trainer<B>,
    observer: &'a mut dyn Sam2Observer,
    total: u64,
    stop_at: u64,
    timer: StepTimer,
}

impl<B: AutodiffBackend> Schedulable for Sam2Run<'_, B> {
    type Error = Sam2TrainError;
    type Batches = ObjectEpochIter;
    type Report = Sam2StepReport;
    type Validation = Sam2EvalReport;

    fn state(&self) -> &TrainState {
        &self.trainer.state
    }

    fn state_mut(&mut self) -> &mut TrainState {
        &mut self.trainer.state
    }

    fn open_epoch(&mut self) -> ObjectEpochIter {
        let state = &self.trainer.state;
        self.trainer
            .loader
            .epoch_iter(state.epoch, state.batch_in_epoch)
    }

    fn step(&mut self, batches: &mut ObjectEpochIter) -> Result<Sam2StepReport, Sam2TrainError> {
        self.trainer
            .train_step(batches, self.total, &self.timer, self.stop_at)
    }

    fn report(&mut self, report: Sam2StepReport, log: bool) -> Result<(), Sam2TrainError> {
        if log {
            self.trainer.log_step(&report)?;
        }
        self.observer.event(&Sam2Event::Step(report));
        Ok(())
    }

    fn validate(&mut self) -> Result<Sam2EvalReport, Sam2TrainError> {
        self.trainer.validate_and_record(self.observer)
    }

    fn save(&mut self) -> Result<(), Sam2TrainError> {
        self.trainer.save(self.observer).map(drop)
    }
}
