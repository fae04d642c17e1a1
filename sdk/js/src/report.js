// The entry point: extend `Report`, and export it in one line.
//
//   import * as jobhost from 'jobhost';
//   class Rows extends jobhost.Report {
//     run(ctx) {
//       let rows = 0;
//       for (const batch of jobhost.open().batches()) rows += batch.length;
//       return new jobhost.Output(`${rows} rows in ${ctx.window.key}`);
//     }
//   }
//   export const { run, describe } = jobhost.exportReport(Rows);
//
// componentize-js takes the module's `run` and `describe` exports as the
// world's. The report is made on the first call, and the same instance
// serves `run` and then `describe` (the host calls both on one component
// instance), so `run` can leave in `this` what `describe` needs.

import { JobhostError } from './errors.js';
import { Context, Output } from './values.js';
import { forget } from './zone.js';

/** A report: override `run` (and, for a digest, `describe`). */
export class Report {
  /**
   * Computes the report for `ctx.window`. Return an `Output` (a string is
   * taken as `new Output(string)`); throw a `JobhostError` to fail the run.
   * @param {Context} ctx
   * @returns {Output | string}
   */
  // eslint-disable-next-line no-unused-vars
  run(ctx) {
    throw new TypeError('a jobhost Report must define run(ctx)');
  }

  /**
   * What the job's language model is asked to describe, called right after
   * a successful `run` on the same instance; `null` when there is nothing.
   * @param {Context} ctx
   * @param {Output} output
   * @returns {string | null | undefined}
   */
  // eslint-disable-next-line no-unused-vars
  describe(ctx, output) {
    return null;
  }
}

function asOutput(value) {
  const output = typeof value === 'string' ? new Output(value) : value;
  if (!(output instanceof Output)) {
    throw new TypeError(`Report.run must return a jobhost Output or a string, not ${typeof value}`);
  }
  if (typeof output.summary !== 'string') {
    throw new TypeError('Output.summary must be a string');
  }
  if (output.cursor !== null && output.cursor !== undefined && typeof output.cursor !== 'string') {
    throw new TypeError('Output.cursor must be a string or null');
  }
  return output;
}

/**
 * Says an error that is not a `JobhostError` on stderr (its name, message
 * and stack) before it traps the component: the host shows the guest's
 * stderr in the failure, and does not retry it.
 */
function uncaught(e) {
  const text = e instanceof Error ? `${e.name}: ${e.message}\n${e.stack ?? ''}` : String(e);
  console.error(`Uncaught ${text.trimEnd()}`);
  return e;
}

/**
 * The world's exports for a report class (or a function making one):
 * `export const { run, describe } = jobhost.exportReport(MyReport);`
 * @param {(new () => Report) | (() => Report)} report
 */
export function exportReport(report) {
  let instance = null;
  const make = () => {
    if (instance === null) {
      // A class (a `Report` or anything with a `run` method) is made with
      // `new`; any other function is called to make one.
      const isClass = typeof report.prototype?.run === 'function';
      instance = isClass ? new report() : report();
    }
    return instance;
  };
  return {
    run(witCtx) {
      forget();
      const ctx = Context.fromWit(witCtx);
      let output;
      try {
        output = asOutput(make().run(ctx));
      } catch (e) {
        if (e instanceof JobhostError) {
          // componentize-js turns a thrown payload into the `err` case.
          throw e.toWit();
        }
        throw uncaught(e);
      }
      return { summary: output.summary, cursor: output.cursor ?? undefined };
    },
    describe(witCtx, witReport) {
      const ctx = Context.fromWit(witCtx);
      let text;
      try {
        text = make().describe(ctx, new Output(witReport.summary, witReport.cursor ?? null));
      } catch (e) {
        throw uncaught(e);
      }
      if (text !== null && text !== undefined && typeof text !== 'string') {
        throw uncaught(new TypeError('Report.describe must return a string or null'));
      }
      return text ?? undefined;
    },
  };
}
