//! Times the PIDNet training loss and the confusion-matrix update on the CPU (Flex).
//!
//! `cargo run --release -p segburn-train --example loss_bench [-- ITERATIONS]`
//!
//! Loss: forward + backward of the full composite at the official Cityscapes batch,
//! `[12, 19, 128, 128]` heads upsampled to 1024×1024 labels. Needs ~10 GB of memory.
//! Metric: confusion-matrix update throughput in megapixels per second.

use std::time::{Duration, Instant};

use burn::backend::{flex::FlexDevice, Autodiff, Flex};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use segburn_train::loss::{ClassWeights, PidNetLoss, PidNetLossConfig, CITYSCAPES_CLASS_WEIGHTS};
use segburn_train::metric::ConfusionMatrix;

type AD = Autodiff<Flex>;

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e3
}

/// Deterministic pseudo-random bytes (xorshift), so runs are comparable.
fn bytes(len: usize, seed: u64, classes: u64, ignore_percent: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if state % 100 < ignore_percent {
                255
            } else {
                ((state >> 8) % classes) as u8
            }
        })
        .collect()
}

fn bench_loss(iterations: usize) {
    let device = FlexDevice;
    let (n, c, h8, w8, h, w) = (12, 19, 128, 128, 1024, 1024);
    let labels: Vec<i64> = bytes(n * h * w, 7, c as u64, 10)
        .into_iter()
        .map(i64::from)
        .collect();
    let edges: Vec<f32> = bytes(n * h * w, 11, 10, 0)
        .into_iter()
        .map(|v| if v == 0 { 1.0 } else { 0.0 })
        .collect();
    let loss = PidNetLoss::new(PidNetLossConfig {
        class_weights: ClassWeights::Explicit(CITYSCAPES_CLASS_WEIGHTS.to_vec()),
        ..Default::default()
    })
    .expect("valid config");

    let (mut forward, mut backward) = (Vec::new(), Vec::new());
    for i in 0..iterations {
        let head = |channels| {
            Tensor::<AD, 4>::random(
                [n, channels, h8, w8],
                Distribution::Normal(0.0, 2.0),
                &device,
            )
            .require_grad()
        };
        let (p_aux, main, boundary) = (head(c), head(c), head(1));
        let labels =
            Tensor::<AD, 3, Int>::from_data(TensorData::new(labels.clone(), [n, h, w]), &device);
        let bd_gt = Tensor::<AD, 3>::from_data(TensorData::new(edges.clone(), [n, h, w]), &device);

        let start = Instant::now();
        let out = loss
            .forward(p_aux.clone(), main.clone(), boundary, labels, bd_gt)
            .expect("loss");
        let values = out.values();
        let forward_time = start.elapsed();
        let start = Instant::now();
        let grads = out.total.backward();
        let grad = main.grad(&grads).expect("gradient");
        let _ = grad.into_data();
        let backward_time = start.elapsed();
        println!(
            "  iteration {i}: forward {:.0} ms, backward {:.0} ms (total loss {:.4})",
            forward_time.as_secs_f64() * 1e3,
            backward_time.as_secs_f64() * 1e3,
            values.total
        );
        forward.push(forward_time);
        backward.push(backward_time);
    }
    let total: Vec<Duration> = forward
        .iter()
        .zip(&backward)
        .map(|(f, b)| *f + *b)
        .collect();
    println!(
        "PIDNet loss [12,19,128,128] -> 1024x1024, Autodiff<Flex> f32: forward {:.0} ms, \
         backward {:.0} ms, forward+backward {:.0} ms (median of {iterations})",
        median(forward),
        median(backward),
        median(total)
    );
}

fn bench_metric(iterations: usize) {
    let pixels = 12 * 1024 * 1024;
    let labels = bytes(pixels, 3, 19, 10);
    let predictions = bytes(pixels, 5, 19, 0);
    let rate = |f: &mut dyn FnMut()| {
        let times: Vec<Duration> = (0..iterations.max(3))
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect();
        pixels as f64 / (median(times) * 1e-3) / 1e6
    };

    let mut matrix = ConfusionMatrix::new(19, 255);
    let u8_rate = rate(&mut || matrix.update(&predictions, &labels).expect("update"));
    let labels64: Vec<i64> = labels.iter().map(|&v| v.into()).collect();
    let predictions64: Vec<i64> = predictions.iter().map(|&v| v.into()).collect();
    let i64_rate = rate(&mut || matrix.update(&predictions64, &labels64).expect("update"));

    let device = FlexDevice;
    let shape = [12, 1024, 1024];
    let label_tensor =
        Tensor::<Flex, 3, Int>::from_data(TensorData::new(labels64.clone(), shape), &device);
    let prediction_tensor =
        Tensor::<Flex, 3, Int>::from_data(TensorData::new(predictions64.clone(), shape), &device);
    let tensor_rate = rate(&mut || {
        matrix
            .update_from_predictions(prediction_tensor.clone(), label_tensor.clone())
            .expect("update")
    });
    println!(
        "Confusion matrix update, 12x1024x1024 px, 19 classes: u8 slices {u8_rate:.0} Mpx/s, \
         i64 slices {i64_rate:.0} Mpx/s, Int tensors (download + update) {tensor_rate:.0} Mpx/s"
    );

    let logits = Tensor::<Flex, 4>::random([1, 19, 1024, 2048], Distribution::Default, &device);
    let eval_labels = &labels[..1024 * 2048];
    let start = Instant::now();
    matrix
        .update_from_logits_and_labels(logits, eval_labels)
        .expect("update");
    let ms = start.elapsed().as_secs_f64() * 1e3;
    println!(
        "  incl. argmax of [1,19,1024,2048] logits: {ms:.0} ms per Cityscapes image ({:.0} Mpx/s)",
        (1024.0 * 2048.0) / (ms * 1e-3) / 1e6
    );
}

fn main() {
    let iterations = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    bench_metric(iterations);
    bench_loss(iterations);
}
