//! A test-only guest: a component that implements a world other than
//! `jobhost:report/report`, so host tests can check that the host refuses it
//! with a clear error instead of failing somewhere later. It is never shipped
//! or run outside those tests.

wit_bindgen::generate!({
    inline: r#"
        package other:thing@1.0.0;

        world thing {
            export greet: func(name: string) -> string;
        }
    "#,
});

struct Thing;

impl Guest for Thing {
    fn greet(name: String) -> String {
        format!("hello, {name}")
    }
}

export!(Thing);
