//! The architecture, checked (issue 12). Reads src/ and fails when:
//! - (a) a file outside `src/commands/` and `src/main.rs` mentions `clap` or
//!   `commands::args`: the command line is the roof, no domain module stands on it;
//! - (b) a file in src/ is over [`MAX_LINES`] lines (unit tests in it count);
//! - (c) files of src/ import each other in a circle (`a` uses `b` ... uses `a`);
//! - (d) `anyhow` is used outside `src/commands/` and `src/main.rs` by a file not in
//!   [`ANYHOW_ALLOWED`], or a file in that list no longer uses it (so the list only
//!   shrinks: take the file off it).
//!
//! What counts as a mention or a use is the code: comments and string literals are
//! blanked first. For (c) and (d) test-only code is left out (`#[cfg(test)]` items and
//! files declared `#[cfg(test)] mod x;`): a test module that uses `super::*` is not a
//! circle, and a test may return `anyhow::Result`. For (a) test code counts too: a test
//! that needs clap to build a domain value means the domain still stands on the CLI.
//!
//! `scripts/arch-check.sh` runs this with `--nocapture`; [`all_lists_printed`] prints
//! every list.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

/// No source file over this many lines.
const MAX_LINES: usize = 600;

/// Files outside the command layer that still use anyhow, as on main at 884c182. Only
/// shrinks: remove a file when it stops using anyhow (the check fails until you do).
const ANYHOW_ALLOWED: &[&str] = &[
    "bench/mod.rs",
    "bench/target.rs",
    "campaign/agent.rs",
    "campaign/agent_proto.rs",
    "campaign/config.rs",
    "campaign/host.rs",
    "campaign/mod.rs",
    "campaign/results.rs",
    "campaign/target.rs",
    "demo.rs",
    "device/file.rs",
    "device/safety.rs",
    "power/command.rs",
    "power/config.rs",
    "power/http.rs",
    "power/manual.rs",
    "power/mod.rs",
    "power/serial.rs",
    "power/sim.rs",
    "report/clidocs.rs",
    "report/input.rs",
    "report/mod.rs",
    "sim/fuse.rs",
    "sim/mod.rs",
    "soak.rs",
    "verify/mod.rs",
    "verify/select.rs",
    "wire/auth.rs",
    "wire/msg.rs",
    "witness/client/mod.rs",
    "witness/server/mod.rs",
    "witness/store/journal.rs",
    "witness/store/log.rs",
    "witness/validate.rs",
    "write/mod.rs",
];

// ---- the source tree -----------------------------------------------------------------

/// The .rs files of src/, by path relative to src/ ("witness/store/log.rs"), with text.
type Sources = BTreeMap<String, String>;

fn read_sources() -> Sources {
    fn walk(dir: &Path, root: &Path, out: &mut Sources) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let rel = path.strip_prefix(root).unwrap().to_string_lossy();
                out.insert(
                    rel.replace('\\', "/"),
                    std::fs::read_to_string(&path).unwrap(),
                );
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Sources::new();
    walk(&root, &root, &mut out);
    out
}

/// Whether a file is the command layer (where clap and anyhow belong).
fn is_roof(file: &str) -> bool {
    file == "main.rs" || file.starts_with("commands/")
}

/// Lines of a file as `wc -l` counts them for a file that ends in a newline.
fn line_count(text: &str) -> usize {
    text.lines().count()
}

// ---- code without comments, strings and tests -----------------------------------------

