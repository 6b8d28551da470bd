#![no_main]
//! Whole-message parser: never panics; what parses re-emits and re-parses to the same value.

use libfuzzer_sys::fuzz_target;

#[path = "../check.rs"]
mod check;

fuzz_target!(|data: &[u8]| check::check(data));
