//! `jobhost new`: writes a report project (the work is `app::new`'s).

use std::path::PathBuf;

use crate::core::error::Error;

/// `jobhost new`.
#[derive(Debug, clap::Args)]
pub(super) struct NewArgs {
    /// The report's name: the project folder and the job's name.
    #[arg(value_name = "NAME")]
    name: String,
    /// The language of the report.
    #[arg(long, value_enum, default_value = "rust")]
    lang: crate::app::new::Lang,
    /// Where to make the project folder [default: the current folder].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Writes the project: 0, or the error.
pub(super) fn main(args: NewArgs) -> Result<i32, Error> {
    let lines = crate::app::new::new(&crate::app::new::NewRequest {
        name: args.name,
        lang: args.lang,
        dir: args.dir,
    })?;
    let mut out = super::Out::stdout();
    for line in lines {
        out.line(&line)?;
    }
    Ok(0)
}