/// `text` with comments, string and char literals blanked (newlines kept), so a word
/// found in the result is code.
fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        // An identifier character before, except the `b` of a byte string.
        let prev_ident =
            i > 0 && ident(c[i - 1]) && !(c[i - 1] == 'b' && (i < 2 || !ident(c[i - 2])));
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r' && !prev_ident && matches!(c.get(i + 1), Some('"' | '#')) {
            // A raw string r"..." or r#"..."# (or the identifier r#name).
            let mut j = i + 1;
            while c.get(j) == Some(&'#') {
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            out.push(' ');
            for _ in 0..=hashes {
                out.push(' ');
            }
            i = j + 1;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += hashes + 1;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '"' {
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
            // An escaped char literal: '\n', '\'', '\u{1F600}'.
            out.push_str("  ");
            i += 2;
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '\'' {
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            out.push_str("   ");
            i += 3;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The code of a file without its `#[cfg(test)]` items, and the names of the child
/// modules it declares test-only (`#[cfg(test)] mod tests;`).
fn without_tests(code: &str) -> (String, Vec<String>) {
    const CFG_TEST: &str = "#[cfg(test)]";
    let c: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut test_mods = vec![];
    let mut rest = code;
    while let Some(at) = rest.find(CFG_TEST) {
        out.push_str(&rest[..at]);
        let start = code.len() - rest.len() + at;
        let start_chars = code[..start].chars().count();
        // The item ends at its first `;` outside brackets, or at the brace closing its
        // body.
        let mut i = start_chars + CFG_TEST.chars().count();
        let mut depth = 0;
        let item_start = i;
        while i < c.len() {
            match c[i] {
                '{' | '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        i += 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    i += 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        let item: String = c[item_start..i.min(c.len())].iter().collect();
        let words: Vec<&str> = item
            .split(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        if item.trim_end().ends_with(';')
            && let Some(k) = words.iter().position(|w| *w == "mod")
            && let Some(name) = words.get(k + 1)
        {
            test_mods.push(name.to_string());
        }
        out.extend(item.chars().map(|ch| if ch == '\n' { '\n' } else { ' ' }));
        let end_byte: usize = c[..i.min(c.len())].iter().map(|ch| ch.len_utf8()).sum();
        rest = &code[end_byte..];
    }
    out.push_str(rest);
    (out, test_mods)
}

/// Whether `word` occurs in `code` as a whole word (or path segment).
fn mentions(code: &str, word: &str) -> bool {
    let ident = |ch: Option<char>| ch.is_some_and(|ch| ch.is_alphanumeric() || ch == '_');
    code.match_indices(word).any(|(at, _)| {
        !ident(code[..at].chars().next_back()) && !ident(code[at + word.len()..].chars().next())
    })
}

// ---- modules, paths and the import graph -----------------------------------------------

/// The module path of a file: "witness/store/log.rs" → [witness, store, log],
/// "witness/mod.rs" → [witness], "lib.rs" → [].
fn module_of(file: &str) -> Vec<String> {
    let mut segs: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if matches!(segs.last().map(String::as_str), Some("mod" | "lib")) {
        segs.pop();
    }
    segs
}

/// A token of Rust code, as far as paths need.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Open,
    Close,
    Other(char),
}

fn tokens(code: &str) -> Vec<Tok> {
    let c: Vec<char> = code.chars().collect();
    let mut out = vec![];
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_alphanumeric() || ch == '_' || ch == '$' {
            let s = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_' || (i == s && c[i] == '$'))
            {
                i += 1;
            }
            let word: String = c[s..i].iter().collect();
            out.push(Tok::Ident(word.trim_start_matches('$').to_string()));
            continue;
        }
        if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok::PathSep);
            i += 2;
            continue;
        }
        if !ch.is_whitespace() {
            out.push(match ch {
                '{' => Tok::Open,
                '}' => Tok::Close,
                other => Tok::Other(other),
            });
        }
        i += 1;
    }
    out
}

/// A path named in a file's code.
struct Found {
    /// The module it is named in (the file's, or an inline module in it).
    here: Vec<String>,
    path: Vec<String>,
    /// For a `pub use`: the name it is re-exported under (`*` for a glob).
    reexport: Option<String>,
}

/// Whether the `use` at `t[i]` is public (`pub use`, `pub(crate) use`).
fn is_pub(t: &[Tok], i: usize) -> bool {
    match i.checked_sub(1).map(|j| &t[j]) {
        Some(Tok::Ident(w)) => w == "pub",
        Some(Tok::Other(')')) => {
            let open = (0..i - 1).rev().find(|&j| t[j] == Tok::Other('('));
            open.is_some_and(|j| j > 0 && t[j - 1] == Tok::Ident("pub".into()))
        }
        _ => false,
    }
}

/// Every path a file's code names: the full paths of its `use` trees and the paths
/// written inline, each with the (inline) module it appears in.
fn paths_in(code: &str, file_module: &[String]) -> Vec<Found> {
    let t = tokens(code);
    let mut out = vec![];
    // Inline `mod name { ... }` blocks: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = vec![];
    let mut depth = 0usize;
    let mut i = 0;
    let here = |inline: &[(String, usize)]| {
        let mut m = file_module.to_vec();
        m.extend(inline.iter().map(|(n, _)| n.clone()));
        m
    };
    while i < t.len() {
        match &t[i] {
            Tok::Open => {
                depth += 1;
                i += 1;
            }
            Tok::Close => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(w) if w == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Open)) = (t.get(i + 1), t.get(i + 2)) {
                    depth += 1;
                    inline.push((name.clone(), depth));
                    i += 3;
                } else {
                    i += 1;
                }
            }
            Tok::Ident(w) if w == "use" => {
                let end = (i..t.len())
                    .find(|&k| t[k] == Tok::Other(';'))
                    .unwrap_or(t.len());
                let mut k = i + 1;
                let mut paths = vec![];
                use_tree(&t[..end], &mut k, vec![], &mut paths);
                let public = is_pub(&t, i);
                out.extend(paths.into_iter().map(|(path, name)| Found {
                    here: here(&inline),
                    path,
                    reexport: public.then_some(name),
                }));
                i = end;
            }
            Tok::Ident(w) if w == "in" && i > 0 && t[i - 1] == Tok::Other('(') => {
                // `pub(in crate::a)` names where an item is visible, not a dependency.
                while i < t.len() && t[i] != Tok::Other(')') {
                    i += 1;
                }
            }
            Tok::Ident(first) if t.get(i + 1) == Some(&Tok::PathSep) => {
                let after_sep = i > 0 && t[i - 1] == Tok::PathSep;
                let mut path = vec![first.clone()];
                let mut k = i + 1;
                while t.get(k) == Some(&Tok::PathSep) {
                    match t.get(k + 1) {
                        Some(Tok::Ident(s)) => path.push(s.clone()),
                        _ => break,
                    }
                    k += 2;
                }
                if !after_sep {
                    out.push(Found {
                        here: here(&inline),
                        path,
                        reexport: None,
                    });
                }
                i = k;
            }
            _ => i += 1,
        }
    }
    out
}

