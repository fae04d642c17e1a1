//! Unit tests of `host/build_link.rs`, which the host's and the tests'
//! build scripts include: which builds the skip path's linker script
//! (`host/hot-text.ld`) is given to, and which it is kept from.

// The build scripts' `link_executable` prints to cargo; only the linker
// check is called here.
#![allow(dead_code)]

include!("../../host/build_link.rs");

#[cfg(test)]
mod tests {
    use super::script_refused_by;

    /// Flags as cargo encodes them for a build script.
    fn flags(words: &[&str]) -> String {
        words.join("\x1f")
    }

    #[test]
    fn the_default_linkers_get_the_script() {
        assert_eq!(script_refused_by("", None, None), None);
        for f in [
            flags(&["-C", "link-arg=-fuse-ld=lld"]),
            flags(&["-Clink-arg=-fuse-ld=bfd"]),
            flags(&[
                "-C",
                "linker=clang",
                "-C",
                "link-arg=--ld-path=/usr/bin/ld.lld",
            ]),
            flags(&["-C", "target-cpu=native"]),
        ] {
            assert_eq!(script_refused_by(&f, None, None), None, "{f:?}");
        }
        assert_eq!(script_refused_by("", Some("/usr/bin/cc"), None), None);
        assert_eq!(
            script_refused_by("", None, Some("/usr/lib/libjemalloc.so")),
            None
        );
    }

    #[test]
    fn gold_and_mold_are_kept_from_the_script_however_the_build_names_them() {
        let cases = [
            (
                flags(&["-C", "link-arg=-fuse-ld=gold"]),
                None,
                None,
                "GNU gold",
            ),
            (flags(&["-Clink-arg=-fuse-ld=mold"]), None, None, "mold"),
            (
                flags(&["-C", "link-args=-fuse-ld=mold -Wl,-z,now"]),
                None,
                None,
                "mold",
            ),
            (
                flags(&[
                    "-C",
                    "linker=clang",
                    "-C",
                    "link-arg=--ld-path=/opt/mold/bin/mold",
                ]),
                None,
                None,
                "mold",
            ),
            (
                flags(&["-C", "linker=/usr/bin/ld.gold"]),
                None,
                None,
                "GNU gold",
            ),
            (String::new(), Some("/usr/local/bin/ld.mold"), None, "mold"),
            (
                String::new(),
                None,
                Some("/usr/local/libexec/mold/mold-wrapper.so"),
                "mold",
            ),
        ];
        for (f, linker, preload, name) in cases {
            assert_eq!(
                script_refused_by(&f, linker, preload),
                Some(name),
                "{f:?} {linker:?} {preload:?}"
            );
        }
    }

    #[test]
    fn the_last_fuse_ld_decides_as_with_the_compiler_driver() {
        let f = flags(&[
            "-C",
            "link-arg=-fuse-ld=gold",
            "-C",
            "link-arg=-fuse-ld=lld",
        ]);
        assert_eq!(script_refused_by(&f, None, None), None);
        let f = flags(&[
            "-C",
            "link-arg=-fuse-ld=lld",
            "-C",
            "link-arg=-fuse-ld=gold",
        ]);
        assert_eq!(script_refused_by(&f, None, None), Some("GNU gold"));
        // A driver told which linker to run is not itself the linker.
        let f = flags(&["-C", "link-arg=-fuse-ld=lld"]);
        assert_eq!(script_refused_by(&f, Some("ld.gold"), None), None);
        // clang's --ld-path wins over -fuse-ld, wherever it stands.
        let f = flags(&[
            "-C",
            "link-arg=--ld-path=/usr/bin/ld.lld",
            "-C",
            "link-arg=-fuse-ld=gold",
        ]);
        assert_eq!(script_refused_by(&f, None, None), None);
        let f = flags(&[
            "-C",
            "link-arg=--ld-path=/usr/bin/ld.gold",
            "-C",
            "link-arg=-fuse-ld=lld",
        ]);
        assert_eq!(script_refused_by(&f, None, None), Some("GNU gold"));
    }

    #[test]
    fn mold_run_target_prefixed_names_and_a_mold_folder_are_seen() {
        // `mold -run` replaces whatever linker the flags name.
        let f = flags(&["-C", "link-arg=-fuse-ld=lld"]);
        let wrapper = Some("/usr/libexec/mold/mold-wrapper.so");
        assert_eq!(script_refused_by(&f, None, wrapper), Some("mold"));
        for name in ["x86_64-linux-gnu-ld.gold", "/usr/bin/x86_64-linux-gnu-gold"] {
            let f = flags(&["-C", &format!("link-arg=--ld-path={name}")]);
            assert_eq!(
                script_refused_by(&f, None, None),
                Some("GNU gold"),
                "{name}"
            );
        }
        let f = flags(&["-C", "link-arg=-B/usr/libexec/mold"]);
        assert_eq!(script_refused_by(&f, None, None), Some("mold"));
        let f = flags(&["-C", "link-arg=-B/usr/local/libexec/mold/"]);
        assert_eq!(script_refused_by(&f, None, None), Some("mold"));
        // A -B only where an argument starts, not inside a path.
        let f = flags(&["-C", "link-arg=-L/ci-Builds/mold"]);
        assert_eq!(script_refused_by(&f, None, None), None);
        let f = flags(&["-C", "link-args=-Wl,-z,now -B/usr/libexec/mold"]);
        assert_eq!(script_refused_by(&f, None, None), Some("mold"));
        // A -B folder whose `ld` links to gold.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x86_64-linux-gnu-ld.gold"), "").unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("x86_64-linux-gnu-ld.gold"),
            dir.path().join("ld"),
        )
        .unwrap();
        let f = flags(&["-C", &format!("link-arg=-B{}", dir.path().display())]);
        assert_eq!(script_refused_by(&f, None, None), Some("GNU gold"));
        // Names that only look alike are not those linkers.
        for name in ["/usr/bin/golden-ld", "ld.lld", "/opt/moldy/ld"] {
            let f = flags(&["-C", &format!("link-arg=--ld-path={name}")]);
            assert_eq!(script_refused_by(&f, None, None), None, "{name}");
        }
    }
}
