// Messages for the job's destinations.
//
// Nothing is sent during the run: `send` stages the message, the host
// stores it with the report when the run commits and delivers it
// afterwards, with the idempotency key `<window key>#<sequence number>`.

import * as wit from './host.js';
import { sendFailed } from './errors.js';

const utf8 = new TextEncoder();

/**
 * Stages `body` (bytes, or text sent as UTF-8) for `destination` with the
 * MIME type `contentType`; returns its sequence number in the run, from 1.
 * Throws `SendFailed` (its `reason` the WIT `send-error` case) when the
 * host refuses it.
 * @param {string} destination
 * @param {string | Uint8Array} body
 * @param {string} contentType
 * @returns {number}
 */
export function send(destination, body, contentType) {
  const bytes = typeof body === 'string' ? utf8.encode(body) : body;
  if (!(bytes instanceof Uint8Array)) {
    throw new TypeError('send: the body must be a string or a Uint8Array');
  }
  try {
    return wit.outbox.send(destination, bytes, contentType);
  } catch (e) {
    const payload = e && typeof e === 'object' && 'payload' in e ? e.payload : undefined;
    if (payload && typeof payload.tag === 'string') {
      throw sendFailed(payload);
    }
    throw e;
  }
}
