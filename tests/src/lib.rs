//! End-to-end tests across segburn's library crates live in `tests/`; this crate has no code.
