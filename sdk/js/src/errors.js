// Errors a report raises, and the SDK's own.
//
// A `JobhostError` thrown from `run` becomes the WIT `run-error` case its
// `kind` names, and fails the run: `invalid-data` (the rows are wrong: not
// retried), `source-failed` (reading them failed: retried) or `other`
// (retried). Anything else thrown from `run` is a bug in the report: its
// name, message and stack go to stderr and the component traps (not
// retried); `ColumnNotFound` and `WrongKind`, mistakes no retry mends, are
// such errors.

/** The base of the errors that fail a run with a `run-error`. */
export class JobhostError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = new.target.name;
  }

  /** The WIT `run-error` case. */
  get kind() {
    return 'other';
  }

  /** Whether the host runs the window again after this error. */
  get retryable() {
    return this.kind !== 'invalid-data';
  }

  /** The WIT value, as componentize-js expects a thrown error payload. */
  toWit() {
    return { tag: this.kind, val: this.message };
  }
}

/** The rows are wrong: a report of them would be wrong. Not retried. */
export class InvalidData extends JobhostError {
  get kind() {
    return 'invalid-data';
  }
}

/** Reading the source failed. Retried. */
export class SourceFailed extends JobhostError {
  get kind() {
    return 'source-failed';
  }
}

/** Anything else that fails the run. Retried. */
export class ReportError extends JobhostError {}

/**
 * A batch the host sent does not hold what the WIT promises: `column`
 * names the column, `row` (a source row) or `entry` (of a dictionary)
 * where, when known.
 */
export class MalformedBatch extends SourceFailed {
  /**
   * @param {string} message
   * @param {{column?: string, row?: number, entry?: number}} [where]
   */
  constructor(message, where = {}) {
    super(message);
    this.column = where.column ?? null;
    this.row = where.row ?? null;
    this.entry = where.entry ?? null;
  }
}

/**
 * The host refused a message: `reason` is the WIT `send-error` case
 * (`unknown-destination`, `too-large`, `too-many-messages`,
 * `invalid-content-type`) and `value` its payload.
 */
export class SendFailed extends ReportError {
  /**
   * @param {string} message
   * @param {string} reason
   * @param {unknown} [value]
   */
  constructor(message, reason, value = null) {
    super(message);
    this.reason = reason;
    this.value = value;
  }
}

/** A mistake in the report itself, which no retry mends. */
export class ProgrammingError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = new.target.name;
  }
}

/** A column was named that the batch does not have. */
export class ColumnNotFound extends ProgrammingError {}

/** A column was asked for as another kind than it holds. */
export class WrongKind extends ProgrammingError {}

/**
 * The error a WIT `send-error` stands for.
 * @param {{tag: string, val: unknown}} e
 */
export function sendFailed(e) {
  const text = {
    'unknown-destination': (v) => `unknown destination \`${v}\``,
    'too-large': (v) => `body is larger than ${v} bytes`,
    'too-many-messages': (v) => `the run already staged the maximum of ${v} messages`,
    'invalid-content-type': (v) => `invalid content type \`${v}\``,
  }[e.tag];
  return new SendFailed(text ? text(e.val) : `send failed: ${e.tag}`, e.tag, e.val ?? null);
}

/**
 * The text of a WIT `source-error`, as the reference report words it.
 * @param {{tag: string, val?: unknown}} e
 */
export function sourceErrorText(e) {
  switch (e.tag) {
    case 'not-configured':
      return 'the job declares no data source';
    case 'query-failed':
      return `query failed: ${e.val}`;
    case 'type-mismatch':
      return `type mismatch: ${e.val}`;
    case 'invalid-state':
      return `invalid state: ${e.val}`;
    case 'other':
      return `${e.val}`;
    default:
      return `source error: ${e.tag}`;
  }
}
