//! Strings from peers are data: text another machine sent (a verdict note, a run
//! descriptor's host and target, a plug's HTTP reply) is checked before it is kept and
//! escaped before it reaches a terminal.
//!
//! Why: the witness takes verdict notes from unauthenticated peers, and `plugpull runs`
//! prints what writers put in their descriptors. Raw, such a string can move the cursor,
//! rewrite earlier lines, set the window title or reverse the text that follows (bidi
//! overrides), so a listing could show a run as verified that never was. Escaped, every
//! character that is not plain printable text shows as `\u{..}` and nothing else changes.
//! JSON output needs none of this: serde escapes control characters itself.

use std::borrow::Cow;

/// Why a peer's string was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeerTextError {
    #[error("{field} is {bytes} bytes; at most {max} are kept")]
    TooLong {
        field: &'static str,
        bytes: usize,
        max: usize,
    },
    #[error("{field} holds a control or text-direction character: {shown}")]
    Control { field: &'static str, shown: String },
}

/// Whether `c` would act on a terminal rather than show: C0 and C1 controls, DEL, and
/// the characters that reorder or separate text (bidi embeddings, overrides, isolates,
/// marks; line and paragraph separators).
pub fn is_active(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// `s` as it may be printed to a terminal: every [`is_active`] character as `\u{..}`.
pub fn shown(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_active) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_active(c) {
            o += &format!("\\u{{{:x}}}", c as u32);
        } else {
            o.push(c);
        }
    }
    Cow::Owned(o)
}

/// The first `max_bytes` bytes of `raw` (lossy UTF-8), escaped, "..." when cut: what an
/// error may say about a reply it did not understand.
pub fn shown_prefix(raw: &[u8], max_bytes: usize) -> String {
    let cut = raw.len() > max_bytes;
    let text = String::from_utf8_lossy(&raw[..raw.len().min(max_bytes)]);
    let mut o = shown(&text).into_owned();
    if cut {
        o += "...";
    }
    o
}

/// Refuses `s` as `field` if it is over `max_bytes` or holds an [`is_active`] character.
pub fn check(field: &'static str, s: &str, max_bytes: usize) -> Result<(), PeerTextError> {
    if s.len() > max_bytes {
        return Err(PeerTextError::TooLong {
            field,
            bytes: s.len(),
            max: max_bytes,
        });
    }
    if s.chars().any(is_active) {
        return Err(PeerTextError::Control {
            field,
            shown: format!("\"{}\"", shown_prefix(s.as_bytes(), 80)),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_characters_are_escaped_and_plain_text_is_not() {
        assert_eq!(shown("host-1 /dev/sdb é"), "host-1 /dev/sdb é");
        assert_eq!(shown("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(shown("x\u{9b}y\u{7f}\n"), "x\\u{9b}y\\u{7f}\\u{a}");
        assert_eq!(shown("\u{202e}abc"), "\\u{202e}abc");
        assert_eq!(shown_prefix(b"<html>\x1b", 4), "<htm...");
        assert_eq!(shown_prefix(b"<a>\x1b", 9), "<a>\\u{1b}");
    }

    #[test]
    fn check_refuses_long_and_active_strings() {
        assert!(check("host", "lab-7", 8).is_ok());
        let e = check("host", "123456789", 8).unwrap_err().to_string();
        assert_eq!(e, "host is 9 bytes; at most 8 are kept");
        let e = check("host", "a\u{1b}]0;x\u{7}", 80)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\\u{1b}") && !e.contains('\u{1b}'), "{e}");
    }
}
