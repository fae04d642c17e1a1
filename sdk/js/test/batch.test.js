// The SDK decodes the shared fixture batches (sdk/fixtures/batches.json)
// as the Rust and Python SDKs do, and names the column of a malformed one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { Batch, ColumnInfo, InvalidData, MalformedBatch, WrongKind, ColumnNotFound } from 'jobhost';
import { batch, runReport } from 'jobhost/testing';
import * as jobhost from 'jobhost';

// Integers beyond 2^53 are read as text first, so that none loses digits.
const text = readFileSync(new URL('../../fixtures/batches.json', import.meta.url), 'utf8');
const fixtures = JSON.parse(text.replace(/(?<=[[,\s])(-?\d{16,})(?=[\],\s])/g, '"$1"'));

/** The fixture's WIT batch as componentize-js hands it over. */
function wit(fixture) {
  return {
    rows: fixture.batch.rows,
    columns: fixture.batch.columns.map((c) => {
      const [tag, val] = Object.entries(c.data)[0];
      const nulls = c.nulls === null ? undefined : Uint8Array.from(c.nulls);
      if (tag === 'integer') return { nulls, data: { tag, val: BigInt64Array.from(val, BigInt) } };
      if (tag === 'real') return { nulls, data: { tag, val: Float64Array.from(val) } };
      const packed = (t) => ({ data: Uint8Array.from(t.data), offsets: Uint32Array.from(t.offsets) });
      if (tag === 'text-dict') {
        return { nulls, data: { tag, val: { values: packed(val.values), indices: Uint32Array.from(val.indices) } } };
      }
      return { nulls, data: { tag, val: packed(val) } };
    }),
  };
}

const hex = (bytes) => Buffer.from(bytes).toString('hex');

for (const fixture of fixtures.cases) {
  test(`fixture: ${fixture.name}`, () => {
    const columns = fixture.columns.map((c) => new ColumnInfo(c.name, c.kind));
    if (fixture.error_column) {
      assert.throws(
        () => Batch.fromWit(columns, wit(fixture)),
        (e) =>
          e instanceof MalformedBatch &&
          e.column === fixture.error_column &&
          e.message.includes(`column \`${fixture.error_column}\``),
      );
      return;
    }
    const b = Batch.fromWit(columns, wit(fixture));
    assert.equal(b.length, fixture.batch.rows);
    for (const c of fixture.columns) {
      const want = fixture.expect[c.name];
      let got;
      if (c.kind === 'integer') {
        got = b.bigints(c.name).map((v) => (v === null ? null : v.toString()));
        assert.deepEqual(got, want.map((v) => (v === null ? null : String(v))));
      } else if (c.kind === 'blob') {
        assert.deepEqual(b.blobs(c.name).map((v) => (v === null ? null : hex(v))), want);
      } else {
        got = Array.from(c.kind === 'real' ? b.reals(c.name) : b.texts(c.name));
        assert.deepEqual(got, want);
      }
      assert.equal(b.hasNulls(c.name), want.includes(null));
    }
  });
}

test('an integer no number holds exactly is refused by integers(), read by bigints()', () => {
  const fixture = fixtures.cases[0];
  const columns = fixture.columns.map((c) => new ColumnInfo(c.name, c.kind));
  const b = Batch.fromWit(columns, wit(fixture), 100);
  assert.throws(
    () => b.integers('id'),
    (e) => e instanceof InvalidData && e.message.includes('column `id` at row 109: -9223372036854775808'),
  );
  assert.equal(b.bigints('id')[9], -9223372036854775808n);
});

test('rows, kinds and the mistakes no retry mends', () => {
  const b = batch(
    [
      ['region', 'text'],
      ['amount', 'real'],
      ['n', 'integer'],
    ],
    [
      { region: 'north', amount: 1.5, n: 1 },
      { region: null, amount: 2, n: 2 },
    ],
  );
  assert.deepEqual(b.row(0), { region: 'north', amount: 1.5, n: 1 });
  assert.deepEqual([...b].map((r) => r.region), ['north', null]);
  assert.deepEqual(b.integers(2), [1, 2]);
  assert.equal(b.kind('amount'), 'real');
  assert.throws(() => b.reals('region'), WrongKind);
  assert.throws(() => b.texts('nope'), ColumnNotFound);
});

test('text keeps a leading byte-order mark, reals are a plain array, row() reads any integer', () => {
  const b = batch(
    [
      ['t', 'text'],
      ['r', 'real'],
      ['i', 'integer'],
    ],
    [
      { t: '\uFEFFnorth', r: 1.5, i: 1 },
      { t: 'é', r: 2, i: 2n ** 60n },
    ],
  );
  assert.deepEqual(b.texts('t'), ['\uFEFFnorth', 'é']);
  assert.ok(Array.isArray(b.reals('r')));
  assert.deepEqual(b.row(1), { t: 'é', r: 2, i: 2n ** 60n });
  assert.throws(() => b.integers('i'), InvalidData);
});

test('a source read to its end is closed, so it can be opened again', async () => {
  class Twice extends jobhost.Report {
    run() {
      let rows = 0;
      for (let pass = 0; pass < 2; pass++) {
        for (const b of jobhost.open().batches()) rows += b.length;
      }
      return String(rows);
    }
  }
  const got = await runReport(Twice, { columns: [['n', 'integer']], rows: [{ n: 1 }, { n: 2 }] });
  assert.equal(got.error, null);
  assert.equal(got.output.summary, '2');
  // Without the close, the host (and its fake) refuse a second cursor.
  class Left extends jobhost.Report {
    run() {
      jobhost.open().columns();
      jobhost.open();
      return 'unreachable';
    }
  }
  const refused = await runReport(Left, { columns: [['n', 'integer']], rows: [] });
  assert.deepEqual(refused.error, {
    tag: 'source-failed',
    val: 'invalid state: a cursor is already open; drop it before opening another',
  });
});

test("the window's local time tells the two 02:30s of the night the clocks go back apart", async () => {
  class Clock extends jobhost.Report {
    run(ctx) {
      // 2026-10-25 in Europe/Berlin: 03:00 CEST became 02:00 CET at 01:00 UTC.
      const first = ctx.window.local(1_792_888_200); // 00:30 UTC
      const second = ctx.window.local(new Date(Date.UTC(2026, 9, 25, 1, 30)));
      return [String(first), String(second), ctx.window.localDate(1_792_879_200 + 86_399)].join(' ');
    }
  }
  const got = await runReport(Clock, {
    window: {
      label: '2026-10-25',
      start: '2026-10-24T22:00:00Z',
      end: '2026-10-25T23:00:00Z',
      timezone: 'Europe/Berlin',
    },
  });
  assert.equal(got.error, null);
  assert.equal(
    got.output.summary,
    '2026-10-25T02:30:00+02:00 2026-10-25T02:30:00+01:00 2026-10-25',
  );
});
