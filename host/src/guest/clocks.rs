//! The guest's clocks: a wall clock pinned to the run's `now`, a monotonic
//! clock that ticks 1 µs per reading, and sleeps that move that clock
//! instead of holding the host. The same run reads the same times, and no
//! guest can make the host wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wasmtime::component::Linker;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock};

use crate::guest::state::HostState;

/// The guest's wall clock: always the run's `now`.
pub(crate) struct PinnedWallClock(pub Duration);

impl HostWallClock for PinnedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
    fn now(&self) -> Duration {
        self.0
    }
}

/// The guest's monotonic clock: starts at 0 and advances 1 µs per reading,
/// so a guest that waits for time to pass makes progress, deterministically.
/// Sleeping advances it by the time slept (see [`virtual_sleep`]).
pub(crate) struct TickingClock(pub Arc<AtomicU64>);

impl HostMonotonicClock for TickingClock {
    fn resolution(&self) -> u64 {
        1_000
    }
    fn now(&self) -> u64 {
        advance(&self.0, 1_000)
    }
}

/// The WASI clocks version whose monotonic-clock functions are replaced.
const CLOCKS: &str = "wasi:clocks/monotonic-clock@0.2.12";

/// Replaces the monotonic clock's timers with virtual ones. WASI's own
/// implementation sleeps for real inside the host call, where the epoch
/// deadline cannot interrupt it: a guest sleeping for a day would hold the
/// host for a day. Here a timer is ready at once and moves the guest's
/// clock forward instead, so sleeping is instant, deterministic and bounded
/// by the same time limit as computing.
///
/// # Errors
///
/// Fails only if the linker lacks WASI's clocks.
pub(crate) fn virtual_sleep(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut clocks = linker.instance(CLOCKS)?;
    clocks.func_wrap(
        "subscribe-duration",
        |mut cx: wasmtime::StoreContextMut<'_, HostState>, (nanos,): (u64,)| {
            let state = cx.data_mut();
            advance(&state.monotonic, nanos);
            let timer = state.table.push(Elapsed)?;
            Ok((wasmtime_wasi::p2::subscribe(&mut state.table, timer)?,))
        },
    )?;
    clocks.func_wrap(
        "subscribe-instant",
        |mut cx: wasmtime::StoreContextMut<'_, HostState>, (when,): (u64,)| {
            let state = cx.data_mut();
            state.monotonic.fetch_max(when, Ordering::Relaxed);
            let timer = state.table.push(Elapsed)?;
            Ok((wasmtime_wasi::p2::subscribe(&mut state.table, timer)?,))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Moves a monotonic reading forward by `nanos`, saturating rather than
/// wrapping, and returns the reading before the move.
fn advance(clock: &AtomicU64, nanos: u64) -> u64 {
    clock
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
            Some(t.saturating_add(nanos))
        })
        .unwrap_or_else(|t| t)
}

/// A timer whose time has come.
struct Elapsed;

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for Elapsed {
    async fn ready(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_clock_saturates_instead_of_wrapping() {
        let clock = AtomicU64::new(u64::MAX - 5);
        advance(&clock, 1_000);
        assert_eq!(clock.load(Ordering::Relaxed), u64::MAX);
    }
}
