// The reference daily sales digest, in JavaScript (world
// `describing-reporter`).
//
// The same report as the Rust reference `guest-report`: it reads the
// window's sales (`ts`, `region`, `product`, `quantity`, `amount`), stages
// the digest as compact JSON for its destinations, returns a one-paragraph
// text as the run's summary (with the latest sale time as the cursor) and
// leaves for `describe` the prompt a language model is asked to describe.
// Given the same rows and parameters, it gives the same summary, message
// bytes and prompt.
//
// Parameters: `top` (how many products the digest lists; all by default)
// and `destination` (stage for this declared destination only; all by
// default).

import * as jobhost from 'jobhost';

import { Digest, parseTop } from './sales/digest.js';

/** The content type of the staged digest. */
export const CONTENT_TYPE = 'application/json';

/**
 * Where to stage the digest: the destination the `destination` parameter
 * names (which must be declared), else every declared one.
 */
function destinations(ctx) {
  const name = ctx.param('destination');
  if (name === undefined) {
    return [...ctx.destinations];
  }
  if (ctx.destinations.includes(name)) {
    return [name];
  }
  const declared = ctx.destinations.length ? ctx.destinations.join(', ') : 'none';
  throw new jobhost.ReportError(
    `parameter \`destination\` names \`${name}\`, which the job does not declare (declared: ${declared})`,
  );
}

/** Opens the source and folds every batch into a digest. */
function readSource() {
  const source = jobhost.open();
  const digest = new Digest(source.columns());
  for (const batch of source.batches()) {
    digest.addBatch(batch);
  }
  return digest;
}

/** The daily sales digest. */
export class SalesDigest extends jobhost.Report {
  constructor() {
    super();
    this.prompt = null;
  }

  run(ctx) {
    const topValue = ctx.param('top');
    const top = topValue === undefined ? null : parseTop(topValue);
    const targets = destinations(ctx);

    const digest = readSource();
    const window = { key: ctx.window.key, label: ctx.window.label, timezone: ctx.window.timezone };
    const summary = digest.finish(window, top);
    const last = summary.totals.lastSale;
    const body = new TextEncoder().encode(summary.toJson());

    for (const name of targets) {
      try {
        jobhost.send(name, body, CONTENT_TYPE);
      } catch (e) {
        if (e instanceof jobhost.SendFailed) {
          throw new jobhost.ReportError(`staging the digest for \`${name}\` failed: ${e.message}`);
        }
        throw e;
      }
    }
    jobhost.log.info(
      `sales digest of ${ctx.window.key} over ${digest.rows} rows (${summary.totals.orders} orders, ` +
        `${summary.skippedRows} skipped), staged for ${targets.length} destination(s)`,
    );
    this.prompt = summary.toPrompt();
    return new jobhost.Output(summary.toText(), last === null ? null : String(last));
  }

  describe() {
    const prompt = this.prompt;
    this.prompt = null;
    return prompt;
  }
}

export const { run, describe } = jobhost.exportReport(SalesDigest);
