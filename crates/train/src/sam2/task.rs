//! The SAM2 task: its objects (the prefetching object loader), the model and which of its
//! parameters train (not the position buffer, not a frozen encoder), the optimizer with the
//! image encoder's learning-rate scales, its weights (official key names; `--init-from` an
//! official SAM 2.1 checkpoint) and its evaluation, as the engine asks for them.

use std::path::Path;

use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use segburn_data::objects::{
    ObjectBatch, ObjectDataset, ObjectEpochIter, ObjectError, ObjectLoader,
};
use segburn_models::sam2::{import, Sam2};
use segburn_models::tensor_file::NamedTensors;
use segburn_models::weights::{dotted_path, LoadReport};

use super::config::Sam2Recipe;
use super::encoder_lr::EncoderLrScales;
use super::eval::{evaluate, Sam2EvalReport};
use super::setup::Sam2Setup;
use super::step::Sam2Step;
use crate::checkpoint::load_checkpoint;
use crate::engine::{Task, TrainError, ValidationReport};
use crate::loss::sam::SamLoss;
use crate::optim::{list_params, OptimizerSet, ParamInfo};

/// The position-encoding buffer: saved with the model, never trained (spec §10.12).
pub const POSITION_BUFFER_KEY: &str =
    "sam_prompt_encoder.pe_layer.positional_encoding_gaussian_matrix";
const ENCODER_PREFIX: &str = "image_encoder.";

/// A SAM2 training task.
pub struct Sam2Task {
    setup: Sam2Setup,
    step: Sam2Step,
    loader: ObjectLoader,
    val: Option<ObjectDataset>,
}

/// An epoch of training batches with the engine's error type.
pub type Sam2Epoch = std::iter::Map<
    ObjectEpochIter,
    fn(Result<ObjectBatch, ObjectError>) -> Result<ObjectBatch, TrainError>,
>;

fn object_error(batch: Result<ObjectBatch, ObjectError>) -> Result<ObjectBatch, TrainError> {
    batch.map_err(TrainError::from)
}

impl Sam2Task {
    /// Checks the set-up and indexes the training (and, when the run validates, the
    /// validation) objects.
    pub fn new(setup: &Sam2Setup) -> Result<Self, TrainError> {
        setup.check()?;
        let seed = setup.train.seed;
        let size = setup.model.image_size;
        let train = ObjectDataset::new(&setup.data, &setup.data.train_split, size, seed)?;
        let val = if setup.train.validates() {
            Some(ObjectDataset::new(
                &setup.data,
                &setup.data.val_split,
                size,
                seed,
            )?)
        } else {
            None
        };
        let model = &setup.model;
        Ok(Self {
            step: Sam2Step {
                loss: SamLoss::new(setup.loss.clone()),
                loss_config: setup.loss.clone(),
                prompts: setup.prompts.clone(),
                freeze_image_encoder: model.freeze_image_encoder,
                drop_path_rate: model.image_encoder.drop_path_rate(),
                gate_masks_by_object_score: model.gate_masks_by_object_score,
            },
            loader: ObjectLoader::new(train, setup.data.prefetch),
            val,
            setup: setup.clone(),
        })
    }

    /// The set-up the task was built from.
    pub fn setup(&self) -> &Sam2Setup {
        &self.setup
    }

    /// The training objects.
    pub fn train_objects(&self) -> &ObjectDataset {
        self.loader.dataset()
    }
}

impl<B: AutodiffBackend> Task<B> for Sam2Task {
    type Recipe = Sam2Recipe;
    type Step = Sam2Step;
    type Epoch = Sam2Epoch;
    type Validation = Sam2EvalReport;

    fn describe(&self) -> String {
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
        let data = &self.setup.data;
        format!(
            "SAM2 heads ({} px input, {encoder}; micro-batches of {} image(s), up to {} \
             object(s) each, {} correction click(s))",
            model.image_size,
            data.batch_size,
            data.objects_per_image,
            self.setup.prompts.correction_steps
        )
    }

    fn batch_size_field(&self) -> (&'static str, usize) {
        ("data.batch_size", self.setup.data.batch_size)
    }

    fn init_model(&self, device: &B::Device) -> Sam2<B> {
        self.setup.model.sam2().init::<B>(device)
    }

    fn trained_params(&self, model: &Sam2<B>) -> Vec<ParamInfo> {
        let frozen = self.setup.model.freeze_image_encoder;
        list_params(model, &dotted_path)
            .into_iter()
            .filter(|p| p.key != POSITION_BUFFER_KEY)
            .filter(|p| !(frozen && p.key.starts_with(ENCODER_PREFIX)))
            .collect()
    }

