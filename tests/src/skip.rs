//! Skips, said one way. A test that cannot run here says so on stderr in a
//! `SKIPPED` line the test harness does not capture, so a skip is never
//! mistaken for a pass. A test whose server, browser or tool is missing
//! ([`missing`]) fails instead when the environment variable `CI` is set:
//! CI (`.ci/run`) provides every one of them, so there a missing one is a
//! broken machine, not a reason to pass. A condition CI is not expected to
//! provide ([`skipped`]) is a skip everywhere.

use std::io::Write;

/// Whether the tests run under CI: the variable `CI` is set and not empty.
pub fn under_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// `test` cannot run because something it needs is not here: `missing`
/// says what (`"JOBHOST_TEST_POSTGRES is not set"`), `how` how to provide
/// it. A visible skip; under CI a failure.
///
/// # Panics
///
/// Under CI, with one line naming the test, what is missing and how to
/// provide it.
#[track_caller]
pub fn missing(test: &str, missing: &str, how: &str) {
    missing_with(
        under_ci(),
        &mut std::io::stderr().lock(),
        test,
        missing,
        how,
    );
}

/// `test` (or a part of it) does not run here, for a reason CI is not
/// expected to remove (`why`): a visible skip, under CI too.
pub fn skipped(test: &str, why: &str) {
    say(&mut std::io::stderr().lock(), test, why);
}

/// [`missing`], with the CI check and the output as parameters.
#[track_caller]
fn missing_with(ci: bool, out: &mut dyn Write, test: &str, missing: &str, how: &str) {
    assert!(
        !ci,
        "{test}: {missing}; under CI (CI is set) a missing server or tool fails the test \
         instead of skipping it; {how}"
    );
    say(out, test, &format!("{missing}; {how}"));
}

/// The `SKIPPED` line, straight to the file descriptor: libtest captures
/// `eprintln!` of passing tests, and a skip must be seen.
fn say(out: &mut dyn Write, test: &str, why: &str) {
    let _ = writeln!(out, "SKIPPED {test}: {why}");
}

#[cfg(test)]
mod tests {
    use std::panic::{AssertUnwindSafe, catch_unwind};

    use super::*;

    const TEST: &str = "postgres::a_test";
    const MISSING: &str = "JOBHOST_TEST_POSTGRES is not set";
    const HOW: &str = "set it to a PostgreSQL server";

    #[test]
    fn under_ci_a_missing_server_fails_naming_the_test_what_and_how() {
        // `CI` is a parameter here: setting it in this process would reach
        // the tests running beside this one.
        let mut out = Vec::new();
        let caught = catch_unwind(AssertUnwindSafe(|| {
            missing_with(true, &mut out, TEST, MISSING, HOW);
        }))
        .expect_err("a failure");
        let failure = caught.downcast_ref::<String>().expect("a message");
        assert!(out.is_empty(), "nothing is said as a skip");
        assert!(
            failure.starts_with("postgres::a_test: JOBHOST_TEST_POSTGRES is not set;"),
            "{failure}"
        );
        assert!(failure.contains("under CI"), "{failure}");
        assert!(failure.ends_with(HOW), "{failure}");
        assert!(!failure.contains('\n'), "one line: {failure}");
    }

    #[test]
    fn without_ci_a_missing_server_skips_visibly() {
        let mut out = Vec::new();
        missing_with(false, &mut out, TEST, MISSING, HOW);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "SKIPPED postgres::a_test: JOBHOST_TEST_POSTGRES is not set; \
             set it to a PostgreSQL server\n"
        );
    }

    #[test]
    fn a_condition_ci_cannot_provide_skips_visibly() {
        let mut out = Vec::new();
        say(&mut out, "durable_store::t", "TMPDIR is on tmpfs");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "SKIPPED durable_store::t: TMPDIR is on tmpfs\n"
        );
    }
}
