// jobhost: write jobhost report components in JavaScript or TypeScript.
//
// A report extends `Report`; its `run(ctx)` reads the window's rows from
// `open()`, stages messages with `send`, and returns an `Output`; one line,
// `export const { run, describe } = jobhost.exportReport(MyReport);`, gives
// componentize-js the world's exports (world `reporter` or
// `describing-reporter` of wit/report.wit). Everything here is plain
// JavaScript, and runs natively under node with `jobhost/testing`.

export { Batch } from './batch.js';
export {
  ColumnNotFound,
  InvalidData,
  JobhostError,
  MalformedBatch,
  ProgrammingError,
  ReportError,
  SendFailed,
  SourceFailed,
  WrongKind,
} from './errors.js';
export * as log from './log.js';
export { send } from './outbox.js';
export { Report, exportReport } from './report.js';
export { BATCH_ROWS, Source, open } from './source.js';
export { ColumnInfo, ColumnKind, Context, Instant, Output, Window } from './values.js';
export { LocalTime } from './zone.js';

export const VERSION = '0.1.1';
