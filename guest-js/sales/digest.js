// The daily sales digest: aggregation of sale rows into a `Summary`, as in
// the Rust reference (`guest-report/src/digest.rs` and `digest/groups.rs`).
//
// A `Digest` is made from the source's column list, fed one batch at a time
// and finished into a `Summary`. It keeps no rows: each batch is folded
// into counters for the window, each region and each product. Revenue is a
// compensated (Neumaier) sum, added in row order exactly as the reference
// does, so the two give the same bits and so the same cents.

import { ColumnKind, InvalidData, ReportError } from 'jobhost';

import { MAX_RFC3339_SECONDS, MIN_RFC3339_SECONDS, money } from './format.js';
import { Summary } from './summary.js';

export const TS = 'ts';
export const REGION = 'region';
export const PRODUCT = 'product';
export const QUANTITY = 'quantity';
export const AMOUNT = 'amount';

const USIZE_MAX = 2n ** 32n - 1n; // the reference runs as wasm32
// Unicode White_Space, which Rust's `str::trim` strips.
const WHITE_SPACE =
  '\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006' +
  '\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000';

function rustTrim(text) {
  let start = 0;
  let end = text.length;
  while (start < end && WHITE_SPACE.includes(text[start])) start++;
  while (end > start && WHITE_SPACE.includes(text[end - 1])) end--;
  return text.slice(start, end);
}

/**
 * The `top` parameter: how many products the digest lists. Accepts what
 * Rust's `value.trim().parse::<usize>()` accepts on wasm32.
 */
export function parseTop(value) {
  const text = rustTrim(value);
  const digits = text.startsWith('+') ? text.slice(1) : text;
  if (/^[0-9]+$/.test(digits) && BigInt(digits) <= USIZE_MAX) {
    return Number(digits);
  }
  throw new ReportError(`parameter \`top\` must be a non-negative integer, got \`${value}\``);
}

/** The position of the required column `name` (ASCII case-insensitive). */
function findColumn(columns, name, accepted, expected) {
  const matches = [];
  columns.forEach((c, i) => {
    // eslint-disable-next-line no-control-regex
    if (/^[\u0000-\u007f]*$/.test(c.name) && c.name.toLowerCase() === name) matches.push(i);
  });
  if (matches.length === 0) {
    throw new InvalidData(`the source has no column \`${name}\``);
  }
  if (matches.length > 1) {
    throw new InvalidData(`the source has more than one column \`${name}\``);
  }
  const kind = columns[matches[0]].kind;
  if (!accepted.includes(kind)) {
    throw new InvalidData(`column \`${name}\` holds ${kind} values, expected ${expected}`);
  }
  return matches[0];
}

/** How Rust's `Display` writes a non-finite `f64`. */
const rustFloat = (x) => (Number.isNaN(x) ? 'NaN' : x > 0 ? 'inf' : '-inf');

const bitsView = new DataView(new ArrayBuffer(8));

/** A key ordering floats as Rust's `f64::total_cmp` does. */
function totalOrder(x) {
  bitsView.setFloat64(0, x);
  const bits = bitsView.getBigInt64(0);
  return bits ^ ((bits >> 63n) & 0x7fff_ffff_ffff_ffffn);
}

/** `amount` as displayed (in cents), for ordering. */
function rounded(amount) {
  const text = money(amount);
  return text === null ? amount : Number(text);
}

/** Compares two strings by code point, as Rust and Python do. */
function byCodePoint(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x !== y) {
      // UTF-16 puts surrogates (code points above U+FFFF) below U+E000.
      if (x >= 0xd800) x += x >= 0xe000 ? -0x800 : 0x2000;
      if (y >= 0xd800) y += y >= 0xe000 ? -0x800 : 0x2000;
      return x - y;
    }
  }
  return a.length - b.length;
}

/** A group's counters. */
class Group {
  constructor() {
    this.orders = 0;
    this.units = 0;
    this.sum = 0.0;
    this.compensation = 0.0;
    this.min = Infinity;
    this.max = -Infinity;
  }

  add(quantity, amount) {
    this.orders += 1;
    // Units are exact, as the reference's 128-bit sum: a number while it
    // holds them exactly, a bigint beyond.
    const both = typeof this.units === 'number' && typeof quantity === 'number';
    const units = both ? this.units + quantity : null;
    this.units = Number.isSafeInteger(units) ? units : BigInt(this.units) + BigInt(quantity);
    const total = this.sum;
    const s = total + amount;
    if (Math.abs(total) >= Math.abs(amount)) {
      this.compensation += total - s + amount;
    } else {
      this.compensation += amount - s + total;
    }
    this.sum = s;
    if (amount < this.min) this.min = amount;
    if (amount > this.max) this.max = amount;
  }
}

/** The groups by revenue (as rounded to cents) descending, ties by name. */
function sorted(groups) {
  const out = [];
  for (const [name, g] of groups) {
    if (g.orders > 0) {
      const revenue = g.sum + g.compensation;
      out.push({
        key: totalOrder(rounded(revenue)),
        group: { name, orders: g.orders, units: g.units, revenue, minOrder: g.min, maxOrder: g.max },
      });
    }
  }
  out.sort((a, b) =>
    a.key === b.key ? byCodePoint(a.group.name, b.group.name) : a.key > b.key ? -1 : 1,
  );
  return out.map((item) => item.group);
}

