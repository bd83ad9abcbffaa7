//! The confusion matrix as files: a CSV with class names, and a heat map (rows normalised, so
//! each cell is the share of a ground-truth class predicted as the column's class).

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use segburn_train::metric::ConfusionMatrix;

use crate::output::plot::{register_fonts, PlotError};

const CELL: u32 = 32;

/// CSV: header `gt\pred,<class>…`, then one row per ground-truth class with pixel counts.
pub fn confusion_csv(matrix: &ConfusionMatrix, classes: &[String]) -> String {
    let k = matrix.num_classes();
    let quote = |name: &str| {
        if name.contains([',', '"', '\n']) {
            format!("\"{}\"", name.replace('"', "\"\""))
        } else {
            name.to_string()
        }
    };
    let mut out = String::from("gt\\pred");
    for name in classes {
        out += &format!(",{}", quote(name));
    }
    out.push('\n');
    for (gt, name) in classes.iter().enumerate().take(k) {
        out += &quote(name);
        for pred in 0..k {
            out += &format!(",{}", matrix.get(gt, pred));
        }
        out.push('\n');
    }
    out
}

/// Writes the row-normalised heat map of `matrix` to `path` (class names on the axes).
pub fn write_heatmap(
    matrix: &ConfusionMatrix,
    classes: &[String],
    path: &Path,
) -> Result<PathBuf, PlotError> {
    let k = matrix.num_classes() as u32;
    let longest = classes.iter().map(|c| c.chars().count()).max().unwrap_or(1) as u32;
    let label_width = 20 + 9 * longest.min(24);
    let (width, height) = (label_width + CELL * k + 60, 60 + CELL * k + 50);
    let mut pixels = vec![0u8; (width * height * 3) as usize];
    register_fonts();
    let draw_error = |message: String| PlotError::Draw {
        path: path.to_path_buf(),
        message,
    };
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (width, height)).into_drawing_area();
        draw(&root, matrix, classes, label_width).map_err(|e| draw_error(e.to_string()))?;
        root.present().map_err(|e| draw_error(e.to_string()))?;
    }
    let picture = image::RgbImage::from_raw(width, height, pixels)
        .ok_or_else(|| draw_error("the pixel buffer has the wrong size".into()))?;
    picture.save(path).map_err(|source| PlotError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(path.to_path_buf())
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    matrix: &ConfusionMatrix,
    classes: &[String],
    label_width: u32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let k = matrix.num_classes() as i32;
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(root)
        .caption(
            "confusion (rows: ground truth, columns: prediction, share of row)",
            ("sans-serif", 15),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(label_width)
        // A segmented `0..n` range has n + 1 segments: `0..k - 1` gives one per class.
        .build_cartesian_2d((0..k - 1).into_segmented(), (0..k - 1).into_segmented())?;
    let name = |i: i32| {
        classes
            .get(i as usize)
            .map_or(String::new(), |n| n.chars().take(24).collect())
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(k as usize)
        .y_labels(k as usize)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => i.to_string(),
            _ => String::new(),
        })
        // The first ground-truth class on top.
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => format!("{} {}", k - 1 - i, name(k - 1 - i)),
            _ => String::new(),
        })
        .label_style(("sans-serif", 12))
        .draw()?;
    let colours = ViridisRGB;
    let mut cells = Vec::new();
    for gt in 0..k {
        let row_total = matrix.ground_truth_pixels(gt as usize);
        for pred in 0..k {
            let count = matrix.get(gt as usize, pred as usize);
            let share = if row_total == 0 {
                0.0
            } else {
                count as f32 / row_total as f32
            };
            let colour = if row_total == 0 {
                RGBColor(235, 235, 235)
            } else {
                colours.get_color(share)
            };
            let y = k - 1 - gt;
            cells.push(Rectangle::new(
                [
                    (SegmentValue::Exact(pred), SegmentValue::Exact(y)),
                    (SegmentValue::Exact(pred + 1), SegmentValue::Exact(y + 1)),
                ],
                colour.filled(),
            ));
        }
    }
    chart.draw_series(cells)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_and_heat_map_of_a_small_matrix() {
        let mut matrix = ConfusionMatrix::new(3, 255);
        matrix
            .update(&[0u8, 0, 1, 2, 1], &[0u8, 1, 1, 255, 1])
            .unwrap();
        let classes: Vec<String> = ["road", "side, walk", "sky"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let csv = confusion_csv(&matrix, &classes);
        assert_eq!(
            csv,
            "gt\\pred,road,\"side, walk\",sky\nroad,1,0,0\n\"side, walk\",1,2,0\nsky,0,0,0\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = write_heatmap(&matrix, &classes, &dir.path().join("confusion.png")).unwrap();
        let picture = image::open(path).unwrap().into_rgb8();
        assert!(picture.width() > 3 * CELL && picture.height() > 3 * CELL);
    }
}
