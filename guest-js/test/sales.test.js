// The JavaScript reference, natively: its figures, message and prompt on a
// small day of sales, and its refusals.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { runReport } from 'jobhost/testing';

import { SalesDigest } from '../app.js';
import { money, rfc3339, shortestDecimal } from '../sales/format.js';

const COLUMNS = [
  ['ts', 'integer'],
  ['region', 'text'],
  ['product', 'text'],
  ['quantity', 'integer'],
  ['amount', 'real'],
];
const DAY = 1_794_096_000; // 2026-11-08T00:00:00Z
const ROWS = [
  { ts: DAY + 60, region: 'north', product: 'tea', quantity: 2, amount: 10.005 },
  { ts: DAY + 120, region: 'süd', product: 'coffee', quantity: 1, amount: 4.5 },
  { ts: DAY + 180, region: 'north', product: 'coffee', quantity: 3, amount: 12.25 },
  { ts: DAY + 240, region: null, product: 'tea', quantity: 1, amount: 3.0 },
];

test('the digest of a small day, as the Rust reference writes it', async () => {
  const got = await runReport(SalesDigest, { columns: COLUMNS, rows: ROWS, destinations: ['digest'] });
  assert.equal(got.error, null);
  assert.equal(
    got.output.summary,
    'Sales digest test:2026-11-08 (2026-11-08, UTC): 3 orders, 6 units, revenue 26.76, average order ' +
      '8.92 (smallest 4.50, largest 12.25); sales from 2026-11-08T00:01:00Z to 2026-11-08T00:03:00Z. ' +
      'Top region: north with 22.26 from 2 orders. Top product: coffee with 16.75 from 2 orders. ' +
      '1 row skipped for NULL values.',
  );
  assert.equal(got.output.cursor, String(DAY + 180));
  assert.equal(got.messages.length, 1);
  assert.equal(got.messages[0].contentType, 'application/json');
  const body = new TextDecoder().decode(got.messages[0].body);
  assert.equal(
    body,
    '{"window":{"key":"test:2026-11-08","label":"2026-11-08","timezone":"UTC"},"totals":{"orders":3,' +
      '"units":6,"revenue":26.76,"average_order":8.92,"min_order":4.50,"max_order":12.25,' +
      '"first_sale":"2026-11-08T00:01:00Z","last_sale":"2026-11-08T00:03:00Z"},"skipped_rows":1,' +
      '"regions":[{"name":"north","orders":2,"units":5,"revenue":22.26,"min_order":10.01,' +
      '"max_order":12.25},{"name":"süd","orders":1,"units":1,"revenue":4.50,"min_order":4.50,' +
      '"max_order":4.50}],"products":[{"name":"coffee","orders":2,"units":4,"revenue":16.75,' +
      '"min_order":4.50,"max_order":12.25},{"name":"tea","orders":1,"units":2,"revenue":10.01,' +
      '"min_order":10.01,"max_order":10.01}],"product_count":2}',
  );
  assert.ok(got.described.endsWith(body), got.described);
  assert.equal(got.logs[0].level, 'info');
});

test('a bad parameter and a bad row are refused with the reference wording', async () => {
  let got = await runReport(SalesDigest, { columns: COLUMNS, rows: ROWS, params: { top: '-1' } });
  assert.deepEqual(got.error, {
    tag: 'other',
    val: 'parameter `top` must be a non-negative integer, got `-1`',
  });
  got = await runReport(SalesDigest, {
    columns: COLUMNS,
    rows: [...ROWS, { ts: DAY, region: 'x', product: 'y', quantity: 1, amount: Infinity }],
  });
  assert.deepEqual(got.error, {
    tag: 'invalid-data',
    val: 'column `amount` at row 4: amount inf is not a finite number',
  });
  got = await runReport(SalesDigest, { columns: COLUMNS.slice(1), rows: [] });
  assert.deepEqual(got.error, { tag: 'invalid-data', val: 'the source has no column `ts`' });
});

test('money, instants and the shortest decimals, as Rust writes them', () => {
  assert.equal(money(1.005), '1.01');
  assert.equal(money(-0.004), '0.00');
  assert.equal(money(-2.5), '-2.50');
  assert.equal(money(1e21), '1000000000000000000000.00');
  assert.equal(money(Infinity), null);
  assert.equal(shortestDecimal(1e-7), '0.0000001');
  assert.equal(shortestDecimal(12), '12');
  assert.equal(rfc3339(-62_167_219_200), '0000-01-01T00:00:00Z');
  assert.equal(rfc3339(253_402_300_799), '9999-12-31T23:59:59Z');
  assert.equal(rfc3339(253_402_300_800), null);
});

test('units are exact beyond 2^53, as the reference sums them', async () => {
  const got = await runReport(SalesDigest, {
    columns: COLUMNS,
    rows: [
      { ts: DAY + 60, region: 'north', product: 'tea', quantity: 2 ** 53 - 1, amount: 1 },
      { ts: DAY + 61, region: 'north', product: 'tea', quantity: 2, amount: 1 },
      { ts: DAY + 62, region: null, product: 'tea', quantity: 2n ** 62n, amount: 1 },
    ],
    destinations: ['digest'],
  });
  assert.equal(got.error, null);
  const body = new TextDecoder().decode(got.messages[0].body);
  assert.ok(body.includes('"units":9007199254740993'), body);
});
