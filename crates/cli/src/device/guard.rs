//! Running backend work that may panic. cudarc panics when a CUDA library or symbol is missing,
//! and a backend may panic on an unsupported dtype: the work runs under `catch_unwind`, and the
//! panic message becomes an error (a `doctor` check's failure text, a `bench` run's error)
//! instead of a crash.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

static HOOK: Once = Once::new();

/// Keeps panics inside [`guarded`] off stderr (their message is reported by the caller);
/// panics anywhere else still print as usual.
fn install_quiet_hook() {
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !GUARDED.with(Cell::get) {
                default(info);
            }
        }));
    });
}

/// Runs `f`, turning a panic into `Err(message)`.
pub fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_quiet_hook();
    let outer = GUARDED.with(|g| g.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(outer));
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panicked (no message)".to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::guarded;

    #[test]
    fn a_panic_becomes_its_message() {
        assert_eq!(guarded(|| 3), Ok(3));
        let message = guarded(|| -> u8 { panic!("no libnvrtc for {}", "you") }).unwrap_err();
        assert_eq!(message, "no libnvrtc for you");
    }
}
