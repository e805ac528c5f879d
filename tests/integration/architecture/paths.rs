//! Which paths a file's code names: `use` trees expanded into full paths (with the name
//! each is known by, and whether it is re-exported), inline `crate::`/`super::`/`self::`
//! paths, and child modules named bare; each resolved to a crate-absolute module path.
//! Why a small tokenizer and not a parser: the rules only need paths, and a dependency
//! on a Rust parser is more than this check is worth.

use std::collections::BTreeSet;

/// The module path of a file: "witness/store/log.rs" → [witness, store, log],
/// "witness/mod.rs" → [witness], "lib.rs" → [].
pub fn module_of(file: &str) -> Vec<String> {
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
pub enum Tok {
    Ident(String),
    PathSep,
    Open,
    Close,
    Other(char),
}

pub fn tokens(code: &str) -> Vec<Tok> {
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
pub struct Found {
    /// The module it is named in (the file's, or an inline module in it).
    pub here: Vec<String>,
    pub path: Vec<String>,
    /// For a `pub use`: the name it is re-exported under (`*` for a glob).
    pub reexport: Option<String>,
}

/// Whether the `use` at `t[i]` is public (`pub use`, `pub(crate) use`).
pub fn is_pub(t: &[Tok], i: usize) -> bool {
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
pub fn paths_in(code: &str, file_module: &[String]) -> Vec<Found> {
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
pub type Imported = (Vec<String>, String);

/// Expands the use tree at `t[*k..]` under `prefix` into full paths and their names.
pub fn use_tree(t: &[Tok], k: &mut usize, prefix: Vec<String>, out: &mut Vec<Imported>) {
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
pub fn absolute(
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
