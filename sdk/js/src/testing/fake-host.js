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

/** Sets what the next run reads and may send to. */
export function setUp({ columns = null, batches = [], destinations = [], maxMessages = 100 }) {
  Object.assign(state, { columns, batches: [...batches], destinations, maxMessages, open: false });
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
