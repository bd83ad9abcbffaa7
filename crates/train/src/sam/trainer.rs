//! The SAM2 training loop: batch of images → features (our encoder, or cached embeddings) →
//! per object, the first prompt and the correction clicks, each step's masks upsampled to the
//! input size → SAM2's multi-step loss → backward → unscale + finite check + clip → AdamW
//! step → cosine LR → log → periodic evaluation → periodic checkpoint.
//!
//! The building blocks are the PIDNet trainer's (optimizer groups, schedule, clipping,
//! checkpoint format, `TrainState`), so a resume is exact in the same way: the model, the
//! optimizer state and the position (step, epoch, batch) are in the checkpoint; batches are a
//! pure function of `(seed, epoch, index)` and prompts of `(seed, step, object)`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use segburn_data::objects::{ObjectDataset, ObjectEpochIter, ObjectLoader};
use segburn_models::sam2::{import, Sam2};
use segburn_models::tensor_file::NamedTensors;
use segburn_models::weights::{dotted_path, LoadReport};

use super::batch::{image_features, per_object, targets, truth_views};
use super::error::Sam2TrainError;
use super::eval::{evaluate, Sam2EvalReport};
use super::events::{Sam2Event, Sam2LossValues, Sam2Observer, Sam2StepReport};
use super::interactive::interactive_steps;
use super::prompts::TrainingPrompts;
use super::run_log::Sam2MetricsRow;
use super::Sam2TrainerSetup;
use crate::checkpoint::{
    load_checkpoint, save_checkpoint, CheckpointDir, CheckpointMeta, TrainState, FORMAT_VERSION,
};
use crate::loss::sam::SamLoss;
use crate::mixed_precision::LossScaler;
use crate::optim::{list_params, unscale_and_clip, OptimizerSet, ParamInfo};
use crate::trainer::RunLog;

/// The position-encoding buffer: saved with the model, never trained (spec §10.12).
pub const POSITION_BUFFER_KEY: &str =
    "sam_prompt_encoder.pe_layer.positional_encoding_gaussian_matrix";
const ENCODER_PREFIX: &str = "image_encoder.";

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Sam2RunSummary {
    pub steps: u64,
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
}

fn log_error(dir: &Path) -> impl FnOnce(std::io::Error) -> Sam2TrainError + '_ {
    move |source| Sam2TrainError::Log {
        path: dir.to_path_buf(),
        source,
    }
}

/// Materialises every lazily initialised parameter (while the seeded generator is ours).
fn initialize_now<B: AutodiffBackend>(model: &Sam2<B>) {
    struct Touch;
    impl<B: burn::tensor::backend::Backend> burn::module::ModuleVisitor<B> for Touch {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<B, D>>) {
            let _ = param.val();
        }
    }
    burn::module::Module::visit(model, &mut Touch);
}

