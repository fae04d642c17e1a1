//! Text formatting the digest's output depends on, done by hand.
//!
//! This module owns the three small formats the summary is written in:
//! money rounded to two decimals, instants as RFC 3339 UTC timestamps
//! (computed with a civil-from-days conversion, no time crate) and JSON
//! string literals. Each is deterministic: the same value always formats to
//! the same bytes, on every target.

#![forbid(unsafe_code)]

/// The earliest instant [`rfc3339`] can format: `0000-01-01T00:00:00Z`.
pub const MIN_RFC3339_SECONDS: i64 = -62_167_219_200;

/// The latest instant [`rfc3339`] can format: `9999-12-31T23:59:59Z`.
pub const MAX_RFC3339_SECONDS: i64 = 253_402_300_799;

const SECONDS_PER_DAY: i64 = 86_400;

/// The proleptic Gregorian date `(year, month, day)` of `days` days after
/// 1970-01-01, by Howard Hinnant's `civil_from_days` algorithm. Valid for
/// any `days` within ±2^60, far beyond what [`rfc3339`] accepts.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Shift the epoch to 0000-03-01 so that leap days fall at the end of
    // each (March-based) year, then split into 400-year eras.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, [0, 146096]
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // March-based month, [0, 11]
    let day = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Both narrowing casts are in range by the bounds noted above.
    (year, month as u32, day as u32)
}

/// Formats unix seconds as an RFC 3339 UTC timestamp such as
/// `2026-11-08T13:05:00Z`, or `None` when the instant lies outside the
/// years 0000 to 9999 that RFC 3339 can express.
pub fn rfc3339(seconds: i64) -> Option<String> {
    if !(MIN_RFC3339_SECONDS..=MAX_RFC3339_SECONDS).contains(&seconds) {
        return None;
    }
    let days = seconds.div_euclid(SECONDS_PER_DAY);
    let secs = seconds.rem_euclid(SECONDS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3_600,
        secs / 60 % 60,
        secs % 60
    ))
}

