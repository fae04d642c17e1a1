// The three small formats of the digest, done by hand as in the Rust
// reference (`guest-report/src/format.rs`), byte for byte:
//
// - `money`: two decimals, half away from zero on the shortest decimal that
//   reads back as the amount (`1.005` -> `1.01`), never `-0.00`;
// - `rfc3339`: unix seconds as `2026-11-08T13:05:00Z` for the years 0000
//   to 9999 (civil-from-days, not `Date`);
// - `jsonString`: a JSON string literal escaped as the Rust reference does.

/** The earliest instant `rfc3339` formats: `0000-01-01T00:00:00Z`. */
export const MIN_RFC3339_SECONDS = -62_167_219_200;
/** The latest instant `rfc3339` formats: `9999-12-31T23:59:59Z`. */
export const MAX_RFC3339_SECONDS = 253_402_300_799;

const SECONDS_PER_DAY = 86_400;

const floorDiv = (a, b) => Math.floor(a / b);

/** The proleptic Gregorian [year, month, day] of `days` after 1970-01-01. */
export function civilFromDays(days) {
  const z = days + 719_468;
  const era = floorDiv(z, 146_097);
  const doe = z - era * 146_097;
  const yoe = floorDiv(doe - floorDiv(doe, 1_460) + floorDiv(doe, 36_524) - floorDiv(doe, 146_096), 365);
  const doy = doe - (365 * yoe + floorDiv(yoe, 4) - floorDiv(yoe, 100));
  const mp = floorDiv(5 * doy + 2, 153);
  const day = doy - floorDiv(153 * mp + 2, 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  return [year, month, day];
}

const pad = (n, width) => String(n).padStart(width, '0');

/** Unix seconds as an RFC 3339 UTC timestamp, or null outside 0000-9999. */
export function rfc3339(seconds) {
  if (!(MIN_RFC3339_SECONDS <= seconds && seconds <= MAX_RFC3339_SECONDS)) {
    return null;
  }
  const days = floorDiv(seconds, SECONDS_PER_DAY);
  const secs = seconds - days * SECONDS_PER_DAY;
  const [year, month, day] = civilFromDays(days);
  return (
    `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}T` +
    `${pad(floorDiv(secs, 3600), 2)}:${pad(floorDiv(secs, 60) % 60, 2)}:${pad(secs % 60, 2)}Z`
  );
}

/** The exact value of the finite double `x` as [mantissa, exponent of 2]. */
function exact(x) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & ((1n << 52n) - 1n);
  return biased === 0 ? [fraction, -1074] : [fraction | (1n << 52n), biased - 1075];
}

/**
 * [digits, exponent] with `x == digits * 10**exponent` read back, digits
 * as few as possible: JavaScript's own shortest form, except that where two
 * candidates of that length are equally near `x`, Rust takes the larger.
 * That can happen only from 16 digits on.
 */
function shortestDigits(x) {
  const text = x.toString();
  const [mantissa, exponentText] = text.split('e');
  const [integral, fractionText = ''] = mantissa.split('.');
  let digits = BigInt(integral + fractionText);
  const exp = (exponentText ? Number(exponentText) : 0) - fractionText.length;
  if (digits >= 10n ** 15n) {
    const up = digits + 1n;
    if (up.toString().length === digits.toString().length && Number(`${up}e${exp}`) === x) {
      // Equally near: 2x == (2 digits + 1) * 10^exp, compared exactly.
      const [m, q] = exact(x);
      let left = 2n * m;
      let right = 2n * digits + 1n;
      if (q >= 0) left <<= BigInt(q);
      else right <<= BigInt(-q);
      if (exp >= 0) right *= 10n ** BigInt(exp);
      else left *= 10n ** BigInt(-exp);
      if (left === right) {
        digits = up;
      }
    }
  }
  return [digits, exp];
}

/**
 * The shortest decimal that reads back as the finite, non-negative `x`, in
 * plain notation, as Rust's `Display` for `f64` writes it.
 */
export function shortestDecimal(x) {
  const [digits, exp] = shortestDigits(x);
  const text = digits.toString();
  if (exp >= 0) {
    return digits ? text + '0'.repeat(exp) : '0';
  }
  const point = text.length + exp;
  if (point <= 0) {
    return '0.' + '0'.repeat(-point) + text;
  }
  return text.slice(0, point) + '.' + text.slice(point);
}

/**
 * `amount` rounded to two decimals, half away from zero, with exactly two
 * decimals (`1234.50`); null for infinities and NaN.
 */
export function money(amount) {
  if (!Number.isFinite(amount)) {
    return null;
  }
  const shortest = shortestDecimal(Math.abs(amount));
  const [intPart, frac0 = ''] = shortest.split('.');
  const frac = (frac0 + '000').slice(0, 3);
  const digits = [...(intPart + frac.slice(0, 2))].map((c) => c.charCodeAt(0));
  if (frac[2] >= '5') {
    let i = digits.length;
    for (;;) {
      if (i === 0) {
        digits.unshift(0x31);
        break;
      }
      i -= 1;
      if (digits[i] === 0x39) {
        digits[i] = 0x30;
      } else {
        digits[i] += 1;
        break;
      }
    }
  }
  const text = String.fromCharCode(...digits);
  const isZero = /^0*$/.test(text);
  const negative = amount < 0 || Object.is(amount, -0);
  const sign = negative && !isZero ? '-' : '';
  return `${sign}${text.slice(0, -2)}.${text.slice(-2)}`;
}

const ESCAPES = new Map([
  ['"', '\\"'],
  ['\\', '\\\\'],
  ['\n', '\\n'],
  ['\r', '\\r'],
  ['\t', '\\t'],
  ['\b', '\\b'],
  ['\f', '\\f'],
]);

/** `value` as a JSON string literal, quotes included. */
export function jsonString(value) {
  // eslint-disable-next-line no-control-regex
  const escaped = value.replace(/[\u0000-\u001f"\\]/g, (c) =>
    ESCAPES.get(c) ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return `"${escaped}"`;
}
