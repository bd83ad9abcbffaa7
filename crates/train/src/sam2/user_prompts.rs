//! Prompts a user gives for one image, in that image's pixels: clicks `x,y,label;…` and a box
//! `x0,y0,x1,y1`. They are parsed, checked against the image, and mapped onto the model's
//! square input.
//!
//! The rule (README, "predict-sam2"): coordinates are pixels counted from the image's top-left
//! corner, `0 ≤ x ≤ width`, `0 ≤ y ≤ height`. A click outside the image (negative coordinates
//! included) is an error; so is an inverted box (`x0 > x1` or `y0 > y1`), an empty one (zero
//! width or height) and a box that does not overlap the image. A box that overlaps the image
//! but overhangs its border (a detector's box a little past the edge) is clipped to the image,
//! with a warning that gives both boxes.

use super::prompts::{box_clicks, Click, NEGATIVE, POSITIVE};

/// Prompts in image pixels.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ImagePrompts {
    /// Clicks, label [`POSITIVE`] or [`NEGATIVE`].
    pub clicks: Vec<Click>,
    /// `[x0, y0, x1, y1]`.
    pub bbox: Option<[f32; 4]>,
}

/// A prompt that cannot be used. Each message quotes the value (and the image size where it
/// matters).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PromptError {
    #[error("`{entry}` is not a click x,y,label (label 1 positive, 0 negative); e.g. \"120,80,1;300,40,0\"")]
    MalformedClick { entry: String },
    #[error("no click in `{text}`; e.g. \"120,80,1\"")]
    NoClicks { text: String },
    #[error("`{text}` is not a box x0,y0,x1,y1 (four numbers, top-left then bottom-right corner)")]
    MalformedBox { text: String },
    #[error(
        "click {x},{y} lies outside the {width}×{height} image (coordinates are pixels from its \
         top-left corner: 0 ≤ x ≤ {width}, 0 ≤ y ≤ {height})"
    )]
    ClickOutside {
        x: f32,
        y: f32,
        width: usize,
        height: usize,
    },
    #[error(
        "box {} is inverted: x0,y0 is the top-left corner and x1,y1 the bottom-right one, so \
         x0 ≤ x1 and y0 ≤ y1 (did you mean {}?)",
        show(*bbox),
        show(ordered(*bbox))
    )]
    InvertedBox { bbox: [f32; 4] },
    #[error("box {} is empty (zero width or height)", show(*bbox))]
    EmptyBox { bbox: [f32; 4] },
    #[error(
        "box {} lies outside the {width}×{height} image (coordinates are pixels from its \
         top-left corner: 0 ≤ x ≤ {width}, 0 ≤ y ≤ {height})",
        show(*bbox)
    )]
    BoxOutside {
        bbox: [f32; 4],
        width: usize,
        height: usize,
    },
}

fn show(bbox: [f32; 4]) -> String {
    bbox.map(|v| v.to_string()).join(",")
}

fn ordered([x0, y0, x1, y1]: [f32; 4]) -> [f32; 4] {
    [x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)]
}

/// `x,y,label;…` → clicks. Entries are separated by `;`, an empty entry is skipped.
pub fn parse_clicks(text: &str) -> Result<Vec<Click>, PromptError> {
    let mut clicks = Vec::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let fields: Vec<&str> = entry.split(',').map(str::trim).collect();
        let click = match fields.as_slice() {
            [x, y, label] => finite(x).zip(finite(y)).zip(match *label {
                "1" => Some(POSITIVE),
                "0" => Some(NEGATIVE),
                _ => None,
            }),
            _ => None,
        };
        let Some(((x, y), label)) = click else {
            return Err(PromptError::MalformedClick {
                entry: entry.to_string(),
            });
        };
        clicks.push(Click { x, y, label });
    }
    if clicks.is_empty() {
        return Err(PromptError::NoClicks {
            text: text.to_string(),
        });
    }
    Ok(clicks)
}

