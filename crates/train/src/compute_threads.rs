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
