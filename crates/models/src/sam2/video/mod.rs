//! SAM 2.1's video memory: the modules that carry an object from frame to frame (memory
//! encoder, memory attention with rotary position encoding) and their configuration. The
//! parameters live on [`crate::sam2::Sam2`] under the official `SAM2Base` names
//! (`memory_attention.*`, `memory_encoder.*`, `maskmem_tpos_enc`, `obj_ptr_proj.*`, …), so an
//! official checkpoint loads whole.

mod config;
pub mod heads;
pub mod memory_attention;
pub mod memory_bank;
pub mod memory_encoder;
pub mod rope;

pub use config::VideoMemoryConfig;
pub use heads::{FramePrediction, NO_OBJECT_SCORE};
pub use memory_attention::{MemoryAttention, MemoryAttentionConfig, MemoryBank};
pub use memory_bank::{FramePointer, SlottedMemory};
pub use memory_encoder::{MaskDownSamplerConfig, Memory, MemoryEncoder, MemoryEncoderConfig};
pub use rope::AxialRope;