/// `x0,y0,x1,y1` → a box, refused when inverted or empty.
pub fn parse_box(text: &str) -> Result<[f32; 4], PromptError> {
    let values: Option<Vec<f32>> = text.split(',').map(|v| finite(v.trim())).collect();
    let Some(&[x0, y0, x1, y1]) = values.as_deref() else {
        return Err(PromptError::MalformedBox {
            text: text.to_string(),
        });
    };
    let bbox = [x0, y0, x1, y1];
    if x0 > x1 || y0 > y1 {
        return Err(PromptError::InvertedBox { bbox });
    }
    if x0 == x1 || y0 == y1 {
        return Err(PromptError::EmptyBox { bbox });
    }
    Ok(bbox)
}

fn finite(text: &str) -> Option<f32> {
    text.parse::<f32>().ok().filter(|v| v.is_finite())
}

impl ImagePrompts {
    /// These prompts checked against a `width × height` image; a box overhanging the border is
    /// clipped to it. Returns the prompts to use and the warnings to show.
    pub fn fit_to_image(
        &self,
        width: usize,
        height: usize,
    ) -> Result<(ImagePrompts, Vec<String>), PromptError> {
        let (w, h) = (width as f32, height as f32);
        for click in &self.clicks {
            if !(0.0..=w).contains(&click.x) || !(0.0..=h).contains(&click.y) {
                return Err(PromptError::ClickOutside {
                    x: click.x,
                    y: click.y,
                    width,
                    height,
                });
            }
        }
        let mut warnings = Vec::new();
        let bbox = match self.bbox {
            None => None,
            Some(given) => {
                let [x0, y0, x1, y1] = given;
                let clipped = [x0.max(0.0), y0.max(0.0), x1.min(w), y1.min(h)];
                if clipped[0] >= clipped[2] || clipped[1] >= clipped[3] {
                    return Err(PromptError::BoxOutside {
                        bbox: given,
                        width,
                        height,
                    });
                }
                if clipped != given {
                    warnings.push(format!(
                        "box {} overhangs the {width}×{height} image; clipped to {}",
                        show(given),
                        show(clipped)
                    ));
                }
                Some(clipped)
            }
        };
        let prompts = ImagePrompts {
            clicks: self.clicks.clone(),
            bbox,
        };
        Ok((prompts, warnings))
    }

