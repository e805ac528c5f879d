//! Reaching the witness: connecting (with errors that say what to check), reading whole
//! frames from a blocking socket, the Auth/Challenge exchange of a keyed witness, and a
//! writer's Hello/Welcome.
//!
//! Why shared: the ack sender and fetch open connections the same way and must refuse
//! an unauthenticated frame the same way.

use crate::model::RunDescriptor;
use crate::wire::auth::{self, Key, Opener, Session};
use crate::wire::frame::{self, Decoded, FrameType};
use crate::wire::msg::{Msg, PROTOCOL_VERSION};
use crate::witness::client::error::{ClientError, ClientResult, Context, refuse};
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) fn connect_stream(addr: &str) -> ClientResult<TcpStream> {
    let unreachable = |e: &dyn std::fmt::Display| {
        ClientError::Witness(format!(
            "cannot reach the witness at {addr}: {e}: is `plugpull listen` running there?"
        ))
    };
    // A bad address is a usage error, not a witness that is down.
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| {
            ClientError::Witness(format!(
                "--witness {addr}: {e}: give the witness as HOST:PORT, the address `plugpull listen` prints (e.g. witness:7420)"
            ))
        })?
        .collect();
    let mut last = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => unreachable(&e),
        None => unreachable(&"no address"),
    })
}

/// Bytes requested from the socket per read.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// Reads whole frames from a blocking socket.
///
/// Why cursors over a buffer that stays initialised: growing the Vec by a zeroed 64 KiB
/// chunk before every read (and truncating after) cost a 64 KiB memset per Durable reply
/// of a few dozen bytes, on the writer's busy core.
#[derive(Default)]
pub(super) struct FrameReader {
    buf: Vec<u8>,
    /// Bytes before this were handed out as frames.
    start: usize,
    /// Bytes from here on hold nothing received yet.
    filled: usize,
}

