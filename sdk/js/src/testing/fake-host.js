// The host's interfaces, faked for native tests: a cursor over batches in
// the WIT shape, an outbox that keeps what is staged, and a log that keeps
// its lines. `jobhost/testing` sets it up for each run.

const state = {
  columns: null,
  batches: [],
  destinations: [],
  messages: [],
  logs: [],
  maxMessages: 100,
  open: false,
};

class ComponentError extends Error {
  constructor(payload) {
    super(`${payload.tag}: ${payload.val}`);
    this.payload = payload;
  }
}

/** Sets what the next run reads and may send to, and its zone. */
export function setUp({ columns = null, batches = [], destinations = [], maxMessages = 100, zone = 'UTC' }) {
  Object.assign(state, { columns, batches: [...batches], destinations, maxMessages, open: false, zone });
  state.messages = [];
  state.logs = [];
}

/** What the run staged and logged. */
export function taken() {
  return { messages: state.messages, logs: state.logs };
}

const DISPOSE = Symbol.dispose ?? Symbol.for('dispose');

class Cursor {
  columns() {
    return state.columns;
  }

  nextBatch() {
    return state.batches.length ? state.batches.shift() : undefined;
  }

  [DISPOSE]() {
    state.open = false;
  }
}

// jobhost:report/source
export function open() {
  if (state.columns === null) {
    throw new ComponentError({ tag: 'not-configured' });
  }
  if (state.open) {
    // As the host: one cursor at a time.
    throw new ComponentError({
      tag: 'invalid-state',
      val: 'a cursor is already open; drop it before opening another',
    });
  }
  state.open = true;
  return new Cursor();
}

// jobhost:report/outbox
export function send(destination, body, contentType) {
  if (!state.destinations.includes(destination)) {
    throw new ComponentError({ tag: 'unknown-destination', val: destination });
  }
  if (state.messages.length >= state.maxMessages) {
    throw new ComponentError({ tag: 'too-many-messages', val: state.maxMessages });
  }
  state.messages.push({ destination, body: Uint8Array.from(body), contentType });
  return state.messages.length;
}

// jobhost:report/log
export function emit(level, message) {
  state.logs.push({ level, message });
}

// jobhost:report/zone: node's own zone data answers, as the host would.
const formatters = new Map();

/** The offset (seconds, east positive) of `zone` at Unix second `t`. */
function offsetAt(zone, t) {
  let f = formatters.get(zone);
  if (f === undefined) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(zone, f);
  }
  const p = Object.fromEntries(f.formatToParts(new Date(t * 1000)).map((x) => [x.type, x.value]));
  return Date.UTC(+p.year, +p.month - 1, +p.day, +p.hour, +p.minute, +p.second) / 1000 - t;
}

const STEP = 3600; // no zone changes its offset twice within an hour
const HORIZON = 32 * 86_400; // how far a span is followed before it is cut

/** The first second after `inside` (offset `offset`) toward `outside` with another offset. */
function edge(zone, inside, outside, offset) {
  while (Math.abs(outside - inside) > 1) {
    const mid = Math.floor((inside + outside) / 2);
    if (offsetAt(zone, mid) === offset) inside = mid;
    else outside = mid;
  }
  return outside;
}

function spanAt(zone, t) {
  const offset = offsetAt(zone, t);
  let start = t - HORIZON;
  for (let s = t - STEP; s > t - HORIZON; s -= STEP) {
    if (offsetAt(zone, s) !== offset) {
      start = edge(zone, s + STEP, s, offset) + 1;
      break;
    }
  }
  let end = t + HORIZON;
  for (let s = t + STEP; s < t + HORIZON; s += STEP) {
    if (offsetAt(zone, s) !== offset) {
      end = edge(zone, s - STEP, s, offset);
      break;
    }
  }
  return { start, end, offset };
}

export function offsets(start, end) {
  const from = Number(start.seconds);
  const to = Number(end.seconds);
  if (to < from) {
    throw new ComponentError({ tag: 'invalid-range', val: 'end is before start' });
  }
  const out = [];
  let t = from;
  do {
    const span = spanAt(state.zone, t);
    out.push({
      start: { seconds: BigInt(span.start), nanoseconds: 0 },
      end: { seconds: BigInt(span.end), nanoseconds: 0 },
      offsetSeconds: span.offset,
    });
    t = span.end;
  } while (t <= to && out.length < 1000);
  return out;
}
