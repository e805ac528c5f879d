//! The run identity every sector stamp carries.

/// A 128-bit random run identity. Every sector carries it so that data of other runs is
/// recognised as stale, never as corruption.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RunId(pub [u8; 16]);

impl RunId {
    pub fn random() -> RunId {
        let mut b = [0u8; 16];
        crate::rng::fill_os_random(&mut b);
        RunId(b)
    }
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
    pub fn parse(s: &str) -> Option<RunId> {
        let s = s.trim();
        if s.len() != 32 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let mut b = [0u8; 16];
        for (i, out) in b.iter_mut().enumerate() {
            *out = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(RunId(b))
    }
}

impl std::fmt::Debug for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.hex())
    }
}
impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.hex())
    }
}
