// Local clock time in the run's time zone, without a zone database.
//
// `ctx.window.local(ts)` is what the clocks of the window's zone
// (`ctx.window.timezone`) read at `ts`: a `LocalTime` with its date, time
// and the offset of that instant, so the two 02:30s of the night the clocks
// go back are told apart by their offsets. `ctx.window.localDate(ts)` is
// its date, `2026-11-08`.
//
// A component carries no zone database: the host, which computes the
// windows, answers the zone's UTC offsets as spans of constant offset (WIT
// `zone.offsets`), each with its true extent. The first call asks for the
// window's spans and keeps them for the run; an instant none of them holds
// is asked for once more. Natively, `jobhost/testing`'s fake host answers
// from node's own zone data.

import * as wit from './host.js';
import { InvalidData, SourceFailed } from './errors.js';

const pad = (n, width = 2) => String(n).padStart(width, '0');

/** What the clocks of a zone read at an instant. */
export class LocalTime {
  /** @param {number} seconds @param {number} nanoseconds @param {number} offsetSeconds */
  constructor(seconds, nanoseconds, offsetSeconds) {
    const local = seconds + offsetSeconds;
    const days = Math.floor(local / 86_400);
    const secs = local - days * 86_400;
    // Civil from days (Howard Hinnant's algorithm), proleptic Gregorian.
    const z = days + 719_468;
    const era = Math.floor(z / 146_097);
    const doe = z - era * 146_097;
    const yoe = Math.floor((doe - Math.floor(doe / 1_460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
    const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
    const mp = Math.floor((5 * doy + 2) / 153);
    this.day = doy - Math.floor((153 * mp + 2) / 5) + 1;
    this.month = mp < 10 ? mp + 3 : mp - 9;
    this.year = yoe + era * 400 + (this.month <= 2 ? 1 : 0);
    this.hour = Math.floor(secs / 3600);
    this.minute = Math.floor(secs / 60) % 60;
    this.second = secs % 60;
    this.nanosecond = nanoseconds;
    /** Local time minus UTC, in seconds, east positive. */
    this.offsetSeconds = offsetSeconds;
    Object.freeze(this);
  }

  /** The date, `2026-11-08`. */
  get date() {
    return `${pad(this.year, 4)}-${pad(this.month)}-${pad(this.day)}`;
  }

  /** RFC 3339 with the offset: `2026-10-25T02:30:00+01:00`. */
  toString() {
    const sign = this.offsetSeconds < 0 ? '-' : '+';
    const off = Math.abs(this.offsetSeconds);
    const zone = `${sign}${pad(Math.floor(off / 3600))}:${pad(Math.floor(off / 60) % 60)}`;
    return `${this.date}T${pad(this.hour)}:${pad(this.minute)}:${pad(this.second)}${zone}`;
  }
}

/** `ts` as [seconds, nanoseconds]: an `Instant`, Unix seconds or a `Date`. */
function asInstant(ts) {
  if (typeof ts === 'number' && Number.isInteger(ts)) return [ts, 0];
  if (typeof ts === 'bigint') return [Number(ts), 0];
  if (ts instanceof Date) {
    const ms = ts.getTime();
    return [Math.floor(ms / 1000), (ms - Math.floor(ms / 1000) * 1000) * 1e6];
  }
  if (ts && typeof ts.seconds === 'number' && typeof ts.nanoseconds === 'number') {
    return [ts.seconds, ts.nanoseconds];
  }
  throw new TypeError(`local: give an Instant, whole Unix seconds or a Date, not ${String(ts)}`);
}

const before = (a, b) => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);

let kept = { zone: null, spans: [] };

/** Forgets the spans kept (a new run). */
export function forget() {
  kept = { zone: null, spans: [] };
}

function find(at) {
  return kept.spans.find((s) => !before(at, s.start) && before(at, s.end)) ?? null;
}

function ask(start, end) {
  let answer;
  try {
    answer = wit.zone.offsets(
      { seconds: BigInt(start[0]), nanoseconds: start[1] },
      { seconds: BigInt(end[0]), nanoseconds: end[1] },
    );
  } catch (e) {
    const payload = e && typeof e === 'object' && 'payload' in e ? e.payload : undefined;
    if (payload) {
      throw new InvalidData(`cannot tell the local time of ${start[0]} s after the epoch: ${payload.val}`);
    }
    throw e;
  }
  for (const s of answer) {
    const span = {
      start: [Number(s.start.seconds), s.start.nanoseconds],
      end: [Number(s.end.seconds), s.end.nanoseconds],
      offset: s.offsetSeconds,
    };
    if (before(span.start, span.end) && find(span.start) === null) kept.spans.push(span);
  }
}

/** What `Window.local` returns (see the module's docs). */
export function local(zone, window, ts) {
  const at = asInstant(ts);
  if (kept.zone !== zone) {
    kept = { zone, spans: [] };
  }
  let span = find(at);
  if (span === null && kept.spans.length === 0) {
    ask([window.start.seconds, window.start.nanoseconds], [window.end.seconds, window.end.nanoseconds]);
    span = find(at);
  }
  if (span === null) {
    ask(at, at);
    span = find(at);
  }
  if (span === null) {
    throw new SourceFailed(`the host gave no offset of \`${zone}\` for ${at[0]} s after the epoch`);
  }
  return new LocalTime(at[0], at[1], span.offset);
}
