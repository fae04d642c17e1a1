//! The linker script that keeps the skip path's code together
//! (`host/hot-text.ld`, passed by `host/build_link.rs`): every function a
//! callgrind profile of one skip ran, in one output section, `.text.hot`,
//! ahead of `.text`, in the profile's order. Each function is named by a
//! pattern that outlives a rebuild: a Rust symbol's hash, a v0 symbol's
//! crate disambiguators and the back references after them, and LLVM's
//! `.llvm.N` suffixes are wildcards. A function the compiler deems cold is
//! in `.text.unlikely.NAME`, and is taken from there too. The run bench
//! writes it (`-- --hot-text`).

/// The linker script that puts the functions `patterns` name (as
/// [`patterns`] gives them) first.
pub fn script(patterns: &[String]) -> String {
    let mut script = String::from(HEADER);
    script.push_str("SECTIONS {\n  .text.hot : {\n");
    for p in patterns {
        script.push_str(&format!("    *(.text.{p} .text.unlikely.{p})\n"));
    }
    script.push_str("  }\n} INSERT BEFORE .text;\n");
    script
}

const HEADER: &str = "\
/* The functions `jobhost run` runs to answer that a window is already
   done (the skip path), kept together at the start of the executable's
   code, so that a process starting faults in a few hundred kilobytes of
   it instead of pages scattered over twenty-odd megabytes (BENCHMARKS.md,
   \"The skip path beside its floor\"). Passed to the linker by
   host/build_link.rs; a function missing here only costs a page fault.

   Generated: `cargo bench -p jobhost-tests --bench run -- --hot-text`
   (needs valgrind). Do not edit by hand. */
";

/// The functions of `binary` that a callgrind profile ran, as input
/// section patterns, in the profile's order.
pub fn patterns(profile: &str, binary: &str) -> Vec<String> {
    use std::collections::{HashMap, HashSet};
    let mut objects: HashMap<&str, &str> = HashMap::new();
    let mut functions: HashMap<&str, &str> = HashMap::new();
    let mut in_binary = false;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for line in profile.lines() {
        let Some((key, rest)) = line.split_once('=') else {
            continue;
        };
        let Some((id, name)) = rest.strip_prefix('(').and_then(|r| r.split_once(')')) else {
            continue;
        };
        let name = name.trim();
        match key {
            "ob" | "cob" => {
                if !name.is_empty() {
                    objects.insert(id, name);
                }
                if key == "ob" {
                    // Valgrind names the object of code outside the
                    // `.text` section (in `.text.hot`, once linked with this
                    // script) `???`; its functions are still named.
                    in_binary = objects
                        .get(id)
                        .is_some_and(|o| *o == "???" || o.rsplit('/').next() == Some(binary));
                }
            }
            "fn" | "cfn" => {
                if !name.is_empty() {
                    functions.insert(id, name);
                }
                if key == "fn"
                    && in_binary
                    && let Some(p) = functions.get(id).and_then(|f| pattern(f))
                    && seen.insert(p.clone())
                {
                    out.push(p);
                }
            }
            _ => {}
        }
    }
    out
}

/// The input section name pattern of symbol `name` (callgrind's `'N` marks
/// of recursion dropped), with what a rebuild changes as wildcards; `None`
/// for what is not a symbol.
pub fn pattern(name: &str) -> Option<String> {
    let name = name.split('\'').next()?;
    if name.is_empty()
        || name.starts_with("0x")
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_$.".contains(&b))
    {
        return None;
    }
    let (name, llvm) = match name.find(".llvm.") {
        Some(at) => (&name[..at], true),
        None => (name, false),
    };
    if name.starts_with("_ZN") {
        // A legacy Rust symbol ends in its hash: `17h` and 16 hex digits, `E`.
        if let Some(at) = name.rfind("17h")
            && name.len() == at + 3 + 16 + 1
        {
            return Some(format!("{}*", &name[..at + 3]));
        }
    }
    let mut p = String::new();
    if name.starts_with("_R") {
        // A v0 Rust symbol names each crate with a disambiguator,
        // `Cs<base 62>_`, whose length can change, and refers back to
        // what it named before by byte offset, `B<base 62>_`, which moves
        // with it. A wildcard for each only widens the pattern.
        let mut rest = name;
        while let Some(at) = rest.find(['C', 'B']) {
            let crate_name = rest[at..].starts_with("Cs");
            let lead = at + if crate_name { 2 } else { 1 };
            p.push_str(&rest[..lead]);
            let tail = &rest[lead..];
            let digits = tail.bytes().take_while(u8::is_ascii_alphanumeric).count();
            let is_crate = crate_name && digits > 0;
            let is_back = rest.as_bytes()[at] == b'B' && digits <= 3;
            if (is_crate || is_back) && tail.as_bytes().get(digits) == Some(&b'_') {
                p.push('*');
                rest = &tail[digits..];
            } else {
                rest = tail;
            }
        }
        p.push_str(rest);
    } else {
        p.push_str(name);
    }
    if llvm {
        p.push('*');
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_rust_symbol_loses_its_hash_and_llvm_suffix() {
        assert_eq!(
            pattern("_ZN7jobhost3app3cli9main_with17h658f7bf5e8304db9E").as_deref(),
            Some("_ZN7jobhost3app3cli9main_with17h*")
        );
        assert_eq!(
            pattern("_ZN5alloc7raw_vec11finish_grow17h8b8b2b5cd9311626E.llvm.1783649175050174906")
                .as_deref(),
            Some("_ZN5alloc7raw_vec11finish_grow17h*")
        );
    }

    #[test]
    fn a_v0_symbol_loses_its_crate_disambiguators_and_back_references() {
        let p = pattern("_RNvMs0_NtNtNtNtCsjrHSEGnQ3l9_3std3sys4sync4once5futexNtB5_4Once4call")
            .expect("a symbol");
        assert_eq!(
            p,
            "_RNvMs0_NtNtNtNtCs*_3std3sys4sync4once5futexNtB*_4Once4call"
        );
        let p = pattern(
            "_RNvXsZ_NtCslNYArtu3iFV_5alloc6stringNtB5_6StringNtNtCsgEmfK2I1SDS_4core3fmt5Write9write_str.llvm.17385577056177814475",
        )
        .expect("a symbol");
        assert_eq!(
            p,
            "_RNvXsZ_NtCs*_5alloc6stringNtB*_6StringNtNtCs*_4core3fmt5Write9write_str*"
        );
    }

    #[test]
    fn a_c_function_is_named_as_it_is_and_what_is_no_symbol_is_left_out() {
        assert_eq!(
            pattern("yy_reduce.constprop.0").as_deref(),
            Some("yy_reduce.constprop.0")
        );
        assert_eq!(
            pattern("sqlite3VdbeExec'2").as_deref(),
            Some("sqlite3VdbeExec")
        );
        assert_eq!(pattern("(below main)"), None);
        assert_eq!(pattern("0x00000000009b8460"), None);
        assert_eq!(pattern(""), None);
    }

    /// Functions of the binary, under its own name or (outside `.text`)
    /// `???`, are taken in the profile's order, each once; those of other
    /// objects are not.
    #[test]
    fn a_profile_gives_the_binarys_functions_once_each() {
        let profile = "\
ob=(1) /usr/lib/x86_64-linux-gnu/libc.so.6
fn=(1) malloc
0 5
ob=(2) /tmp/x/jobhost-under-test
fn=(2) sqlite3_step
0 3
cob=(1)
cfn=(3) free
calls=1 0
fn=(4) _ZN7jobhost4main17h0123456789abcdefE
0 1
ob=(3) ???
fn=(5) _ZN3std2rt19lang_start_internal17hfedcba9876543210E
fn=(6) 0x00000000009b8460
ob=(1)
fn=(3)
0 2
ob=(2)
fn=(2)
0 1
";
        let found = patterns(profile, "jobhost-under-test");
        assert_eq!(
            found,
            [
                "sqlite3_step",
                "_ZN7jobhost4main17h*",
                "_ZN3std2rt19lang_start_internal17h*"
            ]
        );
        let s = script(&found);
        assert!(s.contains("    *(.text.sqlite3_step .text.unlikely.sqlite3_step)\n"));
        assert!(s.trim_end().ends_with("} INSERT BEFORE .text;"));
    }

    /// The committed script is what [`script`] writes for the patterns it
    /// names: generated, not edited by hand, and every line a pattern.
    #[test]
    fn the_committed_script_is_as_generated() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../host/hot-text.ld");
        let committed = std::fs::read_to_string(path).expect("host/hot-text.ld");
        let named: Vec<String> = committed
            .lines()
            .filter_map(|l| l.trim().strip_prefix("*(.text."))
            .map(|l| l.split(' ').next().expect("a pattern").to_string())
            .collect();
        assert!(named.len() > 100, "{} patterns", named.len());
        assert_eq!(script(&named), committed);
    }
}
