//! SAM2-style promptable segmentation training: objects from the data crate, simulated
//! prompts (a noisy box or a click, then correction clicks from the error region, the previous
//! logits fed back as the mask prompt), SAM2's multi-step loss, and a loop built from the
//! PIDNet trainer's pieces (AdamW groups, cosine schedule, clipping, the shared checkpoint
//! format with exact resume). See `reference/sam2-spec.md` §5–6 for the recipe followed.
//!
//! ```no_run
//! use burn::backend::{Autodiff, Flex};
//! use segburn_train::sam::{Sam2Trainer, Sam2TrainerSetup};
//! # fn main() -> Result<(), segburn_train::sam::Sam2TrainError> {
//! let setup = Sam2TrainerSetup::default(); // normally composed from a RON experiment
//! let mut trainer = Sam2Trainer::<Autodiff<Flex>>::new(setup, Default::default())?;
//! let summary = trainer.run(&mut |_: &segburn_train::sam::Sam2Event| {})?;
//! println!("{:?}", summary.final_report);
//! # Ok(()) }
//! ```

pub mod batch;
pub mod center_click;
pub mod config;
pub mod embeddings;
pub mod encoder_config;
pub mod encoder_lr;
pub mod error;
pub mod eval;
pub mod events;
pub mod interactive;
pub mod prompts;
pub mod run_log;
pub mod trainer;
pub mod user_prompts;
pub mod write_embeddings;

pub use config::{Sam2ModelConfig, Sam2TrainConfig};
pub use encoder_config::{HieraTrunk, ImageEncoderChoice};
pub use error::Sam2TrainError;
pub use eval::{evaluate, Sam2EvalReport};
pub use events::{Sam2Event, Sam2LossValues, Sam2Observer, Sam2StepReport};
pub use prompts::PromptConfig;
pub use trainer::{Sam2RunSummary, Sam2Trainer, POSITION_BUFFER_KEY};

use segburn_data::objects::ObjectDataConfig;

use crate::loss::sam::SamLossConfig;

/// Everything a SAM2 run needs; the cli's experiment file composes it.
#[derive(Debug, Clone, Default)]
pub struct Sam2TrainerSetup {
    pub model: Sam2ModelConfig,
    pub data: ObjectDataConfig,
    pub loss: SamLossConfig,
    pub prompts: PromptConfig,
    pub train: Sam2TrainConfig,
    /// The fully resolved experiment as text, stored in every checkpoint.
    pub experiment_text: String,
}

impl Sam2TrainerSetup {
    /// Checks every section; the error names the field.
    pub fn check(&self) -> Result<(), Sam2TrainError> {
        self.model.check().map_err(Sam2TrainError::Config)?;
        self.train.check().map_err(Sam2TrainError::Config)?;
        encoder_lr::EncoderLrScales::new(&self.train, &self.model.image_encoder)
            .map_err(Sam2TrainError::Config)?;
        self.prompts.check().map_err(Sam2TrainError::Config)?;
        self.data.check()?;
        if self.model.image_encoder.is_none() && self.data.embeddings.is_none() {
            return Err(Sam2TrainError::Config(
                "model.image_encoder is None and data.embeddings is not set: the decoder needs \
                 image features from one of them"
                    .to_string(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod hiera_tests;
#[cfg(test)]
mod tests;