/// One path a `use` brings in, and the name it is known by here (`*` for a glob).
type Imported = (Vec<String>, String);

/// Expands the use tree at `t[*k..]` under `prefix` into full paths and their names.
fn use_tree(t: &[Tok], k: &mut usize, prefix: Vec<String>, out: &mut Vec<Imported>) {
    let mut path = prefix;
    if t.get(*k) == Some(&Tok::PathSep) {
        *k += 1; // `use ::x` (an external crate)
    }
    loop {
        match t.get(*k) {
            Some(Tok::Ident(s)) if s == "self" && !path.is_empty() => *k += 1,
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                *k += 1;
            }
            Some(Tok::Open) => {
                *k += 1;
                loop {
                    match t.get(*k) {
                        None => return,
                        Some(Tok::Close) => {
                            *k += 1;
                            return;
                        }
                        Some(Tok::Other(',')) => *k += 1,
                        _ => use_tree(t, k, path.clone(), out),
                    }
                }
            }
            Some(Tok::Other('*')) => {
                *k += 1;
                out.push((path, "*".into()));
                return;
            }
            _ => {
                let name = path.last().cloned().unwrap_or_default();
                out.push((path, name));
                return;
            }
        }
        match t.get(*k) {
            Some(Tok::PathSep) => *k += 1,
            Some(Tok::Ident(a)) if a == "as" => {
                let alias = match t.get(*k + 1) {
                    Some(Tok::Ident(alias)) => alias.clone(),
                    _ => String::new(),
                };
                *k += 2;
                out.push((path, alias));
                return;
            }
            _ => {
                let name = path.last().cloned().unwrap_or_default();
                out.push((path, name));
                return;
            }
        }
    }
}

/// The crate-absolute module path a path names, seen from module `here`, or None when
/// it names something outside the crate (std, a dependency, a local item).
fn absolute(
    path: &[String],
    here: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let mut base = here.to_vec();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // A child module named without `self::` (2018 paths).
            let mut child = here.to_vec();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
        }
        None => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file defining the longest prefix of `path` that is a module with a file.
fn file_of(path: &[String], files_by_module: &BTreeMap<Vec<String>, String>) -> Option<String> {
    (0..=path.len())
        .rev()
        .find_map(|n| files_by_module.get(&path[..n]).cloned())
}

/// A path as the crate names it, and the name it is re-exported under, if any.
type NamedPath = (Vec<String>, Option<String>);

