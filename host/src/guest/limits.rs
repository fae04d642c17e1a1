//! The guest's settings: the limits of one run (memory, time, output,
//! report, journal), what its outbox may stage, its log's budget, the size
//! of its batches and its parameters; and the limiter that holds its
//! memories and tables to the memory limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::ResourceLimiter;

use crate::guest::outbox::OutboxLimits;

/// The most guest memory a job may ask for, MiB.
pub const MAX_MEMORY_MIB: u64 = 4096;

/// The longest guest time limit a job may ask for, seconds.
pub const MAX_TIMEOUT_SECONDS: u64 = 86_400;

/// Resource limits for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestLimits {
    /// Linear memory cap, in bytes.
    pub memory_bytes: usize,
    /// Wall-clock time the guest may compute for.
    pub timeout: Duration,
    /// Bytes of stdout and of stderr kept.
    pub output_bytes: usize,
    /// Bytes of report summary plus cursor accepted.
    pub report_bytes: usize,
    /// Encoded bytes the run's journal may hold.
    pub journal_bytes: u64,
}

/// What a job's config says of its guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestSettings {
    /// The limits of one run.
    pub limits: GuestLimits,
    /// What one run may stage.
    pub outbox: OutboxLimits,
    /// Bytes of log the guest may print.
    pub log_bytes: usize,
    /// Rows per batch handed to the guest, at most.
    pub batch_rows: std::num::NonZeroU32,
    /// Free-form parameters, sorted by name.
    pub params: Vec<(String, String)>,
}

/// Table elements a guest may hold across all its tables.
const MAX_TABLE_ELEMENTS: usize = 1_000_000;

/// A `ResourceLimiter` that caps the guest's memories and tables in total
/// (a component may hold several core modules, each with its own memory),
/// and remembers whether the memory cap was hit, since a refused memory
/// growth does not surface as a `Trap`.
pub(crate) struct MemoryLimiter {
    max: usize,
    used: usize,
    table_elements: usize,
    hit: Arc<AtomicBool>,
}

impl MemoryLimiter {
    /// A limiter of `max` bytes in all; `hit` is set when the cap refuses
    /// a growth.
    pub(crate) fn new(max: usize, hit: Arc<AtomicBool>) -> MemoryLimiter {
        MemoryLimiter {
            max,
            used: 0,
            table_elements: 0,
            hit,
        }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // A growth past the memory's own maximum fails anyway; count nothing.
        if maximum.is_some_and(|m| desired > m) {
            return Ok(false);
        }
        let total = self.used.saturating_sub(current).saturating_add(desired);
        if total > self.max {
            self.hit.store(true, Ordering::Relaxed);
            wasmtime::bail!("guest memory limit of {} bytes reached", self.max);
        }
        self.used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self
            .table_elements
            .saturating_sub(current)
            .saturating_add(desired);
        if total > MAX_TABLE_ELEMENTS {
            return Ok(false);
        }
        self.table_elements = total;
        Ok(true)
    }

    fn instances(&self) -> usize {
        64
    }

    fn memories(&self) -> usize {
        64
    }

    fn tables(&self) -> usize {
        64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_limit_counts_every_memory_of_the_guest_together() {
        let hit = Arc::new(AtomicBool::new(false));
        let mut l = MemoryLimiter::new(100, hit.clone());
        assert!(l.memory_growing(0, 60, None).unwrap());
        assert!(
            l.memory_growing(60, 70, None).unwrap(),
            "growing the same memory counts the difference"
        );
        assert!(
            l.memory_growing(0, 40, None).is_err(),
            "a second memory shares the cap"
        );
        assert!(hit.load(Ordering::Relaxed));
    }
}
