//! Pre-shared-key authentication of every frame on a witness connection.
//!
//! Why: the witness's ack log is the ground truth of a test. Anyone who can reach its
//! port could otherwise forge an ack (verify would then report a good drive as losing
//! data) or replay a recorded session. With `--key-file` on both sides:
//!
//! 1. the client sends `Auth(version, client nonce)`, the witness answers
//!    `Challenge(witness nonce)` (both unauthenticated, both 16 random bytes);
//! 2. both derive a session key `keyed_blake3(psk, "plugpull session v1" | client nonce |
//!    witness nonce)`, so no two connections share a key;
//! 3. every later frame in either direction sets [`FLAG_MAC`] and ends with a 16-byte MAC
//!    `keyed_blake3(session key, direction | counter u64 LE | len | type | payload)`,
//!    where the counter numbers the sealed frames of that direction from 0.
//!
//! A frame replayed from another connection or run fails because the session key
//! differs; one replayed, dropped or reordered within a connection fails because the
//! counter differs; one reflected back at its sender fails because the direction
//! differs. Byte layouts are in docs/protocol.md.

use crate::wire::frame::{self, FLAG_MAC, Frame, MAC_BYTES};
use std::path::{Path, PathBuf};

/// Bytes of each side's handshake nonce.
pub const NONCE_BYTES: usize = 16;
/// Fewest bytes a key file must hold (after trimming whitespace): 128 bits of secret if
/// random, which is what `head -c 32 /dev/urandom | base64 > key` gives with margin.
pub const MIN_KEY_FILE_BYTES: usize = 16;
/// The largest key file read: a key is a line of text; anything bigger is the wrong file.
pub const MAX_KEY_FILE_BYTES: u64 = 4096;
/// Context string that turns a key file's bytes into the pre-shared key.
const KEY_CONTEXT: &str = "plugpull 2025 witness pre-shared key v1";
/// Context string that turns the pre-shared key into the key of log end-mark MACs.
const LOG_MARK_CONTEXT: &str = "plugpull 2025 ack log end mark v1";
/// Prefix of the session-key derivation input.
const SESSION_LABEL: &[u8] = b"plugpull session v1";

/// Direction byte in the MAC input: frames from the writer or fetcher to the witness.
pub const DIR_TO_WITNESS: u8 = 1;
/// Direction byte in the MAC input: frames from the witness to its client.
pub const DIR_FROM_WITNESS: u8 = 2;

/// The pre-shared key, derived from a key file's bytes.
#[derive(Clone)]
pub struct Key([u8; 32]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material, not even in a debug dump of the options.
        f.write_str("Key(..)")
    }
}

impl Key {
    /// Derives the key from any secret bytes (leading and trailing whitespace ignored, so
    /// a hex or base64 line with a newline works).
    pub fn from_secret(secret: &[u8]) -> Result<Key, KeyError> {
        let s = secret.trim_ascii();
        if s.len() < MIN_KEY_FILE_BYTES {
            return Err(KeyError::TooShort { held: s.len() });
        }
        Ok(Key(blake3::derive_key(KEY_CONTEXT, s)))
    }