/// Rounds an amount of money to two decimals, half away from zero, and
/// formats it with exactly two decimals, for example `1234.50`; `None` for
/// infinities and NaN, which have no JSON form.
///
/// Rounding works on the shortest decimal that reads back as `amount`, not
/// on its binary value, so `1.005` (stored as 1.00499999…) rounds to `1.01`
/// as a person would expect. A result of zero never carries a minus sign.
pub fn money(amount: f64) -> Option<String> {
    if !amount.is_finite() {
        return None;
    }
    // Display for f64 prints the shortest round-trip decimal and never uses
    // exponent notation, so this is always `digits[.digits]`.
    let shortest = format!("{}", amount.abs());
    let (int_part, frac_part) = shortest.split_once('.').unwrap_or((&shortest, ""));
    let frac = frac_part.as_bytes();
    let digit = |i: usize| frac.get(i).copied().unwrap_or(b'0');
    let mut digits: Vec<u8> = int_part.bytes().collect();
    digits.push(digit(0));
    digits.push(digit(1));
    if digit(2) >= b'5' {
        // Add one cent, carrying through nines.
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let split = digits.len() - 2;
    let is_zero = digits.iter().all(|&d| d == b'0');
    let mut out = String::with_capacity(digits.len() + 2);
    if amount.is_sign_negative() && !is_zero {
        out.push('-');
    }
    // `digits` holds only ASCII digits, so each byte is one char.
    out.extend(digits[..split].iter().map(|&d| char::from(d)));
    out.push('.');
    out.extend(digits[split..].iter().map(|&d| char::from(d)));
    Some(out)
}

/// Appends `value` to `out` as a JSON string literal, quotes included.
pub fn push_json_string(out: &mut String, value: &str) {
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn days_in_month(year: i64, month: u32) -> u32 {
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        match month {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        }
    }

    #[test]
    fn the_epoch_and_known_instants_format_as_rfc3339() {
        assert_eq!(rfc3339(0).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(
            rfc3339(1_794_143_100).as_deref(),
            Some("2026-11-08T13:05:00Z")
        );
        assert_eq!(
            rfc3339(1_709_251_199).as_deref(),
            Some("2024-02-29T23:59:59Z")
        );
    }

    #[test]
    fn instants_before_1970_format_correctly() {
        assert_eq!(rfc3339(-1).as_deref(), Some("1969-12-31T23:59:59Z"));
        assert_eq!(
            rfc3339(-14_182_940).as_deref(),
            Some("1969-07-20T20:17:40Z")
        );
        assert_eq!(
            rfc3339(-2_203_891_200).as_deref(),
            Some("1900-03-01T00:00:00Z")
        );
        assert_eq!(
            rfc3339(-11_670_955_200).as_deref(),
            Some("1600-02-29T12:00:00Z")
        );
    }

    #[test]
    fn leap_years_follow_the_gregorian_rules() {
        // 2000 is a leap year (divisible by 400), 1900 and 2100 are not.
        assert_eq!(
            rfc3339(951_782_400).as_deref(),
            Some("2000-02-29T00:00:00Z")
        );
        assert_eq!(
            rfc3339(-2_203_891_200 - 86_400).as_deref(),
            Some("1900-02-28T00:00:00Z")
        );
        let mar_1_2100 = 4_107_542_400;
        assert_eq!(rfc3339(mar_1_2100).as_deref(), Some("2100-03-01T00:00:00Z"));
        assert_eq!(
            rfc3339(mar_1_2100 - 1).as_deref(),
            Some("2100-02-28T23:59:59Z")
        );
    }

    #[test]
    fn every_day_from_year_0_to_9999_follows_the_previous_one() {
        let first = MIN_RFC3339_SECONDS / SECONDS_PER_DAY;
        let last = MAX_RFC3339_SECONDS / SECONDS_PER_DAY;
        let mut prev = civil_from_days(first);
        assert_eq!(prev, (0, 1, 1));
        for days in first + 1..=last {
            let (y, m, d) = civil_from_days(days);
            let (py, pm, pd) = prev;
            let expected = if pd < days_in_month(py, pm) {
                (py, pm, pd + 1)
            } else if pm < 12 {
                (py, pm + 1, 1)
            } else {
                (py + 1, 1, 1)
            };
            assert_eq!((y, m, d), expected, "day {days}");
            prev = (y, m, d);
        }
        assert_eq!(prev, (9999, 12, 31));
    }

    #[test]
    fn instants_outside_years_0_to_9999_are_not_formatted() {
        assert_eq!(
            rfc3339(MIN_RFC3339_SECONDS).as_deref(),
            Some("0000-01-01T00:00:00Z")
        );
        assert_eq!(
            rfc3339(MAX_RFC3339_SECONDS).as_deref(),
            Some("9999-12-31T23:59:59Z")
        );
        assert_eq!(rfc3339(MIN_RFC3339_SECONDS - 1), None);
        assert_eq!(rfc3339(MAX_RFC3339_SECONDS + 1), None);
        assert_eq!(rfc3339(i64::MIN), None);
        assert_eq!(rfc3339(i64::MAX), None);
    }

    #[test]
    fn money_is_rounded_half_away_from_zero_to_two_decimals() {
        let cases = [
            (0.0, "0.00"),
            (12.0, "12.00"),
            (12.3, "12.30"),
            (1.005, "1.01"),
            (2.675, "2.68"),
            (0.125, "0.13"),
            (0.124_999, "0.12"),
            (99.995, "100.00"),
            (0.1 + 0.2, "0.30"),
            (-1.005, "-1.01"),
            (-0.004, "0.00"),
            (-0.0, "0.00"),
            (-12.5, "-12.50"),
            (1e-9, "0.00"),
            (1e21, "1000000000000000000000.00"),
        ];
        for (amount, expected) in cases {
            assert_eq!(money(amount).as_deref(), Some(expected), "{amount}");
        }
    }

    #[test]
    fn non_finite_money_has_no_form() {
        assert_eq!(money(f64::NAN), None);
        assert_eq!(money(f64::INFINITY), None);
        assert_eq!(money(f64::NEG_INFINITY), None);
    }

    #[test]
    fn json_strings_are_escaped() {
        let mut out = String::new();
        push_json_string(&mut out, "a\"b\\c\nd\u{1}é");
        assert_eq!(out, r#""a\"b\\c\nd\u0001é""#);
    }
}
