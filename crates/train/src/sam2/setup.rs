//! What a SAM2 run needs (the sections of its experiment), and the one check of them all.

use segburn_data::objects::ObjectDataConfig;

use super::config::{Sam2ModelConfig, Sam2TrainConfig};
use super::config_error::Sam2ConfigError;
use super::encoder_lr::EncoderLrScales;
use super::prompts::PromptConfig;
use crate::engine::TrainError;
use crate::loss::sam::SamLossConfig;

/// Everything a SAM2 run needs; the cli's experiment file composes it.
#[derive(Debug, Clone, Default)]
pub struct Sam2Setup {
    pub model: Sam2ModelConfig,
    pub data: ObjectDataConfig,
    pub loss: SamLossConfig,
    pub prompts: PromptConfig,
    pub train: Sam2TrainConfig,
    /// The fully resolved experiment as text, stored in every checkpoint.
    pub experiment_text: String,
}

impl Sam2Setup {
    /// Checks every section; the error names the field.
    pub fn check(&self) -> Result<(), TrainError> {
        self.model.check()?;
        self.train.check()?;
        EncoderLrScales::new(&self.model)?;
        self.prompts.check()?;
        self.data.check()?;
        if self.model.image_encoder.is_none() && self.data.embeddings.is_none() {
            return Err(Sam2ConfigError::NoImageFeatures.into());
        }
        Ok(())
    }
}
