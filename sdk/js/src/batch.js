// Columnar batches of rows, checked and decoded once.
//
// A `Batch` is made from a WIT `batch` and the cursor's column list. Making
// it checks what the WIT promises (one value per row, text offsets from 0,
// never decreasing and inside the data, UTF-8 text, dictionary indices in
// range, a NULL bitmap covering every row, data of the declared kind) and
// decodes each column into an array, NULL as `null`. A malformed batch
// throws `MalformedBatch` naming the column and, where it can, the row.
// Reading can then fail only by naming a column the batch does not have
// (`ColumnNotFound`) or asking a column for another kind (`WrongKind`), or
// by asking `integers` for a value no JavaScript number holds exactly
// (`InvalidData`: read such a column with `bigints`).

import { ColumnNotFound, InvalidData, MalformedBatch, WrongKind } from './errors.js';
import { ColumnKind } from './values.js';

const CARRIES = {
  integer: ColumnKind.INTEGER,
  real: ColumnKind.REAL,
  text: ColumnKind.TEXT,
  'text-dict': ColumnKind.TEXT,
  blob: ColumnKind.BLOB,
};

// `ignoreBOM`: a value that starts with U+FEFF keeps it, as in Rust and Python.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** What is wrong with one column, and at which row or dictionary entry. */
class Fault extends Error {
  constructor(detail, where = {}) {
    super(detail);
    this.row = where.row;
    this.entry = where.entry;
  }

  error(column, firstRow) {
    let where = '';
    const row = this.row === undefined ? undefined : firstRow + this.row;
    if (row !== undefined) {
      where = `, row ${row}`;
    } else if (this.entry !== undefined) {
      where = `, dictionary entry ${this.entry}`;
    }
    return new MalformedBatch(`malformed batch: column \`${column}\`${where}: ${this.message}`, {
      column,
      row,
      entry: this.entry,
    });
  }
}

const at = (unit, i) => (unit === 'row' ? { row: i } : { entry: i });

function checkCount(found, rows) {
  if (found !== rows) {
    throw new Fault(`${found} values for ${rows} rows`);
  }
}

/** Checks packed offsets against `size` bytes of data. */
function checkOffsets(offsets, size, unit) {
  if (offsets.length === 0) {
    throw new Fault('no offsets (there is one more offset than values)');
  }
  if (offsets[0] !== 0) {
    throw new Fault(`the first offset is ${offsets[0]}, not 0`, at(unit, 0));
  }
  for (let i = 0; i + 1 < offsets.length; i++) {
    const start = offsets[i];
    const end = offsets[i + 1];
    if (end < start) {
      throw new Fault(`offsets ${start}..${end} decrease`, at(unit, i));
    }
    if (end > size) {
      throw new Fault(`offsets ${start}..${end} are past the ${size} bytes of data`, at(unit, i));
    }
  }
}

