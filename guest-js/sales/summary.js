// The finished digest of one window and its renderings (compact JSON, the
// language model's prompt, one paragraph of text), as in the Rust
// reference (`guest-report/src/summary.rs`), byte for byte. Money is kept
// unrounded in the values and rounded to cents only when rendered.

import { jsonString, money, rfc3339 } from './format.js';

const moneyJson = (amount) => money(amount) ?? 'null';
const optMoneyJson = (amount) => (amount === null ? 'null' : moneyJson(amount));
const optInstantJson = (seconds) => {
  const text = seconds === null ? null : rfc3339(seconds);
  return text === null ? 'null' : jsonString(text);
};
const groupsJson = (groups) =>
  '[' +
  groups
    .map(
      (g) =>
        `{"name":${jsonString(g.name)},"orders":${g.orders},"units":${g.units}` +
        `,"revenue":${moneyJson(g.revenue)},"min_order":${moneyJson(g.minOrder)}` +
        `,"max_order":${moneyJson(g.maxOrder)}}`,
    )
    .join(',') +
  ']';
const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
const moneyText = (amount) => money(amount) ?? 'n/a';

/** The finished digest of one window. */
export class Summary {
  /**
   * @param {{window: {key: string, label: string, timezone: string}, totals: object,
   *   skippedRows: number, regions: object[], products: object[], productCount: number}} s
   */
  constructor(s) {
    Object.assign(this, s);
  }

  /** Compact, deterministic JSON: money with two decimals, instants in UTC. */
  toJson() {
    const t = this.totals;
    const w = this.window;
    return (
      `{"window":{"key":${jsonString(w.key)},"label":${jsonString(w.label)}` +
      `,"timezone":${jsonString(w.timezone)}},"totals":{"orders":${t.orders}` +
      `,"units":${t.units},"revenue":${moneyJson(t.revenue)}` +
      `,"average_order":${optMoneyJson(t.averageOrder)}` +
      `,"min_order":${optMoneyJson(t.minOrder)},"max_order":${optMoneyJson(t.maxOrder)}` +
      `,"first_sale":${optInstantJson(t.firstSale)},"last_sale":${optInstantJson(t.lastSale)}` +
      `},"skipped_rows":${this.skippedRows},"regions":${groupsJson(this.regions)}` +
      `,"products":${groupsJson(this.products)},"product_count":${this.productCount}}`
    );
  }

  /** What a language model is asked to describe. */
  toPrompt() {
    const w = this.window;
    const what =
      this.totals.orders === 0
        ? 'There were no sales in this window: say so in one sentence.'
        : 'Write a short digest, at most three sentences, of these sales for the sales ' +
          'team: the totals, the strongest region and product, and anything unusual (for ' +
          'example rows skipped for missing values). Use only the figures given; do not ' +
          'invent numbers or comparisons.';
    return (
      `${what}\n\nWindow: ${w.key} (${w.label}, time zone ${w.timezone})\n` +
      `Figures as JSON (money in the shop's currency, instants in UTC):\n${this.toJson()}`
    );
  }

  /** The digest as one human-readable paragraph. */
  toText() {
    const t = this.totals;
    const w = this.window;
    const out = [`Sales digest ${w.key} (${w.label}, ${w.timezone}): `];
    if (t.orders === 0) {
      out.push('no sales.');
    } else {
      out.push(
        `${plural(t.orders, 'order', 'orders')}, ${plural(t.units, 'unit', 'units')}, ` +
          `revenue ${moneyText(t.revenue)}`,
      );
      if (t.averageOrder !== null && t.minOrder !== null && t.maxOrder !== null) {
        out.push(
          `, average order ${moneyText(t.averageOrder)} (smallest ` +
            `${moneyText(t.minOrder)}, largest ${moneyText(t.maxOrder)})`,
        );
      }
      const first = t.firstSale === null ? null : rfc3339(t.firstSale);
      const last = t.lastSale === null ? null : rfc3339(t.lastSale);
      if (first !== null && last !== null) {
        out.push(`; sales from ${first} to ${last}`);
      }
      out.push('.');
      for (const [what, groups] of [
        ['region', this.regions],
        ['product', this.products],
      ]) {
        if (groups.length) {
          const g = groups[0];
          out.push(
            ` Top ${what}: ${g.name} with ${moneyText(g.revenue)} from ` +
              `${plural(g.orders, 'order', 'orders')}.`,
          );
        }
      }
    }
    if (this.skippedRows > 0) {
      out.push(` ${plural(this.skippedRows, 'row', 'rows')} skipped for NULL values.`);
    }
    return out.join('');
  }
}
