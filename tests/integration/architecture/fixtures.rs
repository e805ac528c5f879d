//! The checker checked, on small in-memory source trees, so each part of it can fail.

use super::graph::{find_cycles, import_graph};
use super::rules::{anyhow_users, clap_users, long_files};
use super::source::{Sources, code_only, line_count};
use std::collections::BTreeSet;

fn fixture(files: &[(&str, &str)]) -> Sources {
    files
        .iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect()
}

#[test]
fn line_counter_counts_like_wc() {
    assert_eq!(line_count(""), 0);
    assert_eq!(line_count("a\n"), 1);
    assert_eq!(line_count("a\nb"), 2);
    assert_eq!(line_count(&"x\n".repeat(600)), 600);
    let s = fixture(&[
        ("ok.rs", &"x\n".repeat(600)),
        ("big.rs", &"x\n".repeat(601)),
    ]);
    assert_eq!(long_files(&s), vec![("big.rs".to_string(), 601)]);
}

#[test]
fn comments_and_strings_are_not_code() {
    let code = code_only(
        "// clap here\n/* and clap /* nested */ here */ let s = \"clap\"; let r = r#\"clap\"#;\n\
         let c = '\"'; let l: &'static str = x; fn f<'a>() {} use clap::Parser;",
    );
    assert_eq!(code.matches("clap").count(), 1, "{code}");
    assert!(code.contains("use clap::Parser"));
    assert!(code.contains("&'static str"));
    assert_eq!(code.lines().count(), 3);
}

#[test]
fn clap_and_anyhow_rules_name_the_files() {
    let s = fixture(&[
        (
            "commands/write.rs",
            "use clap::Args; fn f() -> anyhow::Result<()> {}",
        ),
        ("main.rs", "use clap::Parser;"),
        ("write/mod.rs", "use crate::commands::args::WriteArgs;"),
        ("device/mod.rs", "#[derive(clap::ValueEnum)] enum E {}"),
        ("verify/mod.rs", "// clap is not here\nuse anyhow::Context;"),
        (
            "sim/mod.rs",
            "fn f() {}\n#[cfg(test)]\nmod tests { fn g() -> anyhow::Result<()> {} }",
        ),
        ("power/mod.rs", "fn clapper() {}"),
    ]);
    assert_eq!(clap_users(&s), ["device/mod.rs", "write/mod.rs"]);
    assert_eq!(anyhow_users(&s), ["verify/mod.rs"]);
}

#[test]
fn circle_finder_finds_circles_through_every_kind_of_path() {
    let s = fixture(&[
        ("lib.rs", "pub mod a; pub mod b; pub mod c; pub mod d;"),
        // a -> b by a use tree, b -> c inline, c -> a through super.
        (
            "a/mod.rs",
            "pub mod x; use crate::{b::{self, Thing as T}, d};",
        ),
        ("a/x.rs", "use super::super::d::D;"),
        ("b.rs", "fn f() { crate::c::g(); }"),
        (
            "c.rs",
            "use self::inner::I; mod inner { use super::super::a::x::X; }",
        ),
        (
            "d.rs",
            "#[cfg(test)]\nmod tests { use crate::a::x::*; }\n#[cfg(test)]\nmod more;",
        ),
        ("d/more.rs", "use crate::a::x::X;"),
    ]);
    let g = import_graph(&s);
    assert_eq!(g["a/mod.rs"], fixture_set(&["b.rs", "d.rs"]));
    assert_eq!(g["a/x.rs"], fixture_set(&["d.rs"]));
    assert_eq!(g["b.rs"], fixture_set(&["c.rs"]));
    assert_eq!(g["c.rs"], fixture_set(&["a/x.rs"]));
    assert!(
        g["d.rs"].is_empty(),
        "test code is no dependency: {:?}",
        g["d.rs"]
    );
    assert!(!g.contains_key("d/more.rs"), "a test-only file is left out");
    assert_eq!(find_cycles(&g), Vec::<Vec<String>>::new());

    // Close the circle: d uses b.
    let mut s = s;
    s.insert("d.rs".into(), "use crate::b;".into());
    s.insert(
        "a/x.rs".into(),
        "use super::super::d::D; fn f() { crate::a::y(); }".into(),
    );
    let cycles = find_cycles(&import_graph(&s));
    assert_eq!(
        cycles,
        vec![vec!["a/mod.rs", "b.rs", "c.rs", "a/x.rs", "a/mod.rs"]],
        "{cycles:?}"
    );
}

