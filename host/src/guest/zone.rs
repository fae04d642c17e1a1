//! The `zone` import: the UTC offsets of the run's time zone over a range of
//! instants, as spans of constant offset, so that a report turns instants
//! into local clock time without a time zone database of its own.
//!
//! The answer comes from the zone database the windows are computed with
//! (jiff's copy, compiled into the binary), and depends only on the zone
//! and the range: a replay computes it again rather than reading it back,
//! and the journal keeps each call (its range and answer) so that a flood
//! of calls is stopped at the journal's limit like any other. Each answer
//! holds at most [`MAX_SPANS`] spans, so one call costs the host a bounded
//! amount of work, whatever range it names.

use jiff::tz::{Offset, TimeZone};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// The most spans one answer holds; a caller asks again from the last
/// span's end.
pub const MAX_SPANS: usize = 1000;

/// The most transitions one span's search walks past (transitions that
/// change only a zone's abbreviation or its daylight-saving flag, not its
/// offset). The zone database has a few in a row at most; the bound keeps
/// a call's work finite whatever the database holds.
const MAX_SAME_OFFSET_TRANSITIONS: usize = 64;

/// A stretch `[start, end)` over which the zone's offset does not change,
/// not clipped to the range asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetSpan {
    /// The zone's transition into this offset ([`Timestamp::MIN`] when it
    /// has none earlier).
    pub start: Timestamp,
    /// The transition out of it ([`Timestamp::MAX`] when it has none
    /// later).
    pub end: Timestamp,
    /// Local time minus UTC, in seconds, east positive.
    pub offset_seconds: i32,
}

/// Why a range has no answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OffsetError {
    /// The range is inverted, or an instant is not one the host represents.
    InvalidRange(String),
}

/// The instant `seconds` and `nanoseconds` after the epoch, as a guest
/// names it (`which` says which end of the range, for the message).
///
/// # Errors
///
/// [`OffsetError::InvalidRange`] outside the years -9999 to 9999, or for
/// nanoseconds of a second or more.
pub fn instant(which: &str, seconds: i64, nanoseconds: u32) -> Result<Timestamp, OffsetError> {
    i32::try_from(nanoseconds)
        .ok()
        .filter(|&ns| ns < 1_000_000_000)
        .and_then(|ns| Timestamp::new(seconds, ns).ok())
        .ok_or_else(|| {
            OffsetError::InvalidRange(format!(
                "`{which}` ({seconds} s, {nanoseconds} ns) is not an instant between the years \
                 -9999 and 9999 with nanoseconds below 1000000000"
            ))
        })
}

/// The spans of `tz` that cover `[from, to)`, in order and without gaps,
/// the first containing `from` (so `from == to` gives the one span holding
/// `from`); at most [`MAX_SPANS`] of them.
///
/// # Errors
///
/// [`OffsetError::InvalidRange`] when `to` is before `from` (the WIT's
/// `end` and `start`).
pub fn offsets(
    tz: &TimeZone,
    from: Timestamp,
    to: Timestamp,
) -> Result<Vec<OffsetSpan>, OffsetError> {
    if to < from {
        return Err(OffsetError::InvalidRange(format!(
            "`end` ({to}) is before `start` ({from})"
        )));
    }
    let mut spans = Vec::new();
    let mut at = from;
    loop {
        let offset = tz.to_offset(at);
        let start = match spans.last() {
            None => span_start(tz, at, offset),
            Some(_) => at,
        };
        let end = span_end(tz, at, offset);
        spans.push(OffsetSpan {
            start,
            end,
            offset_seconds: offset.seconds(),
        });
        if end >= to || end == Timestamp::MAX || spans.len() == MAX_SPANS {
            return Ok(spans);
        }
        at = end;
    }
}

/// Where the span holding `at` (whose offset is `offset`) begins: the
/// earliest transition before it that leads into `offset` with nothing in
/// between that changes the offset.
fn span_start(tz: &TimeZone, at: Timestamp, offset: Offset) -> Timestamp {
    // `preceding` gives the transitions strictly before its argument: from
    // a nanosecond later, a transition at `at` itself is among them.
    let after = at
        .checked_add(SignedDuration::from_nanos(1))
        .unwrap_or(Timestamp::MAX);
    let mut start = Timestamp::MIN;
    for transition in tz.preceding(after).take(MAX_SAME_OFFSET_TRANSITIONS) {
        if transition.offset() != offset {
            break;
        }
        start = transition.timestamp();
    }
    start
}

