// Native tests of reports: batches built from rows or from the WIT shape,
// and a run of a report against a fake host (which needs node started with
// `--import` this package's `src/testing/register.js`).

import { Batch } from './batch.js';
import { ColumnInfo } from './values.js';

/**
 * A batch of `rows` (objects of column name to value, `null` for NULL)
 * with `columns` (`[name, kind]` pairs), decoded as a host batch is.
 */
export function batch(columns, rows) {
  return Batch.fromWit(
    columns.map(([name, kind]) => new ColumnInfo(name, kind)),
    witBatch(columns, rows),
  );
}

/** The WIT `batch` a host would send for `rows` (see `batch`). */
export function witBatch(columns, rows) {
  const utf8 = new TextEncoder();
  return {
    rows: rows.length,
    columns: columns.map(([name, kind]) => {
      const values = rows.map((r) => (r[name] === undefined ? null : r[name]));
      const bitmap = new Uint8Array((rows.length + 7) >> 3);
      values.forEach((v, i) => {
        if (v === null) bitmap[i >> 3] |= 1 << (i & 7);
      });
      const nulls = values.includes(null) ? bitmap : undefined;
      if (kind === 'integer') {
        return { nulls, data: { tag: 'integer', val: BigInt64Array.from(values, (v) => BigInt(v ?? 0)) } };
      }
      if (kind === 'real') {
        return { nulls, data: { tag: 'real', val: Float64Array.from(values, (v) => v ?? 0) } };
      }
      const parts = values.map((v) => (v === null ? new Uint8Array() : kind === 'text' ? utf8.encode(v) : v));
      const offsets = new Uint32Array(parts.length + 1);
      parts.forEach((p, i) => {
        offsets[i + 1] = offsets[i] + p.length;
      });
      const data = new Uint8Array(offsets[parts.length]);
      parts.forEach((p, i) => data.set(p, offsets[i]));
      return { nulls, data: { tag: kind, val: { data, offsets } } };
    }),
  };
}

/**
 * Runs `report` (a `Report` class) as the host would, against the fake
 * host: `columns` (`[name, kind]` pairs) and `rows` (or WIT `batches`),
 * the window, clock, parameters and destinations. Returns the output (or
 * the WIT error thrown), what `describe` said, and the messages and log
 * lines.
 */
export async function runReport(report, options = {}) {
  const fake = await import('jobhost:report/source@0.1.1');
  const { exportReport } = await import('./report.js');
  const columns = options.columns ?? null;
  const batches =
    options.batches ??
    (columns && options.rows ? chunks(options.rows, options.batchRows ?? 4096).map((r) => witBatch(columns, r)) : []);
  fake.setUp({
    columns: columns && columns.map(([name, kind]) => ({ name, kind })),
    batches,
    destinations: options.destinations ?? [],
    zone: (options.window ?? {}).timezone ?? 'UTC',
  });
  const window = options.window ?? {};
  const seconds = (text) => BigInt(Math.floor(Date.parse(text) / 1000));
  const ctx = {
    window: {
      job: window.job ?? 'test',
      key: window.key ?? `${window.job ?? 'test'}:${window.label ?? '2026-11-08'}`,
      label: window.label ?? '2026-11-08',
      start: { seconds: seconds(window.start ?? '2026-11-08T00:00:00Z'), nanoseconds: 0 },
      end: { seconds: seconds(window.end ?? '2026-11-09T00:00:00Z'), nanoseconds: 0 },
      timezone: window.timezone ?? 'UTC',
    },
    now: { seconds: seconds(options.now ?? '2026-11-09T00:05:00Z'), nanoseconds: 0 },
    cursor: options.cursor ?? undefined,
    attempt: options.attempt ?? 1,
    destinations: options.destinations ?? [],
    params: Object.entries(options.params ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  };
  const exported = exportReport(report);
  let output = null;
  let error = null;
  let described = null;
  try {
    output = exported.run(ctx);
    described = exported.describe(ctx, output) ?? null;
  } catch (e) {
    error = e;
  }
  return { output, error, described, ...fake.taken() };
}

function chunks(rows, size) {
  const out = [];
  for (let i = 0; i < rows.length; i += size) out.push(rows.slice(i, i + size));
  return out;
}