/// The parameters the optimizer owns: not the position buffer, not a frozen encoder.
fn trained_params<B: AutodiffBackend>(model: &Sam2<B>, freeze_encoder: bool) -> Vec<ParamInfo> {
    list_params(model, &dotted_path)
        .into_iter()
        .filter(|p| p.key != POSITION_BUFFER_KEY)
        .filter(|p| !(freeze_encoder && p.key.starts_with(ENCODER_PREFIX)))
        .collect()
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
        let optimizer =
            OptimizerSet::new(&setup.train.optimizer, &setup.train.param_groups, &params);
        let run_dir = setup.train.run_dir.clone();
        let log = RunLog::open(&run_dir).map_err(log_error(&run_dir))?;
        Ok(Self {
            model: Some(model),
            optimizer,
            params,
            loss: SamLoss::new(setup.loss.clone()),
            loader: ObjectLoader::new(train, setup.data.prefetch),
            val,
            checkpoints: CheckpointDir::new(run_dir.join("checkpoints")),
            state: TrainState {
                step: 0,
                epoch: 0,
                batch_in_epoch: 0,
                seed,
                loss_scaler: LossScaler::new(Default::default(), false),
                best_metric: None,
                history: Vec::new(),
            },
            setup,
            device,
            log,
            last_checkpoint: None,
        })
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

    /// Rebuilds the model after a failed load consumed it, so the trainer stays usable.
    fn restore_model(&mut self) {
        self.model = Some(self.setup.model.sam2().init::<B>(&self.device));
    }

    /// Starts from weights only: an official SAM2/SAM2.1 checkpoint (heads; its Hiera encoder
    /// is reported as not loaded) or a segburn checkpoint. Loads what matches.
    pub fn init_weights_from(&mut self, path: &Path) -> Result<LoadReport, Sam2TrainError> {
        let model = self.model.take().expect("model present between steps");
        let loaded = match load_checkpoint(path) {
            Ok(checkpoint) => import::load_sam2_tensors(
                model,
                &checkpoint.model,
                false,
                &path.display().to_string(),
            ),
            Err(_) => import::load_official(model, path, false),
        };
        match loaded {
            Ok((model, report)) => {
                self.model = Some(model);
                Ok(report)
            }
            Err(e) => {
                self.restore_model();
                Err(e.into())
            }
        }
    }

    /// Restores model, optimizer and position from a checkpoint of this run.
    pub fn resume(&mut self, path: &Path) -> Result<(), Sam2TrainError> {
        let checkpoint = load_checkpoint(path)?;
        let has_encoder = self.model().image_encoder.is_some();
        let saved_encoder = checkpoint
            .model
            .keys()
            .any(|k| k.starts_with(ENCODER_PREFIX));
        if has_encoder != saved_encoder {
            return Err(Sam2TrainError::Resume(format!(
                "{} was saved {} an image encoder but model.image_encoder is {}",
                path.display(),
                if saved_encoder { "with" } else { "without" },
                if has_encoder { "set" } else { "None" }
            )));
        }
        let model = self.model.take().expect("model present between steps");
        let name = path.display().to_string();
        let model = match import::load_sam2_tensors(model, &checkpoint.model, true, &name) {
            Ok((model, _)) => model,
            Err(e) => {
                self.restore_model();
                return Err(e.into());
            }
        };
        self.model = Some(model);
        let fresh = OptimizerSet::new(
            &self.setup.train.optimizer,
            &self.setup.train.param_groups,
            &self.params,
        );
        let optimizer = std::mem::replace(&mut self.optimizer, fresh);
        self.optimizer = optimizer.import(&checkpoint.optimizer, &self.device);
        let state = checkpoint.meta.state;
        if state.seed != self.setup.train.seed {
            return Err(Sam2TrainError::Resume(format!(
                "{} was trained with seed {}, the config says {}; the data order and prompts \
                 would change",
                path.display(),
                state.seed,
                self.setup.train.seed
            )));
        }
        self.state = state;
        self.last_checkpoint = Some(path.to_path_buf());
        let message = format!(
            "resumed from {} at step {} (epoch {}, batch {})",
            path.display(),
            self.state.step,
            self.state.epoch,
            self.state.batch_in_epoch
        );
        self.log.line(&message).map_err(log_error(self.log.dir()))
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
        let encoder = match (
            &self.setup.model.image_encoder,
            self.setup.model.freeze_image_encoder,
        ) {
            (None, _) => "no encoder (cached embeddings)",
            (Some(_), true) => "a frozen encoder",
            (Some(_), false) => "our encoder, end to end",
        };
        self.say(
            observer,
            format!(
                "training SAM2 heads ({} px input, {encoder}) for steps {}..{stop_at} of {total} \
                 ({steps_per_epoch} per epoch, {} image(s) per step, up to {} object(s) each, \
                 {} correction click(s)), run dir {}",
                self.setup.model.image_size,
                self.state.step,
                self.setup.data.batch_size,
                self.setup.data.objects_per_image,
                self.setup.prompts.correction_steps,
                train.run_dir.display()
            ),
        )?;
        let mut saved_at = None;
        let mut validated_at = None;
        let timer = (Instant::now(), self.state.step);
        while self.state.step < stop_at {
            let mut batches = self
                .loader
                .epoch_iter(self.state.epoch, self.state.batch_in_epoch);
            while self.state.step < stop_at && (self.state.batch_in_epoch as u64) < steps_per_epoch
            {
                let report = self.train_step(&mut batches, total, timer, stop_at)?;
                let step = self.state.step;
                if step.is_multiple_of(train.log_every_steps) || step == stop_at {
                    self.log_step(&report)?;
                }
                observer.event(&Sam2Event::Step(report));
                if train
                    .validate_every_steps
                    .is_some_and(|n| step.is_multiple_of(n))
                {
                    self.validate_and_record(observer)?;
                    validated_at = Some(step);
                    self.save(observer)?;
                    saved_at = Some(step);
                } else if train
                    .checkpoint_every_steps
                    .is_some_and(|n| step.is_multiple_of(n))
                {
                    self.save(observer)?;
                    saved_at = Some(step);
                }
            }
            drop(batches);
            if self.state.batch_in_epoch as u64 >= steps_per_epoch {
                self.state.epoch += 1;
                self.state.batch_in_epoch = 0;
                if saved_at != Some(self.state.step) {
                    self.save(observer)?;
                    saved_at = Some(self.state.step);
                }
            }
        }
        let step = self.state.step;
        let mut final_report = None;
        if train.validate_at_end && validated_at != Some(step) {
            final_report = Some(self.validate_and_record(observer)?);
        }
        if saved_at != Some(step) || final_report.is_some() {
            self.save(observer)?;
        }
        Ok(Sam2RunSummary {
            steps: step,
            last_checkpoint: self.last_checkpoint.clone(),
            final_report,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// One optimizer step on one batch of images.
    fn train_step(
        &mut self,
        batches: &mut ObjectEpochIter,
        total: u64,
        timer: (Instant, u64),
        stop_at: u64,
    ) -> Result<Sam2StepReport, Sam2TrainError> {
        let started = Instant::now();
        let train = &self.setup.train;
        let lr = train.schedule.lr(train.lr, self.state.step, total);
        let batch = batches.next().ok_or_else(|| {
            Sam2TrainError::Resume("the data loader ended before the epoch's last step".into())
        })??;
        self.state.batch_in_epoch += 1;
        let objects = batch.num_objects();
        let mut report = Sam2StepReport {
            step: self.state.step + 1,
            total_steps: total,
            epoch: self.state.epoch,
            lr,
            loss: None,
            grad_norm: 0.0,
            images: batch.num_images(),
            objects,
            seconds: 0.0,
            eta_seconds: 0.0,
        };
        if objects > 0 {
            let (loss, grad_norm) = self.optimize(&batch, lr)?;
            report.loss = Some(loss);
            report.grad_norm = grad_norm;
        }
        self.state.step += 1;
        report.seconds = started.elapsed().as_secs_f64();
        let done = self.state.step.saturating_sub(timer.1).max(1) as f64;
        report.eta_seconds =
            timer.0.elapsed().as_secs_f64() / done * stop_at.saturating_sub(self.state.step) as f64;
        Ok(report)
    }

    /// Forward over every prompt step, loss, backward, clip, optimizer step.
    fn optimize(
        &mut self,
        batch: &segburn_data::objects::ObjectBatch,
        lr: f64,
    ) -> Result<(Sam2LossValues, f64), Sam2TrainError> {
        let setup = &self.setup;
        let model = self.model.as_ref().expect("model present during a step");
        let objects = batch.num_objects();
        let features =
            image_features(model, batch, setup.model.freeze_image_encoder, &self.device)?;
        let features = per_object(&features, &batch.object_image);
        let truths = truth_views(batch);
        let mut prompts =
            TrainingPrompts::new(&setup.prompts, setup.train.seed, self.state.step, objects);
        let output = interactive_steps(
            model,
            &features,
            &truths,
            &mut prompts,
            setup.prompts.correction_steps,
            setup.train.gate_masks_by_object_score,
        )?;
        let terms =
            self.loss
                .forward(&output.steps, targets(batch, &self.device), objects as f32)?;
        let core = terms.core_loss(&setup.loss);
        // One download for all five numbers.
        let values: Vec<f64> = Tensor::cat(
            vec![
                core.clone(),
                terms.loss_mask,
                terms.loss_dice,
                terms.loss_iou,
                terms.loss_class,
            ],
            0,
        )
        .into_data()
        .iter::<f64>()
        .collect();
        let loss = Sam2LossValues {
            total: values[0],
            mask: values[1],
            dice: values[2],
            iou: values[3],
            class: values[4],
        };
        let non_finite = |what: &str| Sam2TrainError::NonFiniteLoss {
            step: self.state.step,
            loss: format!(
                "{what}: total {:?}, mask {:?}, dice {:?}, iou {:?}, class {:?}",
                loss.total, loss.mask, loss.dice, loss.iou, loss.class
            ),
            last_checkpoint: self.last_checkpoint.clone(),
        };
        if !loss.total.is_finite() {
            return Err(non_finite("loss"));
        }
        let mut grads = GradientsParams::from_grads(core.backward(), model);
        let summary = unscale_and_clip::<B::InnerBackend>(
            &mut grads,
            &self.params,
            1.0,
            setup.train.grad_clip_norm,
            &self.device,
        );
        if !summary.finite {
            return Err(non_finite("gradients"));
        }
        let model = self.model.take().expect("model present during a step");
        self.model = Some(self.optimizer.step(lr, model, grads));
        Ok((loss, summary.norm))
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
            "step {}/{} epoch {} lr {:.3e} {loss} grad-norm {:.3} {} objects {:.2} s",
            report.step,
            report.total_steps,
            report.epoch,
            report.lr,
            report.grad_norm,
            report.objects,
            report.seconds
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
        let started = Instant::now();
        let step = self.state.step;
        let path = self.checkpoints.file_for_step(step);
        let meta = CheckpointMeta {
            format_version: FORMAT_VERSION,
            state: self.state.clone(),
            config: self.setup.experiment_text.clone(),
            segburn_version: env!("CARGO_PKG_VERSION").to_string(),
            burn_version: "0.21.0".to_string(),
        };
        let model = import::export(self.model());
        let optimizer = self.optimizer.export(&self.device);
        let bytes = save_checkpoint(&path, &model, &optimizer, &meta)?;
        self.checkpoints.set_latest(&path)?;
        if self.state.best_metric.is_some_and(|(_, best)| best == step) {
            self.checkpoints.set_best(&path)?;
        }
        self.checkpoints.rotate(&self.setup.train.retention);
        self.last_checkpoint = Some(path.clone());
        let seconds = started.elapsed().as_secs_f64();
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