/// Where the span holding `at` ends: the first later transition that
/// changes the offset from `offset`.
fn span_end(tz: &TimeZone, at: Timestamp, offset: Offset) -> Timestamp {
    tz.following(at)
        .take(MAX_SAME_OFFSET_TRANSITIONS)
        .find(|t| t.offset() != offset)
        .map_or(Timestamp::MAX, |t| t.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn berlin() -> TimeZone {
        TimeZone::get("Europe/Berlin").unwrap()
    }

    #[test]
    fn the_day_berlin_falls_back_is_two_spans_with_their_true_extent() {
        let spans = offsets(
            &berlin(),
            ts("2026-10-24T22:00:00Z"),
            ts("2026-10-25T23:00:00Z"),
        )
        .unwrap();
        assert_eq!(
            spans,
            [
                OffsetSpan {
                    start: ts("2026-03-29T01:00:00Z"),
                    end: ts("2026-10-25T01:00:00Z"),
                    offset_seconds: 7200,
                },
                OffsetSpan {
                    start: ts("2026-10-25T01:00:00Z"),
                    end: ts("2027-03-28T01:00:00Z"),
                    offset_seconds: 3600,
                },
            ]
        );
    }

    #[test]
    fn an_instant_on_a_transition_belongs_to_the_span_it_starts() {
        let at = ts("2026-03-29T01:00:00Z");
        let spans = offsets(&berlin(), at, at).unwrap();
        assert_eq!(
            spans,
            [OffsetSpan {
                start: at,
                end: ts("2026-10-25T01:00:00Z"),
                offset_seconds: 7200,
            }]
        );
        let before = ts("2026-03-29T00:59:59.999999999Z");
        let spans = offsets(&berlin(), before, before).unwrap();
        assert_eq!(spans.len(), 1);
        assert_eq!(
            (spans[0].end, spans[0].offset_seconds),
            (ts("2026-03-29T01:00:00Z"), 3600)
        );
    }

    #[test]
    fn utc_is_one_span_over_all_time() {
        let spans = offsets(&TimeZone::UTC, Timestamp::MIN, Timestamp::MAX).unwrap();
        assert_eq!(
            spans,
            [OffsetSpan {
                start: Timestamp::MIN,
                end: Timestamp::MAX,
                offset_seconds: 0,
            }]
        );
    }

    #[test]
    fn a_range_of_millennia_is_answered_in_bounded_pieces_that_join() {
        let tz = berlin();
        let first = offsets(&tz, Timestamp::MIN, Timestamp::MAX).unwrap();
        assert_eq!(first.len(), MAX_SPANS);
        assert!(first.windows(2).all(|w| w[0].end == w[1].start));
        let again = offsets(&tz, first[MAX_SPANS - 1].end, Timestamp::MAX).unwrap();
        assert_eq!(again[0].start, first[MAX_SPANS - 1].end);
        assert_ne!(again[0].offset_seconds, first[MAX_SPANS - 1].offset_seconds);
    }

    #[test]
    fn an_inverted_range_or_a_bad_instant_is_an_error_not_a_panic() {
        let err = offsets(
            &berlin(),
            ts("2026-10-25T00:00:00Z"),
            ts("2026-10-24T00:00:00Z"),
        );
        assert!(
            matches!(&err, Err(OffsetError::InvalidRange(m)) if m.contains("before")),
            "{err:?}"
        );
        for (s, ns) in [
            (i64::MAX, 0),
            (i64::MIN, 0),
            (0, 1_000_000_000),
            (0, u32::MAX),
        ] {
            assert!(instant("start", s, ns).is_err(), "{s} {ns}");
        }
        assert_eq!(instant("end", 0, 5).unwrap(), Timestamp::new(0, 5).unwrap());
    }
}
