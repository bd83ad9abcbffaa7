//! The report as text: one section per concern, in fix order, a hint under each line that has
//! one, and a closing summary that names the first thing to fix.

use std::fmt::Write;

use super::{Report, Section, Status};

fn label(status: Status) -> &'static str {
    match status {
        Status::Ok => "ok  ",
        Status::Info => "info",
        Status::Warn => "WARN",
        Status::Fail => "FAIL",
    }
}

fn title(section: Section) -> &'static str {
    match section {
        Section::System => "System",
        Section::Backends => "Backends",
        Section::Kernels => "Kernel sanity check (each device vs a plain-Rust CPU reference)",
        Section::Storage => "Checkpoint and dataset folders",
    }
}

/// The whole report.
pub fn render(report: &Report) -> String {
    let width = report
        .checks
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = format!(
        "segburn doctor {}: fix problems from the top down\n",
        env!("CARGO_PKG_VERSION")
    );
    let mut section = None;
    for check in &report.checks {
        if section != Some(check.section) {
            section = Some(check.section);
            let _ = write!(out, "\n{}\n", title(check.section));
        }
        let _ = writeln!(
            out,
            "  [{}] {:<width$}  {}",
            label(check.status),
            check.name,
            check.detail
        );
        if let (Some(hint), true) = (&check.hint, check.status != Status::Ok) {
            let _ = writeln!(out, "         {:<width$}  -> {hint}", "");
        }
    }
    let (fails, warns) = (report.count(Status::Fail), report.count(Status::Warn));
    out.push('\n');
    match report.checks.iter().find(|c| c.status == Status::Fail) {
        Some(first) => {
            let _ = writeln!(
                out,
                "{fails} problem(s) to fix, {warns} warning(s). Start with: {} ({})",
                first.name, first.detail
            );
        }
        None => {
            let _ = writeln!(out, "Everything needed works ({warns} warning(s)).");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{Check, Report, Section, Status};
    use super::render;

    #[test]
    fn sections_hints_and_the_first_failure_are_shown() {
        let report = Report {
            checks: vec![
                Check::new(Section::System, "OS", Status::Ok, "linux"),
                Check::new(Section::Backends, "CUDA", Status::Info, "unavailable")
                    .hint("--set device=Cpu"),
                Check::new(
                    Section::Storage,
                    "checkpoint folder",
                    Status::Fail,
                    "not writable",
                )
                .hint("fix it"),
            ],
        };
        let text = render(&report);
        assert!(text.contains("System\n  [ok  ] OS"));
        assert!(text.contains("[info] CUDA               unavailable"));
        assert!(text.contains("-> --set device=Cpu"));
        assert!(text.contains("1 problem(s) to fix, 0 warning(s). Start with: checkpoint folder"));
    }
}
