//! segburn-models: PIDNet-S/M/L and a SAM2-style promptable mask decoder in Burn, with
//! parameter names that map one-to-one onto the official PyTorch `state_dict` keys.

pub mod fixtures;
pub mod nn;
pub mod pidnet;
pub mod sam2;
pub mod tensor_file;
pub mod weights;