/** An integer column of a batch: numbers, or bigints where no number holds one. */
function exactIntegers(batch, position) {
  try {
    return batch.integers(position);
  } catch (e) {
    if (!(e instanceof InvalidData)) throw e;
    return batch
      .bigints(position)
      .map((v) => (v === null ? null : Number.isSafeInteger(Number(v)) ? Number(v) : v));
  }
}

/** The running aggregation of one window's sale rows. */
export class Digest {
  /**
   * Starts a digest over rows with these columns. Throws `InvalidData` if
   * a required column is missing, repeated or of a kind it cannot use.
   */
  constructor(columns) {
    this.ts = findColumn(columns, TS, [ColumnKind.INTEGER], 'integer');
    this.region = findColumn(columns, REGION, [ColumnKind.TEXT], 'text');
    this.product = findColumn(columns, PRODUCT, [ColumnKind.TEXT], 'text');
    this.quantity = findColumn(columns, QUANTITY, [ColumnKind.INTEGER], 'integer');
    this.amount = findColumn(columns, AMOUNT, [ColumnKind.REAL, ColumnKind.INTEGER], 'real or integer');
    /** Rows seen so far, skipped ones included. */
    this.rows = 0;
    /** Rows skipped because a required column was NULL. */
    this.skipped = 0;
    this.window = new Group();
    this.firstSale = null;
    this.lastSale = null;
    this.regions = new Map();
    this.products = new Map();
  }

  /**
   * Folds one batch in. A row with NULL in a required column is skipped.
   * Throws `InvalidData` for a value the digest cannot report (a sale time
   * outside the years 0000 to 9999, an amount that is not finite), naming
   * the first such row; the digest is then to be discarded.
   */
  addBatch(batch) {
    const ts = exactIntegers(batch, this.ts);
    const regions = batch.texts(this.region);
    const products = batch.texts(this.product);
    const quantities = exactIntegers(batch, this.quantity);
    const amounts =
      batch.kind(this.amount) === ColumnKind.INTEGER
        ? batch.bigints(this.amount).map((v) => (v === null ? null : Number(v)))
        : batch.reals(this.amount);
    const rows = batch.length;
    // The rows to count: all of them, unless a required column has a NULL.
    let keep = null;
    const positions = [this.ts, this.region, this.product, this.quantity, this.amount];
    if (positions.some((p) => batch.hasNulls(p))) {
      keep = [];
      for (let i = 0; i < rows; i++) {
        if (
          ts[i] !== null &&
          regions[i] !== null &&
          products[i] !== null &&
          quantities[i] !== null &&
          amounts[i] !== null
        ) {
          keep.push(i);
        }
      }
      this.skipped += rows - keep.length;
    }
    const count = keep === null ? rows : keep.length;
    // The time is checked before the amount, and the first bad row named,
    // before anything of the batch is counted (as the reference does).
    for (let k = 0; k < count; k++) {
      const i = keep === null ? k : keep[k];
      const t = ts[i];
      if (!(MIN_RFC3339_SECONDS <= t && t <= MAX_RFC3339_SECONDS)) {
        throw new InvalidData(
          `column \`${TS}\` at row ${this.rows + i}: unix time ${t} is outside the years 0000 to 9999`,
        );
      }
      if (!Number.isFinite(amounts[i])) {
        throw new InvalidData(
          `column \`${AMOUNT}\` at row ${this.rows + i}: amount ${rustFloat(amounts[i])} is not a finite number`,
        );
      }
    }
    // Written for an interpreter: indexed loops, no arrays made per row.
    const window = this.window;
    const regionGroups = this.regions;
    const productGroups = this.products;
    let first = this.firstSale;
    let last = this.lastSale;
    for (let k = 0; k < count; k++) {
      const i = keep === null ? k : keep[k];
      const t = ts[i];
      const q = quantities[i];
      const a = amounts[i];
      window.add(q, a);
      if (first === null || t < first) first = t;
      if (last === null || t > last) last = t;
      let g = regionGroups.get(regions[i]);
      if (g === undefined) {
        g = new Group();
        regionGroups.set(regions[i], g);
      }
      g.add(q, a);
      g = productGroups.get(products[i]);
      if (g === undefined) {
        g = new Group();
        productGroups.set(products[i], g);
      }
      g.add(q, a);
    }
    this.firstSale = first;
    this.lastSale = last;
    this.rows += rows;
  }

  /** The summary for `window`, listing at most `top` products (all when null). */
  finish(window, top) {
    const w = this.window;
    const anyOrders = w.orders > 0;
    const revenue = w.sum + w.compensation;
    const totals = {
      orders: w.orders,
      units: w.units,
      revenue,
      averageOrder: anyOrders ? revenue / w.orders : null,
      minOrder: anyOrders ? w.min : null,
      maxOrder: anyOrders ? w.max : null,
      firstSale: anyOrders ? this.firstSale : null,
      lastSale: anyOrders ? this.lastSale : null,
    };
    let products = sorted(this.products);
    const productCount = products.length;
    if (top !== null) {
      products = products.slice(0, top);
    }
    return new Summary({
      window,
      totals,
      skippedRows: this.skipped,
      regions: sorted(this.regions),
      products,
      productCount,
    });
  }
}
