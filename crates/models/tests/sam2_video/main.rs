//! SAM 2.1's video half against the official code (`tests/fixtures/sam2_video/`): the memory
//! modules ([`modules`]) and the video predictor call for call ([`predictor`]). One test binary
//! for both (each binary links the whole library).

#[path = "../sam2_hiera_support/mod.rs"]
mod sam2_hiera_support;
#[path = "../sam2_video_support/mod.rs"]
mod sam2_video_support;

mod modules;
mod predictor;