#[test]
fn circle_finder_reports_each_circle_once_and_ignores_outside_paths() {
    let s = fixture(&[
        ("lib.rs", "pub mod log; pub mod journal; pub mod model;"),
        (
            "log.rs",
            "use crate::journal::{self, Journal}; use std::io; use serde::Serialize;",
        ),
        ("journal.rs", "use crate::log::read; use crate::model::Ack;"),
        (
            "model.rs",
            "pub(in crate::log) struct Ack; use chrono::Utc;",
        ),
    ]);
    let cycles = find_cycles(&import_graph(&s));
    assert_eq!(cycles, vec![vec!["journal.rs", "log.rs", "journal.rs"]]);
}

#[test]
fn circle_finder_follows_reexports_to_the_defining_file() {
    let s = fixture(&[
        ("lib.rs", "pub mod device;"),
        (
            "device/mod.rs",
            "mod file; mod safety; mod aligned;\n\
             pub use file::{FileDevice, open as open_file};\n\
             pub(crate) use aligned::*;\n\
             pub use safety::check;",
        ),
        ("device/aligned.rs", "pub struct AlignedBuf;"),
        // Through the facade to file.rs, not to mod.rs: no circle with mod.rs.
        (
            "device/safety.rs",
            "use crate::device::{FileDevice, open_file};",
        ),
        ("device/file.rs", "pub struct FileDevice; pub fn open() {}"),
    ]);
    let g = import_graph(&s);
    assert_eq!(g["device/safety.rs"], fixture_set(&["device/file.rs"]));
    assert_eq!(find_cycles(&g), Vec::<Vec<String>>::new());
    // A glob re-export cannot be followed: the path stays with the facade.
    let mut s = s;
    s.insert("device/file.rs".into(), "use super::AlignedBuf;".into());
    let g = import_graph(&s);
    assert_eq!(g["device/file.rs"], fixture_set(&["device/mod.rs"]));
    // ... and when the facade's own code uses file.rs, that is a circle.
    let facade = format!(
        "{}\nfn f() -> FileDevice {{ FileDevice }}",
        s["device/mod.rs"]
    );
    s.insert("device/mod.rs".into(), facade);
    assert_eq!(
        find_cycles(&import_graph(&s)),
        vec![vec!["device/file.rs", "device/mod.rs", "device/file.rs"]]
    );
}

fn fixture_set(files: &[&str]) -> BTreeSet<String> {
    files.iter().map(|f| f.to_string()).collect()
}

#[test]
fn a_reexport_alone_is_no_use_but_using_the_name_is() {
    // oracle/mod.rs defines Event and re-exports log's items; log.rs uses Event.
    let facade = |body: &str| {
        fixture(&[
            ("lib.rs", "pub mod oracle;"),
            ("oracle/mod.rs", body),
            (
                "oracle/log.rs",
                "use super::Event; pub struct OracleLog; pub fn read_events() {}",
            ),
        ])
    };
    let only_reexports =
        facade("mod log; pub struct Event; pub use log::{OracleLog, read_events};");
    assert_eq!(
        find_cycles(&import_graph(&only_reexports)),
        Vec::<Vec<String>>::new()
    );
    // The same facade that also calls the re-exported function in its own code: a circle.
    let uses_it = facade(
        "mod log; pub struct Event; pub use log::{OracleLog, read_events};\n\
         pub fn resolve() { read_events() }",
    );
    assert_eq!(
        find_cycles(&import_graph(&uses_it)),
        vec![vec!["oracle/log.rs", "oracle/mod.rs", "oracle/log.rs"]]
    );
}
