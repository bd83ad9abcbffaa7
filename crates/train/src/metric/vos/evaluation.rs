//! Semi-supervised DAVIS 2017 evaluation of sequences and a split, as the official
//! `DAVISEvaluation.evaluate` and `evaluation_method.py` compute it.

use super::mask::{check_same, LabelMap};
use super::measures::{boundary_f_measure, region_similarity, DEFAULT_BOUND_TH};
use super::statistics::{numpy_mean, statistics, VosStatistics};
use super::VosError;

/// The per-frame measures and statistics of one object of one sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectResult {
    /// The sequence.
    pub sequence: String,
    /// The object id (1-based, its label in the annotations).
    pub object: u8,
    /// J of each evaluated frame (all but the first and the last).
    pub j: Vec<f64>,
    /// F of each evaluated frame.
    pub f: Vec<f64>,
    /// Statistics of `j`.
    pub j_stats: VosStatistics,
    /// Statistics of `f`.
    pub f_stats: VosStatistics,
}

impl ObjectResult {
    /// The official per-object name, `<sequence>_<object>`.
    pub fn name(&self) -> String {
        format!("{}_{}", self.sequence, self.object)
    }
}

/// The split's numbers (the official global table): each statistic averaged over all objects.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DavisSummary {
    /// J&F-Mean: the mean of J-Mean and F-Mean.
    pub jf_mean: f64,
    /// J-Mean, J-Recall, J-Decay.
    pub j: VosStatistics,
    /// F-Mean, F-Recall, F-Decay.
    pub f: VosStatistics,
    /// Objects averaged over.
    pub objects: usize,
}

/// J and F of every object of one sequence, semi-supervised.
///
/// `annotations` and `predictions` are the label maps of every frame (0 background, `1..=K`
/// objects; 255 void in the annotations). As the official evaluation: the objects are those of
/// the first annotated frame (`K` = its largest label, void aside); the first and the last
/// frames are not evaluated (their predictions are not read); void pixels count as background
/// and are not left out (the official semi-supervised path passes no void mask); an object the
/// prediction never labels is an empty mask; a predicted label above `K` (255 included) is an
/// error, as the official reader stops there.
pub fn evaluate_sequence(
    sequence: &str,
    annotations: &[LabelMap],
    predictions: &[LabelMap],
    bound_th: f64,
) -> Result<Vec<ObjectResult>, VosError> {
    let frames = annotations.len();
    if predictions.len() != frames {
        return Err(VosError::FrameCount {
            sequence: sequence.into(),
            predicted: predictions.len(),
            annotated: frames,
        });
    }
    let Some(first) = annotations.first().filter(|_| frames >= 3) else {
        return Err(VosError::TooFewFrames {
            sequence: sequence.into(),
            frames,
        });
    };
    let size = first.size();
    for (t, frame) in annotations.iter().enumerate() {
        check_same(
            size,
            frame.size(),
            &format!("{sequence}: annotation of frame {t}"),
        )?;
    }
    let evaluated = 1..frames - 1;
    for t in evaluated.clone() {
        check_same(
            size,
            predictions[t].size(),
            &format!("{sequence}: prediction of frame {t}"),
        )?;
    }
    let objects = first.max_object();
    let predicted = evaluated
        .clone()
        .map(|t| predictions[t].max_label())
        .max()
        .unwrap_or(0);
    if predicted > objects {
        return Err(VosError::UnknownObject {
            sequence: sequence.into(),
            predicted,
            objects,
        });
    }
    let mut results = Vec::with_capacity(usize::from(objects));
    for object in 1..=objects {
        let (mut j, mut f) = (Vec::new(), Vec::new());
        for t in evaluated.clone() {
            let gt = annotations[t].object(object);
            let pred = predictions[t].object(object);
            j.push(region_similarity(&pred, &gt, None)?);
            f.push(boundary_f_measure(&pred, &gt, None, bound_th)?);
        }
        results.push(ObjectResult {
            sequence: sequence.into(),
            object,
            j_stats: statistics(&j)?,
            f_stats: statistics(&f)?,
            j,
            f,
        });
    }
    Ok(results)
}

/// Accumulates sequences of a split and reports the official J&F.
#[derive(Debug, Clone)]
pub struct DavisEvaluation {
    bound_th: f64,
    objects: Vec<ObjectResult>,
}

impl Default for DavisEvaluation {
    fn default() -> Self {
        Self::new()
    }
}

impl DavisEvaluation {
    /// An empty evaluation with the official boundary tolerance (0.008 of the diagonal).
    pub fn new() -> Self {
        Self {
            bound_th: DEFAULT_BOUND_TH,
            objects: Vec::new(),
        }
    }

    /// Another boundary tolerance (see [`boundary_f_measure`]).
    pub fn with_bound_th(mut self, bound_th: f64) -> Self {
        self.bound_th = bound_th;
        self
    }

    /// Evaluates one sequence (see [`evaluate_sequence`]) and keeps its objects; returns them.
    /// On error nothing is kept.
    pub fn add_sequence(
        &mut self,
        sequence: &str,
        annotations: &[LabelMap],
        predictions: &[LabelMap],
    ) -> Result<&[ObjectResult], VosError> {
        let results = evaluate_sequence(sequence, annotations, predictions, self.bound_th)?;
        let start = self.objects.len();
        self.objects.extend(results);
        Ok(&self.objects[start..])
    }

    /// Every object so far, in the order the sequences were added.
    pub fn objects(&self) -> &[ObjectResult] {
        &self.objects
    }

    /// The split's J&F-Mean and J / F mean, recall and decay (each averaged over the objects,
    /// numpy's summation order); an error when no object was evaluated.
    pub fn summary(&self) -> Result<DavisSummary, VosError> {
        if self.objects.is_empty() {
            return Err(VosError::Empty {
                what: "DAVIS evaluation (no object)".into(),
            });
        }
        let average = |pick: &dyn Fn(&ObjectResult) -> f64| {
            numpy_mean(&self.objects.iter().map(pick).collect::<Vec<_>>())
        };
        let j = VosStatistics {
            mean: average(&|o| o.j_stats.mean),
            recall: average(&|o| o.j_stats.recall),
            decay: average(&|o| o.j_stats.decay),
        };
        let f = VosStatistics {
            mean: average(&|o| o.f_stats.mean),
            recall: average(&|o| o.f_stats.recall),
            decay: average(&|o| o.f_stats.decay),
        };
        Ok(DavisSummary {
            jf_mean: (j.mean + f.mean) / 2.0,
            j,
            f,
            objects: self.objects.len(),
        })
    }
}
