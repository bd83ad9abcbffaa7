//! A seeded run's initial weights: Burn's random stream is one per process, and parameters are
//! drawn lazily, so a seed gives the same weights only if nothing else draws in between and
//! every parameter is drawn at once, in module order. They are drawn on the host (Flex) and
//! moved to the training device, so a seed gives the same weights on a CPU, a CUDA GPU or a wgpu
//! adapter: each backend has a random generator of its own (`B::seed` seeds cubecl's on a GPU,
//! which draws other numbers than Flex's from the same seed).

use std::any::TypeId;
use std::path::Path;

use burn::backend::{flex::FlexDevice, Autodiff, Flex};
use burn::tensor::backend::{AutodiffBackend, Backend};
use segburn_models::tensor_file::NamedTensors;

use super::{Model, Task, TrainError};

/// The backend every run's initial weights are drawn on.
pub(crate) type Host = Autodiff<Flex>;

/// Holds Burn's process-wide random stream for a seeded initialisation (see
/// [`super::Engine::start`]); code that draws from it while others may be seeding takes it too.
pub(crate) fn random_stream() -> std::sync::MutexGuard<'static, ()> {
    static STREAM: std::sync::Mutex<()> = std::sync::Mutex::new(());
    STREAM.lock().unwrap_or_else(|e| e.into_inner())
}

/// Burn initialises parameters lazily, on first use, so their values would depend on the order
/// of first use (forward order vs. export order). Drawing them all now, in module order, makes
/// a seeded run's initial weights the same whatever happens next.
pub(crate) fn initialize_now<B: burn::tensor::backend::Backend, M: burn::module::Module<B>>(
    module: &M,
) {
    struct Touch;
    impl<B: burn::tensor::backend::Backend> burn::module::ModuleVisitor<B> for Touch {
        fn visit_float<const D: usize>(
            &mut self,
            param: &burn::module::Param<burn::tensor::Tensor<B, D>>,
        ) {
            let _ = param.val();
        }
    }
    module.visit(&mut Touch);
}

/// `task`'s freshly initialised model on `device`, its weights drawn from `seed` on the host.
/// On the host itself the model is drawn in place; elsewhere it is drawn on the host, exported
/// (the same tensors a checkpoint holds) and loaded on `device`.
pub(crate) fn seeded_initial_model<B, T>(
    task: &T,
    device: &B::Device,
    seed: u64,
) -> Result<Model<B, T>, TrainError>
where
    B: AutodiffBackend,
    T: Task<B> + Task<Host>,
{
    let _turn = random_stream();
    if TypeId::of::<B>() == TypeId::of::<Host>() {
        B::seed(device, seed);
        let model = <T as Task<B>>::init_model(task, device);
        initialize_now(&model);
        return Ok(model);
    }
    let tensors = host_initial_weights(task, seed);
    on_device::<B, T>(task, &tensors, device)
}

/// `task`'s model on `device` holding `tensors` (the host's initial weights).
pub(crate) fn on_device<B: AutodiffBackend, T: Task<B>>(
    task: &T,
    tensors: &NamedTensors,
    device: &B::Device,
) -> Result<Model<B, T>, TrainError> {
    let model = task.init_model(device);
    task.load_exact(model, tensors, Path::new("the seeded initial weights"))
}

/// The tensors of `task`'s model initialised on the host from `seed` (the caller holds the
/// random stream).
pub(crate) fn host_initial_weights<T: Task<Host>>(task: &T, seed: u64) -> NamedTensors {
    <Host as Backend>::seed(&FlexDevice, seed);
    let model = task.init_model(&FlexDevice);
    initialize_now(&model);
    task.export_model(&model)
}