/// The non-test code of every file of the library (main.rs, the binary, is left out),
/// and the file of every module that is not test-only.
fn crate_files(sources: &Sources) -> (Sources, BTreeMap<Vec<String>, String>) {
    let mut code = BTreeMap::new();
    let mut test_only: BTreeSet<Vec<String>> = BTreeSet::new();
    for (file, text) in sources.iter().filter(|(f, _)| *f != "main.rs") {
        let (c, test_mods) = without_tests(&code_only(text));
        for m in test_mods {
            let mut p = module_of(file);
            p.push(m);
            test_only.insert(p);
        }
        code.insert(file.clone(), c);
    }
    let files_by_module = code
        .keys()
        .map(|f| (module_of(f), f.clone()))
        .filter(|(m, _)| !test_only.iter().any(|t| m.starts_with(t)))
        .collect();
    (code, files_by_module)
}

/// Which files of the crate each non-test file uses (main.rs, the binary, is left out).
/// A path is charged to the file that defines what it names: through a `pub use` (a
/// module re-exporting a child's item) to the child, so a facade `mod.rs` is no circle
/// for the siblings that import through it.
fn import_graph(sources: &Sources) -> BTreeMap<String, BTreeSet<String>> {
    let (code, files_by_module) = crate_files(sources);
    let modules: BTreeSet<Vec<String>> = files_by_module.keys().cloned().collect();
    let found: BTreeMap<&String, Vec<NamedPath>> = files_by_module
        .iter()
        .map(|(module, file)| {
            let abs = paths_in(&code[file], module)
                .into_iter()
                .filter_map(|f| Some((absolute(&f.path, &f.here, &modules)?, f.reexport)))
                .collect();
            (file, abs)
        })
        .collect();
    // Per file: name re-exported → the absolute path it stands for.
    let reexports: BTreeMap<&String, BTreeMap<&str, &Vec<String>>> = found
        .iter()
        .map(|(file, paths)| {
            let named = paths
                .iter()
                .filter_map(|(abs, name)| Some((name.as_deref()?, abs)))
                .filter(|(name, _)| *name != "*")
                .collect();
            (*file, named)
        })
        .collect();
    let definer = |abs: &Vec<String>| -> Option<String> {
        let mut abs = abs.clone();
        for _ in 0..16 {
            let file = file_of(&abs, &files_by_module)?;
            let depth = module_of(&file).len();
            let through = abs
                .get(depth)
                .and_then(|item| reexports.get(&file)?.get(item.as_str()));
            match through {
                Some(source) if source.len() > 1 => {
                    let mut next = (*source).clone();
                    next.extend(abs[depth + 1..].iter().cloned());
                    abs = next;
                }
                _ => return Some(file),
            }
        }
        file_of(&abs, &files_by_module)
    };
    found
        .iter()
        .map(|(file, paths)| {
            let deps = paths
                .iter()
                .filter_map(|(abs, _)| definer(abs))
                .filter(|dep| dep != *file)
                .collect();
            ((*file).clone(), deps)
        })
        .collect()
}

/// Every import circle: for each group of files that reach each other, one circle through
/// its first file, as a path list that starts and ends with that file.
fn find_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(f) = todo.pop() {
            for d in graph.get(&f).into_iter().flatten() {
                if seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|f| (f, reach(f))).collect();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut cycles = vec![];
    for f in graph.keys() {
        if done.contains(f) || !reachable[f].contains(f) {
            continue;
        }
        let group: BTreeSet<String> = reachable[f]
            .iter()
            .filter(|g| reachable.get(g).is_some_and(|r| r.contains(f)))
            .cloned()
            .collect();
        done.extend(group.iter().cloned());
        cycles.push(shortest_cycle(graph, f, &group));
    }
    cycles
}

/// The shortest path from `start` back to itself inside `group` (breadth first).
fn shortest_cycle(
    graph: &BTreeMap<String, BTreeSet<String>>,
    start: &String,
    group: &BTreeSet<String>,
) -> Vec<String> {
    let mut parent: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = VecDeque::from([start.clone()]);
    while let Some(f) = queue.pop_front() {
        for d in graph
            .get(&f)
            .into_iter()
            .flatten()
            .filter(|d| group.contains(*d))
        {
            if d == start {
                let mut path = vec![start.clone(), f.clone()];
                let mut at = f.clone();
                while let Some(p) = parent.get(&at) {
                    path.push(p.clone());
                    at = p.clone();
                }
                if path.last() != Some(start) {
                    path.push(start.clone());
                }
                path.reverse();
                path.dedup();
                if path.len() == 1 {
                    path.push(start.clone());
                }
                return path;
            }
            if !parent.contains_key(d) && d != start {
                parent.insert(d.clone(), f.clone());
                queue.push_back(d.clone());
            }
        }
    }
    vec![start.clone()]
}

