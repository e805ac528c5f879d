//! The import graph between the files of src/ and its circles. A path is charged to the
//! file that defines what it names (through `pub use` re-exports; a re-export alone is no
//! use by the re-exporting file), test-only code is
//! left out, and a circle is reported as the shortest path list round it.

use super::paths::{absolute, module_of, paths_in};
use super::source::{Sources, code_only, without_tests};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The file defining the longest prefix of `path` that is a module with a file.
pub fn file_of(path: &[String], files_by_module: &BTreeMap<Vec<String>, String>) -> Option<String> {
    (0..=path.len())
        .rev()
        .find_map(|n| files_by_module.get(&path[..n]).cloned())
}

/// A path as the crate names it, and the name it is re-exported under, if any.
pub type NamedPath = (Vec<String>, Option<String>);

/// The non-test code of every file of the library (main.rs, the binary, is left out),
/// and the file of every module that is not test-only.
pub fn crate_files(sources: &Sources) -> (Sources, BTreeMap<Vec<String>, String>) {
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
pub fn import_graph(sources: &Sources) -> BTreeMap<String, BTreeSet<String>> {
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
    // A `pub use` only declares a facade: it is an edge of the re-exporting file only when
    // that file's own code also uses the name (a word counted more than once).
    let uses_itself = |file: &String, name: &Option<String>| match name.as_deref() {
        None | Some("*") => true,
        Some(n) => word_count(&code[file], n) > 1,
    };
    found
        .iter()
        .map(|(file, paths)| {
            let deps = paths
                .iter()
                .filter(|(_, name)| uses_itself(file, name))
                .filter_map(|(abs, _)| definer(abs))
                .filter(|dep| dep != *file)
                .collect();
            ((*file).clone(), deps)
        })
        .collect()
}

/// How often `word` occurs in `code` as a whole identifier.
pub fn word_count(code: &str, word: &str) -> usize {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(word)
        .filter(|(i, _)| {
            let before = code[..*i].chars().next_back();
            let after = code[i + word.len()..].chars().next();
            !before.is_some_and(ident) && !after.is_some_and(ident)
        })
        .count()
}

/// Every import circle: for each group of files that reach each other, one circle through
/// its first file, as a path list that starts and ends with that file.
pub fn find_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
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
pub fn shortest_cycle(
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
