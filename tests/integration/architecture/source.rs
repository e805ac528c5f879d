//! The source tree as the rules see it: the files of src/, their code with comments,
//! strings and test-only items blanked, and word matching on that code. Kept apart from
//! the rules so each rule is a few lines over plain data.

use std::collections::BTreeMap;
use std::path::Path;

/// The .rs files of src/, by path relative to src/ ("witness/store/log.rs"), with text.
pub type Sources = BTreeMap<String, String>;

pub fn read_sources() -> Sources {
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
pub fn is_roof(file: &str) -> bool {
    file == "main.rs" || file.starts_with("commands/")
}

/// Lines of a file as `wc -l` counts them for a file that ends in a newline.
pub fn line_count(text: &str) -> usize {
    text.lines().count()
}

/// `text` with comments, string and char literals blanked (newlines kept), so a word
/// found in the result is code.
pub fn code_only(text: &str) -> String {
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
pub fn without_tests(code: &str) -> (String, Vec<String>) {
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
pub fn mentions(code: &str, word: &str) -> bool {
    let ident = |ch: Option<char>| ch.is_some_and(|ch| ch.is_alphanumeric() || ch == '_');
    code.match_indices(word).any(|(at, _)| {
        !ident(code[..at].chars().next_back()) && !ident(code[at + word.len()..].chars().next())
    })
}
