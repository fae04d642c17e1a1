//! A store lent to one page of the dashboard, counting what it is asked:
//! every read a page makes goes through here, so the page can say how many
//! queries it made and how many rows came back (and a test can hold that
//! to a bound however long the job's history). Only reads are offered.

use jiff::Timestamp;

use crate::core::error::Result;
use crate::core::window::{JobName, WindowKey};
use crate::store::{
    Incident, MessageRecord, Notification, Pause, RangeQuery, Revision, RunRecord, RunState,
    ShadowRun, StagedMessage, StaleMark, Store, UpstreamUse,
};
#[cfg(doc)]
use crate::store::{Ledger, Notices};

/// A counted, read-only view of a store.
pub struct Reads<'a> {
    store: &'a mut dyn Store,
    /// Queries made so far.
    pub queries: u32,
    /// Rows they returned.
    pub rows: u64,
}

impl<'a> Reads<'a> {
    /// Counts the reads of `store` from now on.
    pub fn new(store: &'a mut dyn Store) -> Reads<'a> {
        Reads {
            store,
            queries: 0,
            rows: 0,
        }
    }

    fn counted<T>(&mut self, rows: usize, value: T) -> T {
        self.queries += 1;
        self.rows += rows as u64;
        value
    }

    /// [`Ledger::runs_in_range`].
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn range(&mut self, q: &RangeQuery<'_>) -> Result<Vec<RunRecord>> {
        let v = self.store.runs_in_range(q)?;
        Ok(self.counted(v.len(), v))
    }

    /// [`Ledger::state_counts`].
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn counts(
        &mut self,
        job: &str,
        from: Option<Timestamp>,
        until: Option<Timestamp>,
    ) -> Result<Vec<(RunState, u64)>> {
        let v = self.store.state_counts(job, from, until)?;
        Ok(self.counted(v.len(), v))
    }

    /// [`Ledger::peek`].
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn peek(&mut self, key: &WindowKey) -> Result<Option<RunRecord>> {
        let v = self.store.peek(key)?;
        Ok(self.counted(usize::from(v.is_some()), v))
    }

    /// [`Ledger::decided_until`].
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn decided_until(&mut self, job: &JobName) -> Result<Option<Timestamp>> {
        let v = self.store.decided_until(job)?;
        Ok(self.counted(usize::from(v.is_some()), v))
    }

    /// [`Ledger::paused`].
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn paused(&mut self, job: &str) -> Result<Option<Pause>> {
        let v = self.store.paused(job)?;
        Ok(self.counted(usize::from(v.is_some()), v))
    }

    /// [`Ledger::message_records`].
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn message_records(&mut self, key: &WindowKey) -> Result<Vec<MessageRecord>> {
        let v = self.store.message_records(key)?;
        Ok(self.counted(v.len(), v))
    }

    /// [`Ledger::messages`]: a run's staged messages with their bodies.
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn messages(&mut self, key: &WindowKey) -> Result<Vec<StagedMessage>> {
        let v = self.store.messages(key)?;
        Ok(self.counted(v.len(), v))
    }

    /// [`Ledger::revisions`].
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn revisions(&mut self, key: &WindowKey) -> Result<Vec<Revision>> {
        let v = self.store.revisions(key)?;
        Ok(self.counted(v.len(), v))
    }

    /// [`Ledger::stale`].
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn stale(
        &mut self,
        job: Option<&str>,
        key: Option<&WindowKey>,
        limit: usize,
    ) -> Result<Vec<StaleMark>> {
        let v = self.store.stale(job, key, limit)?;
        Ok(self.counted(v.len(), v))
    }

    /// [`Ledger::uses`].
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn uses(&mut self, key: &WindowKey) -> Result<Vec<UpstreamUse>> {
        let v = self.store.uses(key)?;
        Ok(self.counted(v.len(), v))
    }

    /// [`Ledger::shadow`].
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn shadow(&mut self, key: &WindowKey) -> Result<Option<ShadowRun>> {
        let v = self.store.shadow(key)?;
        Ok(self.counted(usize::from(v.is_some()), v))
    }

    /// [`Ledger::shadow_counts`].
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn shadow_counts(&mut self, job: &str) -> Result<Vec<(String, u64)>> {
        let v = self.store.shadow_counts(job)?;
        Ok(self.counted(v.len(), v))
    }

    /// [`Notices::open_incidents`].
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn open_incidents(&mut self, job: &str) -> Result<Vec<Incident>> {
        let v = self.store.open_incidents(job)?;
        Ok(self.counted(v.len(), v))
    }

    /// [`Notices::open_notifications`].
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn open_notifications(&mut self, job: &str, limit: usize) -> Result<Vec<Notification>> {
        let v = self.store.open_notifications(job, limit)?;
        Ok(self.counted(v.len(), v))
    }
}
