// The JavaScript sandbox probe: what a report sees and how its errors
// read, chosen by the `probe` parameter.
import * as jobhost from 'jobhost';

function inner(row) {
  throw new TypeError(`bad row ${row}: amount is negative`);
}

const probes = {
  // An error the report did not mean to throw.
  throw() {
    inner(7);
  },
  // A permanent failure: the rows are wrong.
  invalid() {
    throw new jobhost.InvalidData('region is missing');
  },
  // What the sandbox gives: the run's clock, and nothing of the host.
  escape() {
    const got = {};
    got['Date.now()'] = Date.now();
    got['typeof fetch'] = typeof globalThis.fetch;
    got['typeof process'] = typeof globalThis.process;
    got['typeof require'] = typeof globalThis.require;
    return got;
  },
  // Local times from the host's zone offsets: the two 02:30s of the night
  // Europe/Berlin's clocks went back (2026-10-25, at 01:00 UTC).
  local(ctx) {
    return [1_792_888_200, 1_792_891_800].map((t) => String(ctx.window.local(t)));
  },
  // Each refusal of the host arrives as its own case.
  'host-errors'() {
    const got = {};
    const attempt = (name, f) => {
      try {
        f();
        got[name] = { ok: true };
      } catch (e) {
        got[name] = { error: e.constructor.name, reason: e.reason ?? null, message: e.message };
      }
    };
    attempt('unknown-destination', () => jobhost.send('nowhere', 'x', 'text/plain'));
    attempt('invalid-content-type', () => jobhost.send('digest', 'x', 'plain'));
    attempt('too-large', () => jobhost.send('digest', new Uint8Array(4 * 1024 * 1024 + 1), 'text/plain'));
    attempt('too-many-messages', () => {
      for (let i = 0; i < 101; i++) jobhost.send('digest', `${i}`, 'text/plain');
    });
    attempt('open-twice', () => {
      const first = jobhost.open();
      first.columns();
      jobhost.open();
    });
    return got;
  },
};

class Probe extends jobhost.Report {
  run(ctx) {
    const probe = probes[ctx.param('probe') ?? ''];
    if (probe === undefined) {
      throw new jobhost.ReportError(`unknown probe \`${ctx.param('probe')}\``);
    }
    return new jobhost.Output(JSON.stringify(probe(ctx) ?? null));
  }
}

export const { run, describe } = jobhost.exportReport(Probe);