    /// The prompt-encoder points on the `size × size` model input the image is resized to: the
    /// box's two corners first (as SAM2 passes a box), then the clicks.
    pub fn model_points(&self, width: usize, height: usize, size: usize) -> Vec<Click> {
        let (sx, sy) = (size as f32 / width as f32, size as f32 / height as f32);
        self.bbox
            .map(box_clicks)
            .into_iter()
            .flatten()
            .chain(self.clicks.iter().copied())
            .map(|c| Click {
                x: c.x * sx,
                y: c.y * sy,
                label: c.label,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::prompts::{BOX_BOTTOM_RIGHT, BOX_TOP_LEFT};
    use super::*;

    #[test]
    fn malformed_text_is_quoted() {
        for text in ["1,2", "1,2,3", "a,2,1", "1,2,1;4,nan,0", "1;2;1"] {
            let message = parse_clicks(text).unwrap_err().to_string();
            assert!(
                message.contains("is not a click x,y,label"),
                "{text}: {message}"
            );
        }
        let message = parse_clicks("1,2,1; 4 ,5,2").unwrap_err().to_string();
        assert!(message.contains("`4 ,5,2`"), "{message}");
        assert!(parse_clicks(" ; ")
            .unwrap_err()
            .to_string()
            .contains("no click"));
        for text in ["1,2,3", "1,2,3,4,5", "1,2,x,4", "", "1,2,3,inf"] {
            let message = parse_box(text).unwrap_err().to_string();
            assert!(
                message.contains(&format!("`{text}`")) && message.contains("not a box"),
                "{message}"
            );
        }
        assert_eq!(
            parse_clicks("10, 20, 1;30,40,0").unwrap(),
            [
                Click {
                    x: 10.0,
                    y: 20.0,
                    label: POSITIVE
                },
                Click {
                    x: 30.0,
                    y: 40.0,
                    label: NEGATIVE
                }
            ]
        );
    }

    #[test]
    fn inverted_and_empty_boxes_are_refused() {
        let message = parse_box("300,50,100,200").unwrap_err().to_string();
        assert!(
            message.contains("box 300,50,100,200 is inverted")
                && message.contains("100,50,300,200"),
            "{message}"
        );
        let message = parse_box("100,50,100,200").unwrap_err().to_string();
        assert!(message.contains("is empty"), "{message}");
        assert_eq!(parse_box("1,2,3,4").unwrap(), [1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn clicks_outside_the_image_name_the_click_and_the_image_size() {
        for text in ["700,10,1", "10,481,0", "-1,10,1", "10,-0.5,1"] {
            let prompts = ImagePrompts {
                clicks: parse_clicks(text).unwrap(),
                bbox: None,
            };
            let message = prompts.fit_to_image(640, 480).unwrap_err().to_string();
            let (x, y) = text.rsplit_once(',').unwrap().0.split_once(',').unwrap();
            assert!(
                message.contains(&format!("click {x},{y} lies outside the 640×480 image")),
                "{message}"
            );
        }
        let inside = ImagePrompts {
            clicks: parse_clicks("0,0,1;640,480,0").unwrap(),
            bbox: None,
        };
        assert_eq!(inside.fit_to_image(640, 480).unwrap(), (inside, vec![]));
    }

    #[test]
    fn an_overhanging_box_is_clipped_with_a_warning_and_a_box_outside_refused() {
        let overhanging = ImagePrompts {
            clicks: vec![],
            bbox: Some(parse_box("100,180,5600,300").unwrap()),
        };
        let (fitted, warnings) = overhanging.fit_to_image(640, 480).unwrap();
        assert_eq!(fitted.bbox, Some([100.0, 180.0, 640.0, 300.0]));
        assert_eq!(
            warnings,
            ["box 100,180,5600,300 overhangs the 640×480 image; clipped to 100,180,640,300"]
        );
        let left = ImagePrompts {
            clicks: vec![],
            bbox: Some([-3.5, 10.0, 50.0, 60.0]),
        };
        let (fitted, warnings) = left.fit_to_image(640, 480).unwrap();
        assert_eq!(fitted.bbox, Some([0.0, 10.0, 50.0, 60.0]));
        assert_eq!(warnings.len(), 1);
        for outside in [
            [700.0, 10.0, 800.0, 20.0],
            [-50.0, 10.0, -5.0, 20.0],
            [10.0, 480.0, 20.0, 500.0],
        ] {
            let prompts = ImagePrompts {
                clicks: vec![],
                bbox: Some(outside),
            };
            let message = prompts.fit_to_image(640, 480).unwrap_err().to_string();
            assert!(
                message.contains(&format!(
                    "box {} lies outside the 640×480 image",
                    show(outside)
                )),
                "{message}"
            );
        }
    }

    #[test]
    fn model_points_scale_to_the_square_input_box_first() {
        let prompts = ImagePrompts {
            clicks: parse_clicks("320,240,1").unwrap(),
            bbox: Some([0.0, 0.0, 640.0, 480.0]),
        };
        let points = prompts.model_points(640, 480, 1024);
        let labels: Vec<i32> = points.iter().map(|c| c.label).collect();
        assert_eq!(labels, [BOX_TOP_LEFT, BOX_BOTTOM_RIGHT, POSITIVE]);
        assert_eq!((points[1].x, points[1].y), (1024.0, 1024.0));
        assert_eq!((points[2].x, points[2].y), (512.0, 512.0));
    }
}
