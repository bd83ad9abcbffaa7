//! A seeded run's initial weights: Burn's random stream is one per process, and parameters are
//! drawn lazily, so a seed gives the same weights only if nothing else draws in between and
//! every parameter is drawn at once, in module order.

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