    /// Reads a key file (`--key-file`): a regular file of at most
    /// [`MAX_KEY_FILE_BYTES`], so `--key-file /dev/zero` or a disk image named by
    /// mistake is refused instead of read until memory runs out.
    pub fn from_file(path: &Path) -> Result<Key, KeyError> {
        let bytes = crate::userfile::read_bounded(path, MAX_KEY_FILE_BYTES, "a key file")
            .map_err(KeyError::Unusable)?;
        Key::from_secret(&bytes).map_err(|e| KeyError::File {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// The MAC of a log file's end mark (`witness::store::export`): keyed BLAKE3 under a
    /// key derived from this one for that purpose only, so a mark's MAC is never a valid
    /// frame MAC.
    pub fn log_mark_mac(&self, data: &[u8]) -> [u8; 32] {
        let mark_key = blake3::derive_key(LOG_MARK_CONTEXT, &self.0);
        *blake3::keyed_hash(&mark_key, data).as_bytes()
    }

    /// A key for another protocol that shares this key file (the campaign's agent
    /// protocol), derived under that protocol's own context string: a MAC under it is
    /// never valid on a witness connection, nor the other way round.
    pub fn derive_subkey(&self, context: &str) -> [u8; 32] {
        blake3::derive_key(context, &self.0)
    }

    /// The session key of one connection.
    fn session_key(&self, client: &[u8; NONCE_BYTES], witness: &[u8; NONCE_BYTES]) -> [u8; 32] {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(SESSION_LABEL);
        h.update(client);
        h.update(witness);
        *h.finalize().as_bytes()
    }
}

/// Why a key cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "the key holds {held} bytes; at least {min} are needed. Make one \
         with `head -c 32 /dev/urandom | base64 > witness.key` and copy it to the \
         writer and the witness",
        min = MIN_KEY_FILE_BYTES
    )]
    TooShort { held: usize },
    /// Not a regular file, too big, or unreadable.
    #[error("the key file")]
    Unusable(#[source] crate::userfile::UserFileError),
    /// The file was read; its content is no key.
    #[error("key file {}", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: Box<KeyError>,
    },
}

/// `--key-file` as an option: `None` means no authentication.
pub fn load_key(path: Option<&Path>) -> Result<Option<Key>, KeyError> {
    path.map(Key::from_file).transpose()
}

/// A fresh random nonce.
pub fn nonce() -> [u8; NONCE_BYTES] {
    let mut n = [0u8; NONCE_BYTES];
    crate::rng::fill_os_random(&mut n);
    n
}

fn mac(key: &[u8; 32], dir: u8, counter: u64, authenticated: &[u8]) -> [u8; MAC_BYTES] {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(&[dir]);
    h.update(&counter.to_le_bytes());
    h.update(authenticated);
    let mut out = [0u8; MAC_BYTES];
    out.copy_from_slice(&h.finalize().as_bytes()[..MAC_BYTES]);
    out
}

/// Adds MACs to the frames one side sends.
pub struct Sealer {
    key: [u8; 32],
    dir: u8,
    counter: u64,
}

/// Checks the MACs of the frames one side receives.
pub struct Opener {
    key: [u8; 32],
    dir: u8,
    counter: u64,
}

/// Both halves of a connection's authentication, split so a reader thread and a writer
/// thread can each own one.
pub struct Session {
    pub sealer: Sealer,
    pub opener: Opener,
}

impl Session {
    /// The client's session (writer or fetcher).
    pub fn client(key: &Key, client: &[u8; NONCE_BYTES], witness: &[u8; NONCE_BYTES]) -> Session {
        let k = key.session_key(client, witness);
        Session {
            sealer: Sealer {
                key: k,
                dir: DIR_TO_WITNESS,
                counter: 0,
            },
            opener: Opener {
                key: k,
                dir: DIR_FROM_WITNESS,
                counter: 0,
            },
        }
    }

    /// The witness's session.
    pub fn witness(key: &Key, client: &[u8; NONCE_BYTES], witness: &[u8; NONCE_BYTES]) -> Session {
        let k = key.session_key(client, witness);
        Session {
            sealer: Sealer {
                key: k,
                dir: DIR_FROM_WITNESS,
                counter: 0,
            },
            opener: Opener {
                key: k,
                dir: DIR_TO_WITNESS,
                counter: 0,
            },
        }
    }
}

impl Sealer {
    /// Turns the unauthenticated frame at `out[start..]` (it must be the last frame in
    /// `out`, as [`frame::encode_into`] or `Msg::encode_into` just left it) into an
    /// authenticated one: sets [`FLAG_MAC`], appends the MAC and recomputes the CRC.
    pub fn seal(&mut self, out: &mut Vec<u8>, start: usize) {
        let body_end = out.len() - frame::CRC_BYTES;
        out.truncate(body_end);
        let len = body_end - start - frame::LEN_BYTES + MAC_BYTES;
        assert!(
            len <= frame::MAX_FRAME_BYTES,
            "sealed frame of {len} bytes exceeds MAX_FRAME_BYTES"
        );
        out[start..start + frame::LEN_BYTES].copy_from_slice(&(len as u32).to_le_bytes());
        out[start + frame::LEN_BYTES] |= FLAG_MAC;
        let m = mac(&self.key, self.dir, self.counter, &out[start..]);
        self.counter += 1;
        out.extend_from_slice(&m);
        let crc = crc32fast::hash(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }
}

/// Why a frame failed authentication. Messages say what the user should check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthError {
    /// A frame without a MAC on an authenticated connection.
    Missing,
    /// A frame with a MAC where no key is configured.
    Unexpected,
    /// The MAC does not match.
    Mismatch { counter: u64 },
}

