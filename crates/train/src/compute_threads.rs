//! The CPU thread budget.
//!
//! Flex computes on rayon's global pool: its matmuls (through `gemm`), convolutions, pooling,
//! interpolation and large reductions split their work across that pool's threads. Everything
//! else segburn starts waits on the pool rather than competing with it: data-parallel replica
//! threads (`CpuReplicas(n)`) submit their ops to the same pool, and the loader's worker threads
//! decode ahead only until the prefetch queue is full, then sleep. So the pool's size is the one
//! knob that decides how many cores a run computes on: `RAYON_NUM_THREADS` (rayon reads it when
//! the pool starts; unset, the pool takes one thread per available core).

use std::fmt;

/// How many threads compute, and how many cores there are to compute on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComputeThreads {
    /// Threads in the pool Flex computes on.
    pub pool: usize,
    /// Cores this process may run on (`available_parallelism`: honours cgroup limits).
    pub cores: usize,
    /// Whether `RAYON_NUM_THREADS` chose the pool's size.
    pub from_env: bool,
}

/// The environment variable that sizes the compute pool.
pub const THREADS_VARIABLE: &str = "RAYON_NUM_THREADS";

impl ComputeThreads {
    /// The pool as it runs in this process (starting it if nothing has yet).
    pub fn current() -> Self {
        let from_env = std::env::var(THREADS_VARIABLE)
            .ok()
            .and_then(|value| value.trim().parse::<usize>().ok())
            .is_some_and(|threads| threads > 0);
        Self {
            pool: rayon::current_num_threads(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            from_env,
        }
    }

    /// More compute threads than cores: they take turns on the cores, and every op's threads
    /// wait for the slowest one, so a step gets slower, not faster.
    pub fn oversubscribed(&self) -> bool {
        self.pool > self.cores
    }
}

impl fmt::Display for ComputeThreads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = if self.from_env {
            format!("set by {THREADS_VARIABLE}")
        } else {
            "one per core".to_string()
        };
        write!(
            f,
            "{} compute threads on {} cores ({source})",
            self.pool, self.cores
        )
    }
}

/// Runs `work` on one of the compute pool's threads and returns its result.
///
/// Why: an op started from a thread outside the pool hands its work to the pool, wakes a
/// sleeping thread and then sleeps itself until the work is done, every time. Started from a
/// pool thread, the op's pieces go on that thread's own queue: it works on them at once and
/// only takes help from the others, so the wake-ups leave the critical path.
///
/// One such piece of work runs at a time in the process ([`compute_turn`]): callers from other
/// threads wait their turn outside the pool. Why: a pool thread that waits inside an op (a parallel
/// convolution in the middle of a backward pass) takes other queued jobs meanwhile. If that
/// job were a second caller's whole training step, it would block on the autodiff graph's
/// lock, which the interrupted backward pass on the same thread holds: two test threads
/// training at once deadlocked this way. Nested calls (already on a pool thread) run directly.
pub fn on_compute_pool<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() {
        return work();
    }
    let _turn = compute_turn();
    rayon::scope(|_| work())
}

/// The process's turn to compute on the pool, held while one caller's work runs there
/// ([`on_compute_pool`]) and while a data-parallel step's replicas compute: their threads are
/// outside the pool and hand it kernels from inside their backward passes, so a pool thread
/// waiting in one of those could take another caller's whole step and deadlock the same way
/// (seen in CI: a SAM2 replica test beside a single-device training test).
pub(crate) fn compute_turn() -> std::sync::MutexGuard<'static, ()> {
    // A panic in an earlier holder's work poisons the lock but leaves nothing half-done here.
    POOL_TURN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// See [`compute_turn`].
static POOL_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Sets glibc's allocator up for large tensors; the command-line tools call it first thing in
/// `main`, before any thread starts. Elsewhere (other C libraries) this does nothing.
///
/// - **One arena** (`M_ARENA_MAX`): glibc gives each thread that allocates its own arena and
///   keeps what is freed there for that arena. With the steps on pool threads
///   ([`on_compute_pool`]) every pool thread held its own high-water mark: the PIDNet-S train
///   step at 2×3×512×512 peaked at 904 MiB, and at 628 MiB with one arena, no slower.
/// - **Tensors up to 1 GiB from the heap, and freed memory kept** (`M_MMAP_THRESHOLD`,
///   `M_TRIM_THRESHOLD`): by default glibc maps blocks above 128 KiB–32 MiB fresh from the
///   kernel and unmaps them when freed, so every such tensor faulted in zeroed pages again.
///   In `perf` of the Hiera-T rows the kernel's page zeroing was 20–23 % of the samples. Kept
///   on the heap: the encoder forward 10–12 % faster (a 32 MiB threshold), the full Hiera-T
///   fine-tuning step 20–21 s → 11.7 s (1 GiB; its peak RSS 5.1 → 5.6 GiB); PIDNet's rows
///   unchanged in time and peak RSS.
pub fn configure_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets allocator parameters, each within its documented range.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_flex_computes_on_is_the_one_reported() {
        // Flex's parallel ops run on rayon's global pool: an op's work is spread over exactly
        // the threads `current()` reports.
        let threads = ComputeThreads::current();
        assert!(threads.pool >= 1 && threads.cores >= 1);
        let seen = std::sync::Mutex::new(std::collections::HashSet::new());
        rayon::broadcast(|_| {
            seen.lock().unwrap().insert(std::thread::current().id());
        });
        assert_eq!(seen.into_inner().unwrap().len(), threads.pool);
    }

    /// Callers from several threads take turns: no two of them compute on the pool at once.
    #[test]
    fn callers_from_several_threads_take_turns() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static INSIDE: AtomicUsize = AtomicUsize::new(0);
        let most = std::thread::scope(|scope| {
            let callers: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        on_compute_pool(|| {
                            let together = INSIDE.fetch_add(1, Ordering::SeqCst) + 1;
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            INSIDE.fetch_sub(1, Ordering::SeqCst);
                            together
                        })
                    })
                })
                .collect();
            callers
                .into_iter()
                .map(|caller| caller.join().expect("the caller returned"))
                .max()
        });
        assert_eq!(most, Some(1));
    }

    #[test]
    fn work_runs_on_a_pool_thread_and_returns_its_result() {
        assert!(
            rayon::current_thread_index().is_none(),
            "tests run outside the pool"
        );
        let (index, nested) = on_compute_pool(|| {
            // A nested call stays on the same thread.
            let outer = rayon::current_thread_index();
            (outer, on_compute_pool(rayon::current_thread_index))
        });
        assert!(index.is_some_and(|i| i < rayon::current_num_threads()));
        assert_eq!(nested, index);
        // Work that uses the pool from there finishes (no thread waits on itself).
        let sum: u64 = on_compute_pool(|| {
            use rayon::prelude::*;
            (0..10_000u64).into_par_iter().sum()
        });
        assert_eq!(sum, 49_995_000);
    }

    #[test]
    fn more_threads_than_cores_is_oversubscribed() {
        let threads = ComputeThreads {
            pool: 4,
            cores: 2,
            from_env: true,
        };
        assert!(threads.oversubscribed());
        assert_eq!(
            threads.to_string(),
            "4 compute threads on 2 cores (set by RAYON_NUM_THREADS)"
        );
        assert!(!ComputeThreads { pool: 2, ..threads }.oversubscribed());
    }
}