/** The strings of a WIT `text-column`. */
function decodeText(text, unit = 'row') {
  const data = text.data;
  const offsets = text.offsets;
  checkOffsets(offsets, data.length, unit);
  const out = new Array(offsets.length - 1);
  let ascii = true;
  const used = offsets[offsets.length - 1];
  for (let i = 0; i < used; i++) {
    if (data[i] >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) {
    // One decoding for the whole column, then slices of it.
    const whole = used ? utf8.decode(data.subarray(0, used)) : '';
    for (let i = 0; i < out.length; i++) {
      out[i] = whole.slice(offsets[i], offsets[i + 1]);
    }
    return out;
  }
  for (let i = 0; i < out.length; i++) {
    try {
      out[i] = utf8.decode(data.subarray(offsets[i], offsets[i + 1]));
    } catch {
      throw new Fault('not valid UTF-8', at(unit, i));
    }
  }
  return out;
}

function decodeBlob(blob) {
  const { data, offsets } = blob;
  checkOffsets(offsets, data.length, 'row');
  const out = new Array(offsets.length - 1);
  for (let i = 0; i < out.length; i++) {
    out[i] = data.slice(offsets[i], offsets[i + 1]);
  }
  return out;
}

const isNull = (bitmap, row) => ((bitmap[row >> 3] >> (row & 7)) & 1) === 1;

function decodeDict(dict, rows, bitmap) {
  const indices = dict.indices;
  checkCount(indices.length, rows);
  const strings = decodeText(dict.values, 'entry');
  const out = new Array(rows);
  for (let row = 0; row < rows; row++) {
    const index = indices[row];
    if (index < strings.length) {
      out[row] = strings[index];
    } else if (bitmap && isNull(bitmap, row)) {
      // A NULL row's index is never read, so it need not point anywhere.
      out[row] = null;
    } else {
      throw new Fault(
        `dictionary index ${index}, but the dictionary holds ${strings.length} values`,
        { row },
      );
    }
  }
  return out;
}

/** One WIT column declared as `kind`, decoded, and whether a row is NULL. */
function decodeColumn(kind, column, rows) {
  const data = column.data;
  if (CARRIES[data.tag] !== kind) {
    throw new Fault(`declared ${kind}, but the batch holds ${data.tag} data`);
  }
  const bitmap = column.nulls ?? null;
  if (bitmap && bitmap.length < (rows + 7) >> 3) {
    throw new Fault(`the NULL bitmap of ${bitmap.length} bytes does not cover ${rows} rows`);
  }
  let values;
  if (data.tag === 'integer') {
    checkCount(data.val.length, rows);
    values = data.val;
  } else if (data.tag === 'real') {
    // A plain array, NULLs or not: the same type whatever the batch holds.
    checkCount(data.val.length, rows);
    values = Array.from(data.val);
  } else if (data.tag === 'text-dict') {
    values = decodeDict(data.val, rows, bitmap);
  } else {
    if (data.val.offsets.length) {
      checkCount(data.val.offsets.length - 1, rows);
    }
    values = data.tag === 'text' ? decodeText(data.val) : decodeBlob(data.val);
  }
  let nulls = false;
  if (bitmap) {
    const need = (rows + 7) >> 3;
    for (let b = 0; b < need && !nulls; b++) {
      if (bitmap[b] !== 0) {
        for (let bit = 0; bit < 8; bit++) {
          const row = b * 8 + bit;
          if (row < rows && (bitmap[b] >> bit) & 1) {
            nulls = true;
            break;
          }
        }
      }
    }
    if (nulls) {
      values = Array.from(values, (v, row) => (isNull(bitmap, row) ? null : v));
    }
  }
  return { values, nulls };
}

/**
 * 64-bit integers as numbers, NULL as `null`; `beyond(i, value)` for one
 * beyond 2^53. A `BigInt64Array` is read through 32-bit halves of its
 * buffer: reading its elements would make a `bigint` of each, which costs
 * far more than the arithmetic in an interpreter.
 */
function toNumbers(raw, beyond) {
  const out = new Array(raw.length);
  if (raw instanceof BigInt64Array) {
    const words = new Int32Array(raw.buffer, raw.byteOffset, raw.length * 2);
    for (let i = 0; i < raw.length; i++) {
      const lo = words[2 * i];
      const hi = words[2 * i + 1];
      // Safe when the high word is within 2^21 of zero: |value| < 2^53.
      if (hi >= -0x200000 && hi < 0x200000) {
        out[i] = hi * 4294967296 + (lo >>> 0);
      } else {
        beyond(i, raw[i]);
      }
    }
    return out;
  }
  for (let i = 0; i < raw.length; i++) {
    const v = raw[i];
    if (v === null) {
      out[i] = null;
      continue;
    }
    const n = Number(v);
    if (!Number.isSafeInteger(n)) {
      beyond(i, v);
    }
    out[i] = n;
  }
  return out;
}

const names = (columns) => columns.map((c) => `\`${c.name}\``).join(', ') || 'none';

/**
 * A run of consecutive rows of the query's result, decoded by column.
 * Columns are named by name or by position (from 0). The arrays the typed
 * views return are the batch's own: read them, do not change them.
 */
export class Batch {
  /**
   * Internal: use `Batch.fromWit` or `jobhost/testing`.
   * @param {import('./values.js').ColumnInfo[]} columns
   * @param {ArrayLike<unknown>[]} values one array per column
   * @param {number} rows
   * @param {boolean[]} [nulls] whether each column has a NULL
   * @param {number} [firstRow] the source row the batch starts at
   */
  constructor(columns, values, rows, nulls, firstRow = 0) {
    this.firstRow = firstRow;
    this._infos = Object.freeze([...columns]);
    this._values = values;
    this.length = rows;
    this._nulls = nulls ?? values.map((v) => Array.prototype.includes.call(v, null));
    this._index = new Map();
    this._infos.forEach((info, i) => {
      if (!this._index.has(info.name)) {
        this._index.set(info.name, i);
      }
    });
    this._converted = new Map();
    this._exact = new Map();
  }

  /**
   * Checks and decodes a WIT `batch` whose columns are `columns`;
   * `firstRow` is the source row it starts at, for the rows errors name.
   */
  static fromWit(columns, batch, firstRow = 0) {
    const rows = batch.rows;
    const found = batch.columns.length;
    if (found !== columns.length) {
      if (found < columns.length) {
        const missing = columns[found].name;
        throw new MalformedBatch(
          `malformed batch: column \`${missing}\` is missing: the batch has ${found} columns, ` +
            `the source declares ${columns.length}`,
          { column: missing },
        );
      }
      throw new MalformedBatch(
        `malformed batch: the batch has ${found} columns, the source declares ` +
          `${columns.length} (${names(columns)})`,
      );
    }
    const values = [];
    const nulls = [];
    columns.forEach((info, i) => {
      try {
        const decoded = decodeColumn(info.kind, batch.columns[i], rows);
        values.push(decoded.values);
        nulls.push(decoded.nulls);
      } catch (e) {
        throw e instanceof Fault ? e.error(info.name, firstRow) : e;
      }
    });
    return new Batch(columns, values, rows, nulls, firstRow);
  }

  /** The batch's columns, in order. */
  columns() {
    return [...this._infos];
  }

  /** Whether the batch has a column called `name`. */
  hasColumn(name) {
    return this._index.has(name);
  }

  /** Whether any row of column `key` is NULL. */
  hasNulls(key) {
    return this._nulls[this._position(key)];
  }

  /** The kind of column `key`. */
  kind(key) {
    return this._infos[this._position(key)].kind;
  }

  _position(key) {
    if (typeof key === 'string') {
      const position = this._index.get(key);
      if (position === undefined) {
        throw new ColumnNotFound(
          `the batch has no column \`${key}\` (its columns: ${names(this._infos)})`,
        );
      }
      return position;
    }
    if (Number.isInteger(key) && key >= 0 && key < this._infos.length) {
      return key;
    }
    throw new ColumnNotFound(`the batch has no column ${String(key)} (it has ${this._infos.length})`);
  }

  _typed(key, kind) {
    const position = this._position(key);
    const info = this._infos[position];
    if (info.kind !== kind) {
      throw new WrongKind(`column \`${info.name}\` holds ${info.kind} values, not ${kind}`);
    }
    return position;
  }

  /**
   * Every value of column `key`, whatever its kind, NULL as `null`; an
   * integer as a number, or as a `bigint` beyond 2^53.
   */
  column(key) {
    const position = this._position(key);
    if (this._infos[position].kind !== ColumnKind.INTEGER) {
      return this._values[position];
    }
    let values = this._exact.get(position);
    if (values === undefined) {
      values = Array.from(this._values[position], (v) => {
        if (v === null) return null;
        const n = Number(v);
        return Number.isSafeInteger(n) ? n : BigInt(v);
      });
      this._exact.set(position, values);
    }
    return values;
  }

  /**
   * Every value of the integer column `key` as a number, NULL as `null`.
   * Throws `InvalidData` for a value beyond 2^53 in size, which no number
   * holds exactly: read such a column with `bigints`.
   * @returns {(number | null)[]}
   */
  integers(key) {
    const position = this._typed(key, ColumnKind.INTEGER);
    let numbers = this._converted.get(position);
    if (numbers === undefined) {
      numbers = toNumbers(this._values[position], (i, v) => {
        throw new InvalidData(
          `column \`${this._infos[position].name}\` at row ${this.firstRow + i}: ${v} is ` +
            'beyond the integers a number holds exactly; read it with bigints()',
        );
      });
      this._converted.set(position, numbers);
    }
    return numbers;
  }

  /** Every value of the integer column `key` as a `bigint`, NULL as `null`. */
  bigints(key) {
    const raw = this._values[this._typed(key, ColumnKind.INTEGER)];
    return Array.from(raw, (v) => (v === null ? null : BigInt(v)));
  }

  /** Every value of the real column `key`, NULL as `null`. */
  reals(key) {
    return this._values[this._typed(key, ColumnKind.REAL)];
  }

  /** Every value of the text column `key` (plain or dictionary text). */
  texts(key) {
    return this._values[this._typed(key, ColumnKind.TEXT)];
  }

  /** Every value of the blob column `key`, as `Uint8Array`s. */
  blobs(key) {
    return this._values[this._typed(key, ColumnKind.BLOB)];
  }

  /** Row `index` as an object of column name to value. */
  row(index) {
    if (!Number.isInteger(index) || index < 0 || index >= this.length) {
      throw new RangeError(`row ${index} is outside the batch's ${this.length} rows`);
    }
    const out = {};
    this._infos.forEach((info, i) => {
      if (!Object.hasOwn(out, info.name)) {
        out[info.name] = this.column(i)[index];
      }
    });
    return out;
  }

  /** The rows, in order, as objects. */
  *rows() {
    for (let i = 0; i < this.length; i++) {
      yield this.row(i);
    }
  }

  [Symbol.iterator]() {
    return this.rows();
  }
}
