//! Training curves (`curves.png`) from a run's `metrics.jsonl`, drawn with plotters' bitmap
//! backend. Text uses a font compiled into the binary (Hack, via `epaint_default_fonts`), so
//! nothing depends on the fonts installed on the machine.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;
use serde::Deserialize;

/// The file name `write_curves` writes into the run directory.
pub const CURVES_FILE: &str = "curves.png";

const WIDTH: u32 = 1000;
const PANEL_HEIGHT: u32 = 300;

/// A plot could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}, line {line}: not a metrics row: {message}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{} has no metrics rows yet (train writes one every log_every_steps steps)", path.display())]
    Empty { path: PathBuf },
    #[error("drawing {} failed: {message}", path.display())]
    Draw { path: PathBuf, message: String },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: image::ImageError,
    },
}

/// One row of `metrics.jsonl` (the fields the curves use).
#[derive(Debug, Clone, Deserialize)]
struct Row {
    kind: String,
    step: u64,
    #[serde(default)]
    lr: f64,
    loss: Option<f64>,
    loss_aux: Option<f64>,
    loss_main: Option<f64>,
    loss_boundary: Option<f64>,
    loss_bas: Option<f64>,
    mean_iou: Option<f64>,
}

/// Makes plotters' text renderer use the bundled font (once per process).
pub fn register_fonts() {
    static FONTS: Once = Once::new();
    FONTS.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            // The bytes are a valid TrueType font compiled in; failure would be a build defect.
            let _ = plotters::style::register_font(
                "sans-serif",
                style,
                epaint_default_fonts::HACK_REGULAR,
            );
        }
    });
}

fn read_rows(path: &Path) -> Result<Vec<Row>, PlotError> {
    let text = std::fs::read_to_string(path).map_err(|source| PlotError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        // A line cut short by a crash mid-write is the only expected damage: skip the last one.
        match serde_json::from_str::<Row>(line) {
            Ok(row) => rows.push(row),
            Err(_) if i + 1 == text.lines().count() => {}
            Err(e) => {
                return Err(PlotError::Parse {
                    path: path.to_path_buf(),
                    line: i + 1,
                    message: e.to_string(),
                })
            }
        }
    }
    if rows.is_empty() {
        return Err(PlotError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(rows)
}

type Series = (&'static str, RGBColor, Vec<(f64, f64)>);

fn series(rows: &[Row], kind: &str, value: impl Fn(&Row) -> Option<f64>) -> Vec<(f64, f64)> {
    rows.iter()
        .filter(|r| r.kind == kind)
        .filter_map(|r| {
            value(r)
                .filter(|v| v.is_finite())
                .map(|v| (r.step as f64, v))
        })
        .collect()
}

/// Draws `curves.png` (loss terms, learning rate, validation mIoU over steps) from
/// `run_dir/metrics.jsonl` and returns its path.
pub fn write_curves(run_dir: &Path) -> Result<PathBuf, PlotError> {
    let metrics = run_dir.join("metrics.jsonl");
    let rows = read_rows(&metrics)?;
    let out = run_dir.join(CURVES_FILE);
    let losses: Vec<Series> = vec![
        ("total", BLACK, series(&rows, "train", |r| r.loss)),
        (
            "main",
            RGBColor(31, 119, 180),
            series(&rows, "train", |r| r.loss_main),
        ),
        (
            "aux",
            RGBColor(255, 127, 14),
            series(&rows, "train", |r| r.loss_aux),
        ),
        (
            "boundary",
            RGBColor(44, 160, 44),
            series(&rows, "train", |r| r.loss_boundary),
        ),
        (
            "bas",
            RGBColor(214, 39, 40),
            series(&rows, "train", |r| r.loss_bas),
        ),
    ];
    let lr: Vec<Series> = vec![(
        "lr",
        RGBColor(148, 103, 189),
        series(&rows, "train", |r| Some(r.lr)),
    )];
    let miou: Vec<Series> = vec![(
        "val mIoU",
        RGBColor(23, 190, 207),
        series(&rows, "val", |r| r.mean_iou),
    )];
    let max_step = rows.iter().map(|r| r.step).max().unwrap_or(1).max(1) as f64;
    let height = 3 * PANEL_HEIGHT;
    let mut pixels = vec![0u8; (WIDTH * height * 3) as usize];
    register_fonts();
    let draw_error = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: out.clone(),
        message: e.to_string(),
    };
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw_error(&e))?;
        let panels = root.split_evenly((3, 1));
        // mIoU on its full 0..1 scale, so that runs compare at a glance.
        let specs = [
            ("training loss", losses, None),
            ("learning rate", lr, None),
            ("validation mIoU (classes present)", miou, Some((0.0, 1.0))),
        ];
        for (area, (title, lines, range)) in panels.iter().zip(specs) {
            draw_panel(area, title, &lines, max_step, range).map_err(|e| draw_error(&e))?;
        }
        root.present().map_err(|e| draw_error(&e))?;
    }
    let picture =
        image::RgbImage::from_raw(WIDTH, height, pixels).ok_or_else(|| PlotError::Draw {
            path: out.clone(),
            message: "the pixel buffer has the wrong size".into(),
        })?;
    picture.save(&out).map_err(|source| PlotError::Write {
        path: out.clone(),
        source,
    })?;
    Ok(out)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    lines: &[Series],
    max_step: f64,
    fixed_range: Option<(f64, f64)>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let values = lines
        .iter()
        .flat_map(|(_, _, points)| points.iter().map(|p| p.1));
    let (low, high) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let (low, high) = if let Some(range) = fixed_range {
        range
    } else if low.is_finite() {
        let pad = ((high - low) * 0.05).max(high.abs() * 1e-3).max(1e-12);
        (low - pad, high + pad)
    } else {
        (0.0, 1.0)
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..max_step * 1.02, low..high)?;
    chart
        .configure_mesh()
        .x_desc("step")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| axis_number(*v))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    if lines.iter().all(|(_, _, points)| points.is_empty()) {
        let style = ("sans-serif", 16).into_font().color(&BLACK.mix(0.6));
        area.draw_text(
            "no data yet",
            &style,
            (WIDTH as i32 / 2 - 50, PANEL_HEIGHT as i32 / 2),
        )?;
        return Ok(());
    }
    for (name, colour, points) in lines.iter().filter(|(_, _, p)| !p.is_empty()) {
        let colour = *colour;
        let series = chart.draw_series(LineSeries::new(
            points.iter().copied(),
            colour.stroke_width(2),
        ))?;
        series.label(*name).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
        });
        if points.len() <= 50 {
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    Ok(())
}

