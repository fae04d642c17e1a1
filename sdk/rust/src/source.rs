//! Reading the window's rows: [`open`], [`Source`] and its [`Batches`].

#![forbid(unsafe_code)]

use std::sync::Arc;

use crate::bindings::jobhost::report::source as wit;
use crate::{Batch, ColumnInfo, Error};

/// How many rows [`Source::batches`] asks the host for per batch.
pub const BATCH_ROWS: u32 = 8192;

/// Runs the job's configured query for this run's window and returns its
/// open cursor.
///
/// One source may be open at a time: drop it (or read it to its end) before
/// opening another. A failure is an error of kind
/// [`SourceFailed`](crate::ErrorKind::SourceFailed) (for example "the job
/// declares no data source", or "query failed: ...").
pub fn open() -> Result<Source, Error> {
    let cursor = wit::open().map_err(Error::from_source)?;
    let columns: Arc<[ColumnInfo]> = cursor.columns().into_iter().map(Into::into).collect();
    Ok(Source {
        cursor: Some(cursor),
        columns,
        rows_read: 0,
    })
}

/// The open query over the window's rows, from [`open`].
///
/// The host's cursor is closed when the source is dropped, or as soon as it
/// has returned its last batch (or an error): a source is read once.
#[derive(Debug)]
pub struct Source {
    cursor: Option<wit::Cursor>,
    columns: Arc<[ColumnInfo]>,
    rows_read: u64,
}

impl Source {
    /// The columns of the result, in order; every batch holds them.
    pub fn columns(&self) -> &[ColumnInfo] {
        &self.columns
    }

    /// How many rows the batches read so far held.
    pub fn rows_read(&self) -> u64 {
        self.rows_read
    }

    /// The batches, [`BATCH_ROWS`] rows asked per batch.
    pub fn batches(&mut self) -> Batches<'_> {
        self.batches_of(BATCH_ROWS)
    }

    /// The batches, at most `max_rows` rows asked per batch (the host may
    /// return fewer; it caps batches at its configured size, and treats 0
    /// as 1).
    pub fn batches_of(&mut self, max_rows: u32) -> Batches<'_> {
        Batches {
            source: self,
            max_rows,
        }
    }

    /// The next batch of at most `max_rows` rows, checked (see [`Batch`]),
    /// or `None` once every row has been returned. A host error, or a
    /// malformed batch, is an error of kind
    /// [`SourceFailed`](crate::ErrorKind::SourceFailed); after an end or an
    /// error the cursor is closed and this returns `Ok(None)` without asking
    /// the host again.
    pub fn next_batch(&mut self, max_rows: u32) -> Result<Option<Batch>, Error> {
        let Some(cursor) = &self.cursor else {
            return Ok(None);
        };
        let answer = cursor.next_batch(max_rows);
        let batch = match answer {
            Ok(Some(batch)) => batch,
            Ok(None) => {
                self.cursor = None;
                return Ok(None);
            }
            Err(e) => {
                self.cursor = None;
                return Err(Error::from_source(e));
            }
        };
        let rows = u64::from(batch.rows);
        match Batch::from_wit(Arc::clone(&self.columns), batch, self.rows_read) {
            Ok(batch) => {
                self.rows_read += rows;
                Ok(Some(batch))
            }
            Err(e) => {
                self.cursor = None;
                Err(e)
            }
        }
    }
}

/// The batches of a [`Source`] (from [`Source::batches`]): each item a
/// checked [`Batch`] or the error that ended the reading; nothing follows
/// an error.
#[derive(Debug)]
pub struct Batches<'a> {
    source: &'a mut Source,
    max_rows: u32,
}

impl Iterator for Batches<'_> {
    type Item = Result<Batch, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.source.next_batch(self.max_rows).transpose()
    }
}

impl std::iter::FusedIterator for Batches<'_> {}
