//! What the commands write for people: prediction pictures, confusion-matrix files, training
//! plots, and progress bars / log lines.

pub mod confusion_files;
pub mod pictures;
pub mod plot;
pub mod progress;
