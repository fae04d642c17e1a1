// The run's log: lines the host prints with the job's name and keeps with
// the run, each cut to the host's limit.

import * as wit from './host.js';

/** @param {string} level @param {unknown[]} parts */
function emit(level, parts) {
  wit.log.emit(level, parts.map(String).join(' '));
}

/** @param {...unknown} parts */
export const trace = (...parts) => emit('trace', parts);
/** @param {...unknown} parts */
export const debug = (...parts) => emit('debug', parts);
/** @param {...unknown} parts */
export const info = (...parts) => emit('info', parts);
/** @param {...unknown} parts */
export const warn = (...parts) => emit('warn', parts);
/** @param {...unknown} parts */
export const error = (...parts) => emit('error', parts);
