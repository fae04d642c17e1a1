//! Rows the host read itself and hands over as a source: the committed
//! reports of the upstream windows a window needs (`[source] type =
//! "upstream"`). The run fills the table once it has seen those windows
//! DONE ([`Source::upstream`] stands for it until then); the guest reads
//! it through the same cursor, batches and journal as any source, so a
//! replay serves it again from the journal.

use std::sync::Arc;

use super::batch::{Chunk, ColumnInfo, Value};
use super::cursor::{Query, Reader};
use super::{Bounds, Source, SourceError, SourceKind};

/// One value of a [`Table`].
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// SQL NULL.
    Null,
    /// An integer.
    Integer(i64),
    /// Text.
    Text(String),
}

/// A table of rows in memory, with its columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Where the rows came from, as messages show it.
    pub location: String,
    /// The columns.
    pub columns: Vec<ColumnInfo>,
    /// The rows, each with one cell per column.
    pub rows: Vec<Vec<Cell>>,
}

impl From<Table> for Source {
    fn from(table: Table) -> Source {
        Source::new(Served(Arc::new(table)))
    }
}

#[derive(Debug)]
struct Served(Arc<Table>);

impl SourceKind for Served {
    fn location(&self) -> String {
        self.0.location.clone()
    }

    fn start(&self, _bounds: Bounds, reader: Reader) {
        let query = Rows {
            table: self.0.clone(),
            next: 0,
        };
        // Nothing runs outside this thread that an interrupt could stop:
        // a dropped cursor stops the chunks between rows.
        reader.run(Box::new(|| {}), query);
    }
}

/// The place a run's upstream rows take until the run reads them: started
/// on its own it refuses, so a run that never filled it cannot read an
/// empty table by mistake.
#[derive(Debug)]
pub(super) struct Upstream;

impl SourceKind for Upstream {
    fn location(&self) -> String {
        "the upstream jobs' reports".to_string()
    }

    fn start(&self, _bounds: Bounds, reader: Reader) {
        reader.refuse(
            "an upstream source is read by the run once the windows it needs are DONE".to_string(),
        );
    }

    fn upstream(&self) -> bool {
        true
    }
}

/// A [`Table`] being read.
struct Rows {
    table: Arc<Table>,
    next: usize,
}

impl Query for Rows {
    fn columns(&mut self) -> std::result::Result<Vec<ColumnInfo>, String> {
        Ok(self.table.columns.clone())
    }

    fn next_chunk(&mut self, chunk: &mut Chunk<'_>) -> std::result::Result<bool, SourceError> {
        while !chunk.full() {
            let Some(row) = self.table.rows.get(self.next) else {
                return Ok(false);
            };
            for (i, cell) in row.iter().enumerate() {
                let value = match cell {
                    Cell::Null => Value::Null,
                    Cell::Integer(n) => Value::Integer(*n),
                    Cell::Text(t) => Value::Text(t.as_bytes()),
                };
                chunk.push(i, value).map_err(|why| {
                    SourceError::TypeMismatch(format!(
                        "column `{}` of row {}: {why}",
                        self.table.columns.get(i).map_or("?", |c| c.name.as_str()),
                        self.next + 1
                    ))
                })?;
            }
            chunk.end_row();
            self.next += 1;
        }
        Ok(self.next < self.table.rows.len())
    }
}