// ---- the four rules ---------------------------------------------------------------------

fn clap_users(sources: &Sources) -> Vec<String> {
    sources
        .iter()
        .filter(|(f, _)| !is_roof(f))
        .filter(|(_, text)| {
            let code = code_only(text);
            mentions(&code, "clap") || code.contains("commands::args")
        })
        .map(|(f, _)| f.clone())
        .collect()
}

fn long_files(sources: &Sources) -> Vec<(String, usize)> {
    sources
        .iter()
        .map(|(f, text)| (f.clone(), line_count(text)))
        .filter(|(_, n)| *n > MAX_LINES)
        .collect()
}

fn anyhow_users(sources: &Sources) -> Vec<String> {
    sources
        .iter()
        .filter(|(f, _)| !is_roof(f))
        .filter(|(_, text)| mentions(&without_tests(&code_only(text)).0, "anyhow"))
        .map(|(f, _)| f.clone())
        .collect()
}

fn src_list(files: &[String]) -> String {
    files.iter().map(|f| format!("\n  src/{f}")).collect()
}

fn cycle_list(cycles: &[Vec<String>]) -> String {
    cycles
        .iter()
        .map(|c| {
            let names: Vec<String> = c.iter().map(|f| format!("src/{f}")).collect();
            format!("\n  {}", names.join(" -> "))
        })
        .collect()
}

#[test]
fn only_the_command_layer_mentions_clap() {
    let users = clap_users(&read_sources());
    assert!(
        users.is_empty(),
        "files outside src/commands/ and src/main.rs that mention clap or commands::args \
         (give the module a plain options type; commands/<cmd>.rs converts the clap \
         arguments into it):{}",
        src_list(&users)
    );
}

#[test]
fn no_source_file_is_over_600_lines() {
    let long = long_files(&read_sources());
    let list: String = long
        .iter()
        .map(|(f, n)| format!("\n  src/{f}: {n} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split them by job into submodules; move a big \
         `mod tests` into x/tests.rs):{list}"
    );
}

#[test]
fn no_import_circles() {
    let cycles = find_cycles(&import_graph(&read_sources()));
    assert!(
        cycles.is_empty(),
        "import circles between files of src/ (each line: a file, the file it uses, ..., \
         back to the first):{}",
        cycle_list(&cycles)
    );
}

#[test]
fn anyhow_only_in_the_command_layer_and_the_shrinking_allowlist() {
    let users = anyhow_users(&read_sources());
    let new: Vec<String> = users
        .iter()
        .filter(|f| !ANYHOW_ALLOWED.contains(&f.as_str()))
        .cloned()
        .collect();
    let stale: Vec<String> = ANYHOW_ALLOWED
        .iter()
        .filter(|f| !users.iter().any(|u| u == *f))
        .map(|f| f.to_string())
        .collect();
    assert!(
        new.is_empty(),
        "files outside src/commands/ and src/main.rs that use anyhow and are not in \
         ANYHOW_ALLOWED (give the module a typed error, thiserror is in Cargo.toml):{}",
        src_list(&new)
    );
    assert!(
        stale.is_empty(),
        "files in ANYHOW_ALLOWED (tests/architecture.rs) that no longer use anyhow: take \
         them off the list so it only shrinks:{}",
        src_list(&stale)
    );
}

/// Prints every list, pass or fail (what `scripts/arch-check.sh` shows).
#[test]
fn all_lists_printed() {
    let sources = read_sources();
    let long: String = long_files(&sources)
        .iter()
        .map(|(f, n)| format!("\n  src/{f}: {n} lines"))
        .collect();
    println!("files over {MAX_LINES} lines:{long}");
    let cycles = find_cycles(&import_graph(&sources));
    println!("import circles:{}", cycle_list(&cycles));
    println!(
        "clap or commands::args outside the command layer:{}",
        src_list(&clap_users(&sources))
    );
    println!(
        "anyhow outside the command layer:{}",
        src_list(&anyhow_users(&sources))
    );
}

// ---- the checker checked, on small fixtures ----------------------------------------------

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
    let cycles = find_cycles(&import_graph(&s));
    assert_eq!(
        cycles,
        vec![vec!["device/file.rs", "device/mod.rs", "device/file.rs"]]
    );
}

fn fixture_set(files: &[&str]) -> BTreeSet<String> {
    files.iter().map(|f| f.to_string()).collect()
}
