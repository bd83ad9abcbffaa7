//! How every binary reports a failure: one paragraph, `error: ` then the chain of causes, each
//! cause once.
//!
//! Many error types put their cause in their own message *and* return it as their `source()`
//! (ours, such as `CheckpointError::Io`, whose message is complete wherever it is formatted
//! alone, and others', such as `image`'s encoding errors). Printing the chain naively would show
//! that cause twice (`run: Is a directory (os error 21): Is a directory (os error 21)`), so a
//! cause whose message the paragraph already contains is left out.

use std::error::Error;

/// The chain of `error` as one line: the messages joined by `: `, each cause once.
pub fn render(error: &(dyn Error + 'static)) -> String {
    let mut paragraph = error.to_string();
    let mut cause = error.source();
    while let Some(current) = cause {
        let message = current.to_string();
        if !paragraph.contains(&message) {
            paragraph.push_str(": ");
            paragraph.push_str(&message);
        }
        cause = current.source();
    }
    paragraph
}

/// Prints `error: <chain>` to stderr and ends the process with `code`.
pub fn exit_with(error: &anyhow::Error, code: i32) -> ! {
    eprintln!("error: {}", render(error.as_ref()));
    std::process::exit(code)
}

/// The value of a command that succeeded; for one that failed, the error printed and exit
/// code 1. Every binary's `main` ends here.
pub fn finish<T, E: Into<anyhow::Error>>(result: Result<T, E>) -> T {
    result.unwrap_or_else(|error| exit_with(&error.into(), 1))
}

#[cfg(test)]
mod tests {
    use std::io::{Error as IoError, ErrorKind};
    use std::path::PathBuf;

    use anyhow::Context;
    use segburn_data::DataError;
    use segburn_models::tensor_file::TensorFileError;
    use segburn_train::checkpoint::CheckpointError;
    use segburn_train::engine::TrainError;
    use segburn_train::metric::MetricError;

    use super::*;
    use crate::output::pictures::PictureError;
    use crate::output::plot::PlotError;

    const IS_A_DIRECTORY: &str = "Is a directory (os error 21)";
    const DISK_FULL: &str = "No space left on device (os error 28)";

    fn is_a_directory() -> IoError {
        IoError::from_raw_os_error(21)
    }

    fn disk_full() -> IoError {
        IoError::from_raw_os_error(28)
    }

    fn run_dir() -> PathBuf {
        PathBuf::from("runs/données d'essai")
    }

    /// `render(error)` names `cause` exactly once and keeps every other message of the chain.
    fn assert_once(error: anyhow::Error, cause: &str, also: &[&str]) {
        let paragraph = render(error.as_ref());
        assert_eq!(paragraph.matches(cause).count(), 1, "{paragraph}");
        for part in also {
            assert!(paragraph.contains(part), "`{part}` missing: {paragraph}");
        }
    }

    #[test]
    fn the_os_messages_are_what_the_tests_look_for() {
        assert!(is_a_directory().to_string().contains(IS_A_DIRECTORY));
        assert!(disk_full().to_string().contains(DISK_FULL));
    }

    #[test]
    fn typed_io_errors_print_their_cause_once() {
        let checkpoint = CheckpointError::Io {
            path: run_dir(),
            source: is_a_directory(),
        };
        assert_once(checkpoint.into(), IS_A_DIRECTORY, &["données d'essai"]);

        let full = CheckpointError::Io {
            path: run_dir().join("checkpoints/.step_00000004.safetensors.partial"),
            source: disk_full(),
        };
        assert_once(
            anyhow::Error::from(TrainError::from(full)).context("saving the checkpoint"),
            DISK_FULL,
            &["saving the checkpoint", "step_00000004"],
        );

        let log = TrainError::Log {
            path: run_dir(),
            source: disk_full(),
        };
        assert_once(log.into(), DISK_FULL, &["run log"]);
        let log = TrainError::Log {
            path: run_dir(),
            source: is_a_directory(),
        };
        assert_once(log.into(), IS_A_DIRECTORY, &["run log"]);

        let metrics = MetricError::Io {
            path: run_dir().join("eval/metrics.json"),
            source: disk_full(),
        };
        assert_once(metrics.into(), DISK_FULL, &["metrics.json"]);

        let tensors = TensorFileError::Io {
            path: run_dir().join("emb.safetensors"),
            source: IoError::from(ErrorKind::NotFound),
        };
        let not_found = IoError::from(ErrorKind::NotFound).to_string();
        assert_once(tensors.into(), &not_found, &["emb.safetensors"]);

        let data = DataError::Io {
            path: run_dir().join("image.png"),
            source: is_a_directory(),
        };
        assert_once(data.into(), IS_A_DIRECTORY, &["image.png"]);

        let plot = PlotError::Read {
            path: run_dir().join("metrics.jsonl"),
            source: is_a_directory(),
        };
        assert_once(plot.into(), IS_A_DIRECTORY, &["metrics.jsonl"]);

        let folder = PictureError::Folder {
            path: run_dir().join("colour"),
            source: disk_full(),
        };
        assert_once(folder.into(), DISK_FULL, &["colour"]);
    }

    #[test]
    fn foreign_and_contextual_errors_print_their_cause_once() {
        // `image` shows the underlying error in its message and returns it as the source.
        let encoding = image::ImageError::Encoding(image::error::EncodingError::new(
            image::error::ImageFormatHint::Exact(image::ImageFormat::Png),
            disk_full(),
        ));
        assert_once(
            anyhow::Error::from(encoding).context("cannot write out/mask.png"),
            DISK_FULL,
            &["cannot write out/mask.png"],
        );
        let written: anyhow::Result<()> = Err(is_a_directory()).context("cannot write run");
        assert_once(written.unwrap_err(), IS_A_DIRECTORY, &["cannot write run"]);
        // Distinct causes are all kept, in order.
        let chain = anyhow::Error::from(disk_full())
            .context("cannot save step 4")
            .context("training stopped");
        assert_eq!(
            render(chain.as_ref()),
            format!("training stopped: cannot save step 4: {DISK_FULL}")
        );
    }
}