impl std::fmt::Display for AuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthError::Missing => f.write_str(
                "unauthenticated frame on an authenticated connection (the peer has no \
                 --key-file, or the frame was injected)",
            ),
            AuthError::Unexpected => f.write_str(
                "the frame carries a MAC but this side has no key: pass the same \
                 --key-file on both sides",
            ),
            AuthError::Mismatch { counter } => write!(
                f,
                "MAC check failed on frame {counter} of this connection: the peer's key \
                 differs from ours (check --key-file on both sides), or the frame was \
                 forged or replayed from another connection"
            ),
        }
    }
}

impl std::error::Error for AuthError {}

impl Opener {
    /// Checks the MAC of a received frame and advances the counter.
    pub fn open(&mut self, f: &Frame<'_>) -> Result<(), AuthError> {
        let Some(got) = f.mac else {
            return Err(AuthError::Missing);
        };
        let want = mac(&self.key, self.dir, self.counter, f.authenticated);
        // Constant-time comparison: the attacker sees whether we reply, not how fast.
        let diff = want.iter().zip(got).fold(0u8, |d, (a, b)| d | (a ^ b));
        if diff != 0 {
            return Err(AuthError::Mismatch {
                counter: self.counter,
            });
        }
        self.counter += 1;
        Ok(())
    }
}

/// Checks a received frame against an optional session: no key and no MAC is fine, a
/// key demands a valid MAC, a MAC without a key is refused.
pub fn check(opener: Option<&mut Opener>, f: &Frame<'_>) -> Result<(), AuthError> {
    match opener {
        Some(o) => o.open(f),
        None if f.mac.is_some() => Err(AuthError::Unexpected),
        None => Ok(()),
    }
}

