//! A test-only report: counts the window's rows by the local hour of their
//! `ts` (Unix seconds) in the window's zone, with `Window::local`. Its twin
//! in Python, `tests/guests/python-local-hours`, must give the same summary
//! byte for byte: one line per hour that has rows, in time order, `<the
//! hour's start, RFC 3339> <rows>`. On the day the clocks go back the
//! repeated hour is two lines, told apart by their offsets.

use jobhost_sdk::{Context, Error, Output, Report};

#[derive(Default)]
struct LocalHours;

impl Report for LocalHours {
    fn run(&mut self, ctx: &Context) -> Result<Output, Error> {
        let mut hours: Vec<(String, u64)> = Vec::new();
        let mut source = jobhost_sdk::open()?;
        for batch in source.batches() {
            let batch = batch?;
            for ts in batch.integers("ts")?.iter().flatten() {
                let mut local = ctx
                    .window
                    .local(jobhost_sdk::Instant::from_unix_seconds(ts))?;
                (local.minute, local.second, local.nanosecond) = (0, 0, 0);
                let hour = local.to_string();
                match hours.last_mut() {
                    Some((last, n)) if *last == hour => *n += 1,
                    _ => hours.push((hour, 1)),
                }
            }
        }
        let lines: Vec<String> = hours.iter().map(|(h, n)| format!("{h} {n}")).collect();
        Ok(Output::new(lines.join("\n")))
    }
}

jobhost_sdk::export!(LocalHours);