impl FrameReader {
    /// The next message; `None` on a clean end of stream between frames. With an
    /// `opener`, every frame must carry a valid MAC, except an unauthenticated Error,
    /// which is returned (it can only end the connection, which anyone on the path
    /// could do anyway, and it carries the witness's reason for refusing us).
    pub(super) fn next(
        &mut self,
        s: &mut TcpStream,
        opener: Option<&mut Opener>,
    ) -> ClientResult<Option<Msg>> {
        loop {
            match frame::decode(&self.buf[self.start..self.filled]) {
                Decoded::Frame(f) => {
                    let n = f.len_bytes;
                    let plain_error =
                        opener.is_some() && f.mac.is_none() && f.ty == FrameType::Error;
                    let checked = if plain_error {
                        Ok(())
                    } else {
                        auth::check(opener, &f)
                    };
                    let m = match checked {
                        Ok(()) => Msg::decode(&f).map_err(ClientError::from),
                        Err(e) => Err(ClientError::Witness(format!(
                            "frame from the witness refused: {e}"
                        ))),
                    };
                    self.consume(n);
                    return m.map(Some);
                }
                Decoded::Error(e) => refuse!("bad frame from the witness: {e}"),
                Decoded::NeedMore { .. } => {}
            }
            let pending = self.make_room();
            let r = s.read(&mut self.buf[self.filled..]);
            match r {
                Ok(0) if pending == 0 => return Ok(None),
                Ok(0) => refuse!("the witness closed the connection in the middle of a frame"),
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl FrameReader {
    /// Drops the first `n` unread bytes (a frame handed out).
    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.filled {
            self.start = 0;
            self.filled = 0;
        }
    }

    /// Moves the unread bytes to the front and makes sure at least READ_CHUNK_BYTES
    /// follow them (zeroed only when the buffer grows); returns how many are unread.
    fn make_room(&mut self) -> usize {
        let pending = self.filled - self.start;
        if self.start > 0 {
            self.buf.copy_within(self.start..self.filled, 0);
            self.start = 0;
            self.filled = pending;
        }
        if self.buf.len() - self.filled < READ_CHUNK_BYTES {
            self.buf.resize(self.filled + READ_CHUNK_BYTES, 0);
        }
        pending
    }
}

/// With a key: sends Auth, reads the Challenge and returns the session; without a key,
/// nothing. Either way the stream is ready for the first real request.
pub(super) fn authenticate(
    s: &mut TcpStream,
    r: &mut FrameReader,
    addr: &str,
    key: Option<&Key>,
) -> ClientResult<Option<Session>> {
    let Some(key) = key else {
        return Ok(None);
    };
    let client_nonce = auth::nonce();
    s.write_all(
        &Msg::Auth {
            version: PROTOCOL_VERSION,
            nonce: client_nonce,
        }
        .encode(),
    )
    .with_context(|| format!("sending Auth to the witness at {addr}"))?;
    match r
        .next(s, None)
        .with_context(|| format!("waiting for the witness at {addr} to answer Auth"))?
    {
        Some(Msg::Challenge { nonce }) => Ok(Some(Session::client(key, &client_nonce, &nonce))),
        Some(Msg::Error { message }) => {
            refuse!(
                "the witness at {addr} refused authentication: {}",
                crate::model::peer_text::shown(&message)
            )
        }
        Some(m) => refuse!(
            "the witness at {addr} answered Auth with {:?}",
            m.frame_type()
        ),
        None => refuse!("the witness at {addr} closed the connection during authentication"),
    }
}

/// Encodes `m`, sealed when there is a session.
pub(super) fn encode_sealed(m: &Msg, session: Option<&mut Session>) -> Vec<u8> {
    let mut v = m.encode();
    auth::seal_opt(session.map(|s| &mut s.sealer), &mut v, 0);
    v
}

/// Connects, authenticates when keyed, sends Hello; returns the stream, the witness's
/// durable ack count and the session.
pub(super) fn handshake(
    addr: &str,
    desc: &RunDescriptor,
    resume: bool,
    key: Option<&Key>,
) -> ClientResult<(TcpStream, u64, Option<Session>)> {
    let mut s = connect_stream(addr)?;
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    s.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut r = FrameReader::default();
    let mut session = authenticate(&mut s, &mut r, addr, key)?;
    let hello = Msg::Hello {
        version: PROTOCOL_VERSION,
        resume,
        descriptor: desc.clone(),
    };
    s.write_all(&encode_sealed(&hello, session.as_mut()))
        .with_context(|| format!("sending Hello to the witness at {addr}"))?;
    match r
        .next(&mut s, session.as_mut().map(|x| &mut x.opener))
        .with_context(|| format!("waiting for the witness at {addr} to answer Hello"))?
    {
        Some(Msg::Welcome {
            version,
            durable_acks,
        }) => {
            if version != PROTOCOL_VERSION {
                refuse!(
                    "the witness at {addr} speaks protocol {version}, this writer {}: run the \
                     same plugpull version on both",
                    PROTOCOL_VERSION
                );
            }
            s.set_write_timeout(None)?;
            Ok((s, durable_acks, session))
        }
        Some(Msg::Error { message }) => refuse!(
            "the witness at {addr} refused the run: {}",
            crate::model::peer_text::shown(&message)
        ),
        Some(m) => refuse!(
            "the witness at {addr} answered Hello with {:?}",
            m.frame_type()
        ),
        None => refuse!("the witness at {addr} closed the connection during the handshake"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Frames arriving several to a read, split across reads, and one larger than a read
    /// chunk come out whole and in order, then a clean end of stream.
    #[test]
    fn frame_reader_returns_every_frame_however_the_bytes_arrive() {
        let big = "x".repeat(3 * READ_CHUNK_BYTES + 17);
        let mut sent = vec![];
        for i in 0..40u64 {
            sent.push(Msg::Durable { durable_acks: i });
            if i % 13 == 5 {
                sent.push(Msg::Error {
                    message: big.clone(),
                });
            }
            sent.push(Msg::Heartbeat);
        }
        let bytes: Vec<u8> = sent.iter().flat_map(Msg::encode).collect();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let writer = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            // Pieces of uneven sizes, flushed apart, so reads end inside frames.
            let mut at = 0;
            for (k, step) in [1, 7, 3000, 20, 100_000, 5, 70_000]
                .iter()
                .cycle()
                .enumerate()
            {
                if at >= bytes.len() {
                    break;
                }
                let end = (at + step).min(bytes.len());
                s.write_all(&bytes[at..end]).unwrap();
                at = end;
                if k % 3 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        });
        let mut s = TcpStream::connect(addr).unwrap();
        let mut r = FrameReader::default();
        let mut got = vec![];
        while let Some(m) = r.next(&mut s, None).unwrap() {
            got.push(m);
        }
        writer.join().unwrap();
        assert_eq!(got.len(), sent.len());
        assert!(got == sent, "frames differ");
    }
}