    /// The configured groups, each split by the image encoder's learning-rate scales
    /// (encoder multiplier, layer-wise decay).
    fn optimizer(&self, params: &[ParamInfo]) -> Result<OptimizerSet<Sam2<B>, B>, TrainError> {
        let scales = EncoderLrScales::new(&self.setup.model)?;
        let train = &self.setup.train;
        Ok(OptimizerSet::with_lr_scales(
            &train.optimizer,
            &train.param_groups,
            params,
            &|param| scales.scale(&param.key),
        ))
    }

    fn export_model(&self, model: &Sam2<B>) -> NamedTensors {
        import::export(model)
    }

    fn load_exact(
        &self,
        model: Sam2<B>,
        tensors: &NamedTensors,
        source: &Path,
    ) -> Result<Sam2<B>, TrainError> {
        let name = source.display().to_string();
        let (model, _) = import::load_sam2_tensors(model, tensors, true, &name)?;
        Ok(model)
    }

    /// An official SAM2/SAM2.1 checkpoint (`{"model": …}` `.pt` or `.safetensors`) or a segburn
    /// checkpoint. With the Hiera encoder the load is strict: the file must hold the whole
    /// image model (encoder, `no_mem_embed`, heads) with the right shapes; the video-memory
    /// keys of an official file are listed as not used. With our CNN encoder, an official file
    /// gives the heads only (its Hiera keys are listed as unexpected and our encoder keeps its
    /// weights).
    fn load_initial(
        &self,
        model: Sam2<B>,
        path: &Path,
    ) -> Result<(Sam2<B>, LoadReport), TrainError> {
        let strict = self.setup.model.image_encoder.is_hiera();
        let name = path.display().to_string();
        let loaded = match load_checkpoint(path) {
            Ok(checkpoint) => import::load_sam2_tensors(model, &checkpoint.model, strict, &name),
            Err(e) if e.may_be_other_weights() => import::load_official(model, path, strict),
            Err(e) => return Err(e.into()),
        };
        Ok(loaded?)
    }

    fn check_resumable(&self, tensors: &NamedTensors, path: &Path) -> Result<(), TrainError> {
        let has_encoder = self.setup.model.image_encoder.is_some();
        let saved_encoder = tensors.keys().any(|k| k.starts_with(ENCODER_PREFIX));
        if has_encoder != saved_encoder {
            return Err(TrainError::Resume(format!(
                "{} was saved {} an image encoder but model.image_encoder is {}",
                path.display(),
                if saved_encoder { "with" } else { "without" },
                if has_encoder { "set" } else { "None" }
            )));
        }
        Ok(())
    }

    fn step(&self) -> Sam2Step {
        self.step.clone()
    }

    fn batches_per_epoch(&self) -> usize {
        self.loader.batches_per_epoch()
    }

    fn epoch(&self, epoch: u64, from: usize) -> Sam2Epoch {
        self.loader
            .epoch_iter(epoch, from)
            .map(object_error as fn(_) -> _)
    }

    fn is_empty(batch: &ObjectBatch) -> bool {
        batch.num_objects() == 0
    }

    fn can_validate(&self) -> bool {
        self.val.is_some()
    }

    fn validate(&self, model: &Sam2<B>, device: &B::Device) -> Result<Sam2EvalReport, TrainError> {
        let Some(val) = &self.val else {
            return Err(TrainError::Config(
                "evaluation is disabled in this configuration".into(),
            ));
        };
        evaluate(
            &model.valid(),
            val,
            self.setup.prompts.eval_corrections,
            self.setup.model.gate_masks_by_object_score,
            device,
        )
    }

    fn resume_breaking_fields(&self) -> &'static [&'static str] {
        &[
            "model.",
            "data.source.",
            "data.batch_size",
            "data.objects_per_image",
            "data.embeddings",
        ]
    }
}

impl ValidationReport for Sam2EvalReport {
    const COLUMNS: &'static [&'static str] = &["iou_one_click", "iou_one_box", "iou_corrected"];

    fn headline(&self) -> f64 {
        Sam2EvalReport::headline(self)
    }

    fn columns(&self) -> Vec<Option<f64>> {
        vec![
            Some(self.one_click),
            Some(self.one_box),
            self.after_corrections.last().copied(),
        ]
    }

    fn log_text(&self, step: u64) -> String {
        format!("evaluation at step {step}: {self}")
    }

    fn summary(&self) -> String {
        self.to_string()
    }
}
