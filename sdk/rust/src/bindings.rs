//! The wit-bindgen bindings of world `describing-reporter`
//! (`jobhost:report@0.1.1`, `wit/report.wit`).
//!
//! Not part of the SDK's API: the rest of the crate converts every generated
//! type into a plain one, and [`export!`](crate::export) reaches in here on
//! a report's behalf. The generated code calls the host through `extern "C"`
//! imports and defines the exported `extern "C"` functions, which takes
//! `unsafe`; this module is the only place in the crate where `unsafe` is
//! allowed (every other module forbids it).

#![allow(unsafe_code, missing_docs, clippy::all)]

wit_bindgen::generate!({
    world: "describing-reporter",
    path: "wit",
    // `jobhost_sdk::export!` (crate root) expands, in the report's crate, to
    // the generated export macro; the generated code then finds its types
    // through the path given with `with_types_in`, or this default.
    pub_export_macro: true,
    default_bindings_module: "jobhost_sdk::bindings",
});
