// Types of the jobhost JavaScript SDK, for reports written in TypeScript.

export const VERSION: string;

/** The kinds of values a column holds. */
export declare const ColumnKind: {
  readonly INTEGER: 'integer';
  readonly REAL: 'real';
  readonly TEXT: 'text';
  readonly BLOB: 'blob';
};
export type ColumnKind = (typeof ColumnKind)[keyof typeof ColumnKind];

/** A point in time, in UTC: whole seconds since 1970 plus nanoseconds. */
export declare class Instant {
  constructor(seconds: number, nanoseconds?: number);
  readonly seconds: number;
  readonly nanoseconds: number;
  /** Milliseconds since 1970, as `Date` counts them. */
  readonly unixMillis: number;
  toDate(): Date;
}

/** The window a run reports on: `[start, end)` in `timezone`. */
export declare class Window {
  readonly job: string;
  readonly key: string;
  readonly label: string;
  readonly start: Instant;
  readonly end: Instant;
  readonly timezone: string;
  /** What the clocks of the window's zone read at `ts`, from the host's offsets. */
  local(ts: Instant | number | bigint | Date): LocalTime;
  /** The date of `local(ts)`, `2026-11-08`. */
  localDate(ts: Instant | number | bigint | Date): string;
}

/** What the clocks of a zone read at an instant, with its offset. */
export declare class LocalTime {
  readonly year: number;
  readonly month: number;
  readonly day: number;
  readonly hour: number;
  readonly minute: number;
  readonly second: number;
  readonly nanosecond: number;
  /** Local time minus UTC, in seconds, east positive. */
  readonly offsetSeconds: number;
  /** The date, `2026-11-08`. */
  readonly date: string;
  /** RFC 3339 with the offset: `2026-10-25T02:30:00+01:00`. */
  toString(): string;
}

/** Everything the host tells a report about its run. */
export declare class Context {
  readonly window: Window;
  readonly now: Instant;
  readonly cursor: string | null;
  readonly attempt: number;
  readonly destinations: readonly string[];
  readonly params: Readonly<Record<string, string>>;
  /** The parameter `name` from the job's `[params]`, or `undefined`. */
  param(name: string): string | undefined;
}

/** What a run produces: its summary text, and the job's new cursor. */
export declare class Output {
  constructor(summary: string, cursor?: string | null);
  readonly summary: string;
  readonly cursor: string | null;
}

/** One column of the source: its name and kind. */
export declare class ColumnInfo {
  constructor(name: string, kind: ColumnKind);
  readonly name: string;
  readonly kind: ColumnKind;
}

/** A column, by name or by position (from 0). */
export type Key = string | number;
/** A value of any column. */
export type Value = number | bigint | string | Uint8Array | null;

/** A run of consecutive rows of the query's result, decoded by column. */
export declare class Batch {
  /** How many rows the batch holds. */
  readonly length: number;
  /** The source row the batch starts at. */
  readonly firstRow: number;
  columns(): ColumnInfo[];
  hasColumn(name: string): boolean;
  hasNulls(key: Key): boolean;
  kind(key: Key): ColumnKind;
  /** Every value, whatever the kind; an integer beyond 2^53 as a bigint. */
  column(key: Key): Value[];
  /** Integers as numbers; throws `InvalidData` for one beyond 2^53. */
  integers(key: Key): (number | null)[];
  bigints(key: Key): (bigint | null)[];
  reals(key: Key): (number | null)[];
  texts(key: Key): (string | null)[];
  blobs(key: Key): (Uint8Array | null)[];
  row(index: number): Record<string, Value>;
  rows(): IterableIterator<Record<string, Value>>;
  [Symbol.iterator](): IterableIterator<Record<string, Value>>;
}

/** The window's rows: its columns, and its batches in order. */
export declare class Source {
  columns(): ColumnInfo[];
  /** The next batch, or `null` once every row has been read. */
  nextBatch(maxRows?: number): Batch | null;
  batches(maxRows?: number): IterableIterator<Batch>;
  readonly rowsRead: number;
  /** Closes the cursor, so that the source can be opened again. */
  close(): void;
}

/** Rows asked for per batch. */
export const BATCH_ROWS: number;

/** Opens the window's rows. Throws `SourceFailed` when the host cannot. */
export function open(): Source;

/** Stages a message; returns its sequence number in the run, from 1. */
export function send(destination: string, body: string | Uint8Array, contentType: string): number;

export declare namespace log {
  function trace(...parts: unknown[]): void;
  function debug(...parts: unknown[]): void;
  function info(...parts: unknown[]): void;
  function warn(...parts: unknown[]): void;
  function error(...parts: unknown[]): void;
}

/** A report: override `run` (and, for a digest, `describe`). */
export declare class Report {
  run(ctx: Context): Output | string;
  describe(ctx: Context, output: Output): string | null | undefined;
}

/** The world's exports for a report class (or a function making one). */
export function exportReport(report: (new () => Report) | (() => Report)): {
  run(ctx: unknown): unknown;
  describe(ctx: unknown, report: unknown): string | undefined;
};

/** The base of the errors that fail a run with a `run-error`. */
export declare class JobhostError extends Error {
  readonly kind: 'invalid-data' | 'source-failed' | 'other';
  readonly retryable: boolean;
}
/** The rows are wrong: not retried. */
export declare class InvalidData extends JobhostError {}
/** Reading the source failed: retried. */
export declare class SourceFailed extends JobhostError {}
/** Anything else that fails the run: retried. */
export declare class ReportError extends JobhostError {}
export declare class MalformedBatch extends SourceFailed {
  readonly column: string | null;
  readonly row: number | null;
  readonly entry: number | null;
}
export declare class SendFailed extends ReportError {
  readonly reason: string;
  readonly value: unknown;
}
/** A mistake in the report itself, which no retry mends. */
export declare class ProgrammingError extends Error {}
export declare class ColumnNotFound extends ProgrammingError {}
export declare class WrongKind extends ProgrammingError {}
