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
};

class ComponentError extends Error {
  constructor(payload) {
    super(`${payload.tag}: ${payload.val}`);
    this.payload = payload;
  }
}

/** Sets what the next run reads and may send to. */
export function setUp({ columns = null, batches = [], destinations = [], maxMessages = 100 }) {
  Object.assign(state, { columns, batches: [...batches], destinations, maxMessages });
  state.messages = [];
  state.logs = [];
}

/** What the run staged and logged. */
export function taken() {
  return { messages: state.messages, logs: state.logs };
}

class Cursor {
  columns() {
    return state.columns;
  }

  nextBatch() {
    return state.batches.length ? state.batches.shift() : undefined;
  }
}

// jobhost:report/source
export function open() {
  if (state.columns === null) {
    throw new ComponentError({ tag: 'not-configured' });
  }
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