/// Parsed `plot` arguments.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "plot",
    about = "Redraw a run's curves.png (loss terms, lr, val mIoU) from its metrics.jsonl"
)]
pub struct PlotArgs {
    /// The run directory (train.run_dir), holding metrics.jsonl.
    pub run_dir: PathBuf,
}

/// `plot RUN_DIR`.
pub fn run(args: &PlotArgs) -> Result<PathBuf, PlotError> {
    write_curves(&args.run_dir)
}

/// Tick labels: plain decimals in the usual range, scientific notation for tiny or huge values.
fn axis_number(v: f64) -> String {
    let magnitude = v.abs();
    if v == 0.0 || (0.01..10_000.0).contains(&magnitude) {
        let text = format!("{v:.4}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.2e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_are_drawn_from_the_metrics_file() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("données d'essai");
        std::fs::create_dir_all(&run).unwrap();
        let mut text = String::new();
        for step in 1..=20u64 {
            let loss = 3.0 / step as f64;
            text += &format!(
                r#"{{"kind":"train","step":{step},"epoch":0,"lr":{},"loss":{loss},"loss_aux":{},"loss_main":{},"loss_boundary":0.1,"loss_bas":0.2,"grad_norm":1.0,"loss_scale":1.0,"images_per_second":3.0,"mean_iou":null,"pixel_accuracy":null}}"#,
                0.01 * (1.0 - step as f64 / 20.0),
                loss * 0.4,
                loss * 0.6
            );
            text += "\n";
            if step % 10 == 0 {
                text += &format!(
                    r#"{{"kind":"val","step":{step},"epoch":1,"lr":0.0,"loss":null,"loss_aux":null,"loss_main":null,"loss_boundary":null,"loss_bas":null,"grad_norm":null,"loss_scale":null,"images_per_second":null,"mean_iou":0.{step},"pixel_accuracy":0.5}}"#
                );
                text += "\n";
            }
        }
        std::fs::write(run.join("metrics.jsonl"), &text).unwrap();
        let path = write_curves(&run).unwrap();
        let picture = image::open(&path).unwrap().into_rgb8();
        assert_eq!(picture.dimensions(), (WIDTH, 3 * PANEL_HEIGHT));
        // Not a blank page: lines and text drew dark pixels.
        let dark = picture
            .pixels()
            .filter(|p| p.0.iter().all(|&c| c < 100))
            .count();
        assert!(dark > 1000, "{dark} dark pixels");
    }

    #[test]
    fn missing_or_empty_metrics_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let error = write_curves(dir.path()).unwrap_err().to_string();
        assert!(error.contains("metrics.jsonl"), "{error}");
        std::fs::write(dir.path().join("metrics.jsonl"), "").unwrap();
        let error = write_curves(dir.path()).unwrap_err().to_string();
        assert!(error.contains("no metrics rows"), "{error}");
        std::fs::write(dir.path().join("metrics.jsonl"), "{\"kind\":1}\n{}\n").unwrap();
        let error = write_curves(dir.path()).unwrap_err().to_string();
        assert!(error.contains("line 1"), "{error}");
    }
}
