// What the host tells a report: its window, clock, parameters and columns,
// and what a report returns.

import * as zone from './zone.js';

/** The kinds of values a column holds. */
export const ColumnKind = Object.freeze({
  INTEGER: 'integer',
  REAL: 'real',
  TEXT: 'text',
  BLOB: 'blob',
});

/** A point in time, in UTC: whole seconds since 1970 plus nanoseconds. */
export class Instant {
  /**
   * @param {number} seconds
   * @param {number} [nanoseconds]
   */
  constructor(seconds, nanoseconds = 0) {
    this.seconds = seconds;
    this.nanoseconds = nanoseconds;
    Object.freeze(this);
  }

  /** @param {{seconds: bigint | number, nanoseconds: number}} v */
  static fromWit(v) {
    return new Instant(Number(v.seconds), v.nanoseconds);
  }

  /** Milliseconds since 1970, as `Date` counts them. */
  get unixMillis() {
    return this.seconds * 1000 + Math.floor(this.nanoseconds / 1e6);
  }

  /** The instant as a `Date`. */
  toDate() {
    return new Date(this.unixMillis);
  }
}

/** The window a run reports on: `[start, end)` in `timezone`. */
export class Window {
  /** @param {{job: string, key: string, label: string, start: Instant, end: Instant, timezone: string}} w */
  constructor(w) {
    this.job = w.job;
    this.key = w.key;
    this.label = w.label;
    this.start = w.start;
    this.end = w.end;
    this.timezone = w.timezone;
    Object.freeze(this);
  }

  /**
   * What the clocks of the window's zone read at `ts` (an `Instant`, whole
   * Unix seconds or a `Date`): a `LocalTime` with the offset of that
   * instant, daylight saving included, from the host's zone offsets.
   */
  local(ts) {
    return zone.local(this.timezone, this, ts);
  }

  /** The date of `local(ts)`, `2026-11-08`: the day of the window's calendar. */
  localDate(ts) {
    return this.local(ts).date;
  }

  /** @param {any} w the WIT `window` */
  static fromWit(w) {
    return new Window({
      job: w.job,
      key: w.key,
      label: w.label,
      start: Instant.fromWit(w.start),
      end: Instant.fromWit(w.end),
      timezone: w.timezone,
    });
  }
}

/** Everything the host tells a report about its run. */
export class Context {
  /**
   * @param {{window: Window, now: Instant, cursor?: string | null, attempt?: number,
   *   destinations?: string[], params?: Record<string, string> | [string, string][]}} c
   */
  constructor(c) {
    this.window = c.window;
    this.now = c.now;
    this.cursor = c.cursor ?? null;
    this.attempt = c.attempt ?? 1;
    this.destinations = Object.freeze([...(c.destinations ?? [])]);
    const params = Array.isArray(c.params) ? c.params : Object.entries(c.params ?? {});
    this.params = Object.freeze(Object.fromEntries(params));
    Object.freeze(this);
  }

  /** @param {any} c the WIT `run-context` */
  static fromWit(c) {
    return new Context({
      window: Window.fromWit(c.window),
      now: Instant.fromWit(c.now),
      cursor: c.cursor ?? null,
      attempt: c.attempt,
      destinations: c.destinations,
      params: c.params,
    });
  }

  /**
   * The parameter `name` from the job's `[params]`, or `undefined`.
   * @param {string} name
   * @returns {string | undefined}
   */
  param(name) {
    return Object.hasOwn(this.params, name) ? this.params[name] : undefined;
  }
}

/** What a run produces: its summary text, and the job's new cursor. */
export class Output {
  /**
   * @param {string} summary
   * @param {string | null} [cursor] `null` keeps the job's cursor
   */
  constructor(summary, cursor = null) {
    this.summary = summary;
    this.cursor = cursor;
    Object.freeze(this);
  }
}

/** One column of the source: its name and kind. */
export class ColumnInfo {
  /**
   * @param {string} name
   * @param {string} kind one of `ColumnKind`
   */
  constructor(name, kind) {
    this.name = name;
    this.kind = kind;
    Object.freeze(this);
  }
}
