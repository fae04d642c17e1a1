//! `Window::local` against the spans a test gives, as the host would give
//! them: the night clocks go back and the night they go forward in
//! Europe/Berlin, the edges of a span, and an instant outside the spans
//! kept, which is asked for again.

use crate::testing::{self, UTC};
use crate::{ErrorKind, Instant, OffsetSpan, Window};

fn at(seconds: i64) -> Instant {
    Instant::from_unix_seconds(seconds)
}

/// Europe/Berlin's spans of 2026 (as the host answers them for the zone).
const SPRING_2026: i64 = 1_774_746_000; // 2026-03-29T01:00:00Z
const AUTUMN_2026: i64 = 1_792_890_000; // 2026-10-25T01:00:00Z
const SPRING_2027: i64 = 1_806_195_600; // 2027-03-28T01:00:00Z
const AUTUMN_2025: i64 = 1_761_440_400; // 2025-10-26T01:00:00Z

fn berlin() -> Vec<OffsetSpan> {
    vec![
        OffsetSpan {
            start: at(AUTUMN_2025),
            end: at(SPRING_2026),
            offset_seconds: 3600,
        },
        OffsetSpan {
            start: at(SPRING_2026),
            end: at(AUTUMN_2026),
            offset_seconds: 7200,
        },
        OffsetSpan {
            start: at(AUTUMN_2026),
            end: at(SPRING_2027),
            offset_seconds: 3600,
        },
    ]
}

/// The Berlin day 2026-10-25, which has 25 hours.
fn fall_back_day() -> Window {
    Window {
        job: "signups".into(),
        key: "signups:2026-10-25".into(),
        label: "2026-10-25".into(),
        start: at(1_792_879_200), // 2026-10-24T22:00:00Z
        end: at(1_792_969_200),   // 2026-10-25T23:00:00Z
        timezone: "Europe/Berlin".into(),
    }
}

fn local(window: &Window, seconds: i64) -> String {
    window.local(at(seconds)).expect("answered").to_string()
}

#[test]
fn the_hour_clocks_go_back_reads_twice_with_two_offsets() {
    testing::set_zone("Europe/Berlin", berlin());
    let day = fall_back_day();
    assert_eq!(local(&day, day.start.seconds), "2026-10-25T00:00:00+02:00");
    assert_eq!(local(&day, AUTUMN_2026 - 3600), "2026-10-25T02:00:00+02:00");
    assert_eq!(local(&day, AUTUMN_2026 - 1), "2026-10-25T02:59:59+02:00");
    assert_eq!(local(&day, AUTUMN_2026), "2026-10-25T02:00:00+01:00");
    assert_eq!(local(&day, AUTUMN_2026 + 3599), "2026-10-25T02:59:59+01:00");
    assert_eq!(local(&day, AUTUMN_2026 + 3600), "2026-10-25T03:00:00+01:00");
    assert_eq!(
        local(&day, day.end.seconds - 1),
        "2026-10-25T23:59:59+01:00"
    );
    assert_eq!(local(&day, day.end.seconds), "2026-10-26T00:00:00+01:00");
    let twice = day.local(at(AUTUMN_2026 - 1800)).unwrap();
    let again = day.local(at(AUTUMN_2026 + 1800)).unwrap();
    assert_eq!((twice.hour, twice.minute), (again.hour, again.minute));
    assert_ne!(twice, again, "the offset tells them apart");
    assert_eq!(twice.date().to_string(), "2026-10-25");
    // The window's spans came in one request, and answered every instant.
    assert_eq!(testing::zone_requests(), [(day.start, day.end)]);
}

#[test]
fn the_hour_clocks_go_forward_is_never_read() {
    testing::set_zone("Europe/Berlin", berlin());
    let day = Window {
        start: at(1_774_738_800), // 2026-03-28T23:00:00Z
        end: at(1_774_821_600),   // 2026-03-29T22:00:00Z
        timezone: "Europe/Berlin".into(),
        ..Window::default()
    };
    assert_eq!(local(&day, SPRING_2026 - 1), "2026-03-29T01:59:59+01:00");
    assert_eq!(local(&day, SPRING_2026), "2026-03-29T03:00:00+02:00");
    let hours: Vec<u8> = (0..23)
        .map(|h| day.local(at(day.start.seconds + h * 3600)).unwrap().hour)
        .collect();
    assert!(!hours.contains(&2), "{hours:?}");
    assert_eq!(hours.len(), 23);
}

#[test]
fn an_instant_outside_the_spans_kept_is_asked_for_again() {
    testing::set_zone("Europe/Berlin", berlin());
    let day = fall_back_day();
    day.local(at(AUTUMN_2026)).unwrap();
    assert_eq!(testing::zone_requests().len(), 1);
    // In the winter span the window's request brought back whole: no call.
    assert_eq!(local(&day, SPRING_2027 - 1), "2027-03-28T01:59:59+01:00");
    assert_eq!(testing::zone_requests().len(), 1);
    // Last winter's span was not among the window's: asked for once.
    let a_year_back = AUTUMN_2025 + 86_400;
    assert_eq!(local(&day, a_year_back), "2025-10-27T02:00:00+01:00");
    assert_eq!(
        testing::zone_requests()[1],
        (at(a_year_back), at(a_year_back))
    );
    local(&day, AUTUMN_2025);
    assert_eq!(testing::zone_requests().len(), 2, "then kept");
    // Beyond the spans the zone has, the answer is an error, not a guess.
    let err = day.local(at(SPRING_2027)).expect_err("no span holds it");
    assert_eq!(err.kind(), ErrorKind::SourceFailed);
}

#[test]
fn utc_needs_no_zone_and_a_zone_not_given_says_how_to_give_it() {
    let utc = Window {
        timezone: UTC.into(),
        ..Window::default()
    };
    assert_eq!(local(&utc, AUTUMN_2026), "2026-10-25T01:00:00+00:00");
    let unknown = Window {
        timezone: "America/Lima".into(),
        ..Window::default()
    };
    let err = unknown.local(at(0)).expect_err("no host natively");
    assert_eq!(err.kind(), ErrorKind::Programming);
    assert!(err.message().contains("testing::set_zone"), "{err}");
}

#[test]
fn a_fixed_offset_holds_at_every_instant() {
    testing::set_fixed_offset("Asia/Kathmandu", 5 * 3600 + 45 * 60);
    let w = Window {
        timezone: "Asia/Kathmandu".into(),
        ..Window::default()
    };
    assert_eq!(local(&w, 0), "1970-01-01T05:45:00+05:45");
    assert_eq!(local(&w, -62_135_596_800), "0001-01-01T05:45:00+05:45");
}
