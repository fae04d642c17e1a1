//! The floor of the skip path, for `cargo bench --bench run`: the least a
//! process can do to answer "this window is done" from a SQLite store:
//! open the file, read the window's one row, print one line. No config,
//! no clap, no component: what `jobhost run` on a DONE window could cost
//! at best.
//!
//! `skip-floor STORE KEY`

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(store), Some(key)) = (args.next(), args.next()) else {
        eprintln!("usage: skip-floor STORE KEY");
        std::process::exit(2);
    };
    let read = || -> rusqlite::Result<Option<String>> {
        let db = rusqlite::Connection::open_with_flags(
            &store,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        db.busy_timeout(std::time::Duration::from_secs(5))?;
        let mut stmt = db.prepare("SELECT state FROM runs WHERE key = ?1")?;
        let mut rows = stmt.query([&key])?;
        Ok(match rows.next()? {
            Some(row) => Some(row.get(0)?),
            None => None,
        })
    };
    match read() {
        Ok(Some(state)) => println!("{{\"key\":\"{key}\",\"state\":\"{state}\"}}"),
        Ok(None) => println!("{{\"key\":\"{key}\",\"state\":null}}"),
        Err(e) => {
            eprintln!("skip-floor: {e}");
            std::process::exit(1);
        }
    }
}