/// Seals the frame at `out[start..]` when a session is present.
pub fn seal_opt(sealer: Option<&mut Sealer>, out: &mut Vec<u8>, start: usize) {
    if let Some(s) = sealer {
        s.seal(out, start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::{Decoded, FrameType, decode, encode_into};

    fn key(s: &str) -> Key {
        Key::from_secret(s.as_bytes()).unwrap()
    }

    fn pair(k1: &Key, k2: &Key) -> (Session, Session) {
        let (c, w) = ([1; NONCE_BYTES], [2; NONCE_BYTES]);
        (Session::client(k1, &c, &w), Session::witness(k2, &c, &w))
    }

    fn sealed(s: &mut Sealer, ty: FrameType, p: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode_into(&mut v, ty, p);
        s.seal(&mut v, 0);
        v
    }

    fn open(o: &mut Opener, bytes: &[u8]) -> Result<Vec<u8>, AuthError> {
        match decode(bytes) {
            Decoded::Frame(f) => o.open(&f).map(|()| f.payload.to_vec()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn key_file_dev_zero_or_too_big_is_refused_unread() {
        let d = tempfile::tempdir().unwrap();
        let big = d.path().join("disk.img");
        std::fs::write(&big, vec![b'k'; MAX_KEY_FILE_BYTES as usize + 1]).unwrap();
        let e = Key::from_file(&big).unwrap_err();
        let why = |e: &KeyError| std::error::Error::source(e).map(|s| s.to_string());
        assert!(why(&e).unwrap().contains("over 4096 bytes"), "{e:?}");
        // /dev/null stands for /dev/zero: refused as a device before any read.
        let e = Key::from_file(Path::new("/dev/null")).unwrap_err();
        assert!(why(&e).unwrap().contains("not a regular file"), "{e:?}");
        let ok = d.path().join("witness.key");
        std::fs::write(&ok, "0123456789abcdef0123456789abcdef\n").unwrap();
        Key::from_file(&ok).unwrap();
    }

    #[test]
    fn sealed_frames_open_in_order_only() {
        let k = key("0123456789abcdef0123");
        let (mut c, mut w) = pair(&k, &k);
        let f0 = sealed(&mut c.sealer, FrameType::Bye, b"zero");
        let f1 = sealed(&mut c.sealer, FrameType::Bye, b"one");
        assert_eq!(open(&mut w.opener, &f0).unwrap(), b"zero");
        // Replaying f0 (counter 0) where frame 1 is due fails.
        assert_eq!(
            open(&mut w.opener, &f0),
            Err(AuthError::Mismatch { counter: 1 })
        );
        assert_eq!(open(&mut w.opener, &f1).unwrap(), b"one");
    }

    #[test]
    fn wrong_key_other_session_and_reflection_fail() {
        let (mut c, mut w) = pair(&key("0123456789abcdef0123"), &key("another key of 20 b"));
        let f = sealed(&mut c.sealer, FrameType::Heartbeat, b"");
        assert!(open(&mut w.opener, &f).is_err());

        let k = key("0123456789abcdef0123");
        let (mut c1, _) = pair(&k, &k);
        let mut w2 = Session::witness(&k, &[1; NONCE_BYTES], &[3; NONCE_BYTES]);
        let f = sealed(&mut c1.sealer, FrameType::Heartbeat, b"");
        assert!(open(&mut w2.opener, &f).is_err(), "other connection");

        let (mut c, _) = pair(&k, &k);
        let f = sealed(&mut c.sealer, FrameType::Heartbeat, b"");
        assert!(open(&mut c.opener, &f).is_err(), "reflected");
    }

    #[test]
    fn any_bit_flip_of_a_sealed_frame_is_refused() {
        let k = key("0123456789abcdef0123");
        let (mut c, _) = pair(&k, &k);
        let f = sealed(&mut c.sealer, FrameType::Durable, &9u64.to_le_bytes());
        for i in 0..f.len() - frame::CRC_BYTES {
            for bit in 0..8 {
                let mut g = f.clone();
                g[i] ^= 1 << bit;
                // Fix up the CRC so only the MAC can catch it.
                let n = g.len() - frame::CRC_BYTES;
                let crc = crc32fast::hash(&g[..n]);
                g[n..].copy_from_slice(&crc.to_le_bytes());
                let (_, mut w) = pair(&k, &k);
                if let Decoded::Frame(fr) = decode(&g) {
                    assert!(w.opener.open(&fr).is_err(), "flip {i}.{bit} accepted");
                }
            }
        }
    }

    #[test]
    fn short_keys_are_refused_and_debug_hides_the_key() {
        assert!(Key::from_secret(b"  short \n").is_err());
        assert_eq!(format!("{:?}", key("0123456789abcdef0123")), "Key(..)");
        // Whitespace around the secret does not change the key.
        let (mut c, mut w) = pair(&key("0123456789abcdef0123\n"), &key("0123456789abcdef0123"));
        let f = sealed(&mut c.sealer, FrameType::Heartbeat, b"");
        assert!(open(&mut w.opener, &f).is_ok());
    }

    #[test]
    fn check_without_key() {
        let k = key("0123456789abcdef0123");
        let (mut c, _) = pair(&k, &k);
        let f = sealed(&mut c.sealer, FrameType::Heartbeat, b"");
        let Decoded::Frame(fr) = decode(&f) else {
            panic!()
        };
        assert_eq!(check(None, &fr), Err(AuthError::Unexpected));
        let plain = frame::encode(FrameType::Heartbeat, b"");
        let Decoded::Frame(fr) = decode(&plain) else {
            panic!()
        };
        assert_eq!(check(None, &fr), Ok(()));
        let (_, mut w) = pair(&k, &k);
        assert_eq!(check(Some(&mut w.opener), &fr), Err(AuthError::Missing));
    }
}
