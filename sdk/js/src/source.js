// The window's rows, from the job's `[source]`.

import * as wit from './host.js';
import { Batch } from './batch.js';
import { SourceFailed, sourceErrorText } from './errors.js';
import { ColumnInfo } from './values.js';

// How componentize-js names a resource's destructor where the engine has
// no `Symbol.dispose` yet.
const DISPOSE = Symbol.dispose ?? Symbol.for('dispose');

/** Rows asked for per batch (the host may cap batches lower). */
export const BATCH_ROWS = 8192;

/** The wrapped WIT error of a failed host call. */
function failed(e) {
  const payload = e && typeof e === 'object' && 'payload' in e ? e.payload : undefined;
  if (payload && typeof payload.tag === 'string') {
    return new SourceFailed(sourceErrorText(payload));
  }
  return e;
}

/** The window's rows: its columns, and its batches in order. */
export class Source {
  constructor(cursor) {
    this._cursor = cursor;
    this._columns = null;
    this._rows = 0;
    this._done = false;
  }

  /** The query's columns, in order. */
  columns() {
    if (this._columns === null) {
      let infos;
      try {
        infos = this._cursor.columns();
      } catch (e) {
        throw failed(e);
      }
      this._columns = infos.map((c) => new ColumnInfo(c.name, c.kind));
    }
    return [...this._columns];
  }

  /**
   * The next batch of at most `maxRows` rows, or `null` once every row
   * has been read.
   */
  nextBatch(maxRows = BATCH_ROWS) {
    if (this._done) {
      return null;
    }
    let columns;
    try {
      columns = this.columns();
    } catch (e) {
      this.close();
      throw e;
    }
    if (!Number.isInteger(maxRows) || maxRows < 1 || maxRows > 0xffff_ffff) {
      throw new RangeError(`nextBatch: maxRows must be a whole number from 1, not ${maxRows}`);
    }
    let batch;
    try {
      const wit = this._cursor.nextBatch(maxRows);
      if (wit === undefined || wit === null) {
        // Every row read: the cursor is closed, so the source can be opened again.
        this.close();
        return null;
      }
      batch = Batch.fromWit(columns, wit, this._rows);
    } catch (e) {
      this.close();
      throw failed(e);
    }
    this._rows += batch.length;
    return batch;
  }

  /** Every batch, in order. */
  *batches(maxRows = BATCH_ROWS) {
    for (let b = this.nextBatch(maxRows); b !== null; b = this.nextBatch(maxRows)) {
      yield b;
    }
  }

  /** Rows read so far. */
  get rowsRead() {
    return this._rows;
  }

  /**
   * Closes the cursor, so that the source can be opened again (the host
   * allows one open cursor at a time). Reading after it is an error.
   */
  close() {
    const cursor = this._cursor;
    this._cursor = null;
    this._done = true;
    const dispose = cursor && cursor[DISPOSE];
    if (typeof dispose === 'function') {
      dispose.call(cursor);
    }
  }

  [DISPOSE]() {
    this.close();
  }
}

/** Opens the window's rows. Throws `SourceFailed` when the host cannot. */
export function open() {
  try {
    return new Source(wit.source.open());
  } catch (e) {
    throw failed(e);
  }
}
