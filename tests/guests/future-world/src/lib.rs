//! A test-only guest built for a later major version of the report world
//! (`jobhost:report@0.2.0`), so host tests can check that the host refuses
//! it saying which version it speaks. Never shipped or run outside them.

wit_bindgen::generate!({
    inline: r#"
        package jobhost:report@0.2.0;

        interface log {
            emit: func(message: string);
        }

        world reporter {
            import log;
            export run: func() -> string;
        }
    "#,
});

struct Future;

impl Guest for Future {
    fn run() -> String {
        jobhost::report::log::emit("from the future");
        "done".to_string()
    }
}

export!(Future);
