//! `driver = "serial"`: a relay or load switch on a serial port.
//!
//! Two protocols:
//! - `plugpull`: the line protocol of hardware/firmware/plugpull_switch (documented in
//!   hardware/firmware/PROTOCOL.md). Requests are ASCII lines (`PING`, `STATE?`, `OFF ch`,
//!   `ON ch`, `PULSE ch ms`); every reply is `OK <µs> ...` or `ERR <µs> message`, the µs
//!   being the board's clock when it acted. A timed pulse ends with an `EVT <µs> ON ch`
//!   line. Other lines (a boot banner) are skipped.
//!
//!   Why replies are paired with requests: a serial line can be slow, and a board that
//!   answers after the driver gave up waiting (or answers a line it was never sent, such
//!   as its own boot banner echoed back by a port not yet raw) must not have that reply
//!   read as the answer to the next request. So before each request the driver drops what
//!   already arrived (a reply cannot precede its request); an OK counts only if it names
//!   the request (`PONG` for PING, `STATE` for STATE?, else the request itself); and an
//!   ERR is a refusal only when no earlier request is still unanswered (the board answers
//!   in order, so an ERR is first owed to the oldest request that timed out).
//! - `ch340`: the cheap CH340 relay boards: 4-byte frames `A0 ch state sum`, no reply.
//!
//! Why raw termios through libc: one port, one setting (raw 8N1 at a baud rate); a
//! serial crate would add more than it saves.

use super::error::PowerError;
use super::fall::{Trace, parse_trace};
use super::switch::{Capabilities, PowerSwitch, Scope, SwitchTiming};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Plugpull,
    Ch340,
}

pub struct SerialSwitch {
    port: String,
    file: File,
    protocol: Protocol,
    channel: u32,
    timeout: Duration,
    pending: Vec<u8>,
    /// Requests that timed out and whose reply has not been seen: the next replies may
    /// be theirs. Zero once a reply answers a later request (the board answers in order).
    unanswered: u32,
    /// The firmware's identification from PING.
    pub firmware: Option<String>,
    /// What the firmware says it can do beyond version 1 (`features=trace,ramp` in its
    /// PONG); empty for a version 1 board.
    pub features: Vec<String>,
    /// The fall time of the following cuts (`RAMP`), ms; 0 cuts with `OFF`.
    ramp_ms: u64,
}

/// The features a PONG names: `features=trace,ramp` (version 2 boards); none for a
/// version 1 board, whose PONG has no such word.
pub fn pong_features(pong: &str) -> Vec<String> {
    pong.split_whitespace()
        .find_map(|w| w.strip_prefix("features="))
        .map(|f| {
            f.split(',')
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A CH340 relay frame: `A0 channel state checksum` (state 1 = on).
pub fn ch340_frame(channel: u32, on: bool) -> [u8; 4] {
    let ch = channel as u8;
    let st = on as u8;
    [0xA0, ch, st, 0xA0u8.wrapping_add(ch).wrapping_add(st)]
}

/// A parsed reply line of the firmware protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// "OK", "ERR" or "EVT".
    pub kind: String,
    pub micros: u64,
    /// The rest of the line.
    pub text: String,
}

/// Whether `reply` is the OK answer to `request`: the firmware's OK names what it did,
/// `PONG` for PING, `STATE` for STATE?, else the request's own words (`OFF 1`,
/// `PULSE 1 150`).
pub fn answers(reply: &Reply, request: &str) -> bool {
    let mut said = reply.text.split_whitespace();
    reply.kind == "OK"
        && request.split_whitespace().enumerate().all(|(i, word)| {
            let expected = match (i, word) {
                (0, "PING") => "PONG",
                (0, "STATE?") => "STATE",
                (0, "TRACE?") => "TRACE",
                _ => word,
            };
            said.next() == Some(expected)
        })
}

pub fn parse_reply(line: &str) -> Option<Reply> {
    let mut it = line.trim().splitn(3, ' ');
    let kind = it.next()?;
    if !matches!(kind, "OK" | "ERR" | "EVT") {
        return None;
    }
    let micros = it.next()?.parse().ok()?;
    Some(Reply {
        kind: kind.into(),
        micros,
        text: it.next().unwrap_or("").to_string(),
    })
}

fn baud_const(baud: u32) -> Result<libc::speed_t, PowerError> {
    Ok(match baud {
        9600 => libc::B9600,
        19200 => libc::B19200,
        38400 => libc::B38400,
        57600 => libc::B57600,
        115200 => libc::B115200,
        230400 => libc::B230400,
        baud => return Err(PowerError::UnsupportedBaud { baud }),
    })
}

impl SerialSwitch {
    /// Opens `port` raw 8N1 at `baud`. For the plugpull protocol, waits for the board to
    /// answer PING (boards that reset when the port opens need a second or two; the
    /// firmware comes up with the rails ON, so the reset cuts nothing).
    pub fn open(
        port: &str,
        baud: u32,
        protocol: Protocol,
        channel: u32,
        timeout: Duration,
    ) -> Result<SerialSwitch, PowerError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags_noctty()
            .open(port)
            .map_err(|source| PowerError::SerialOpen {
                port: port.to_string(),
                source,
            })?;
        configure(&file, baud).map_err(|e| PowerError::SerialConfigure {
            port: port.to_string(),
            source: Box::new(e),
        })?;
        let mut s = SerialSwitch {
            port: port.into(),
            file,
            protocol,
            channel,
            timeout,
            pending: vec![],
            unanswered: 0,
            firmware: None,
            features: vec![],
            ramp_ms: 0,
        };
        if protocol == Protocol::Plugpull {
            let t0 = Instant::now();
            loop {
                match s.transact("PING") {
                    Ok(r) => {
                        s.features = pong_features(&r.text);
                        s.firmware = Some(r.text);
                        break;
                    }
                    Err(e) if t0.elapsed() > timeout.max(Duration::from_secs(3)) => {
                        return Err(PowerError::NoPing {
                            port: port.to_string(),
                            source: Box::new(e),
                        });
                    }
                    Err(_) => {}
                }
            }
        }
        Ok(s)
    }

    fn read_line(&mut self, deadline: Instant) -> Result<String, PowerError> {
        loop {
            if let Some(i) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=i).collect();
                return Ok(String::from_utf8_lossy(&line).trim().to_string());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(PowerError::NoReply {
                    port: self.port.clone(),
                    timeout: self.timeout,
                });
            }
            let mut pfd = libc::pollfd {
                fd: self.file.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd on the stack, count 1.
            let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(1000) as i32 + 1) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e.into());
            }
            if n == 0 {
                continue;
            }
            let mut buf = [0u8; 256];
            match self.file.read(&mut buf) {
                Ok(0) => {
                    return Err(PowerError::PortClosed {
                        port: self.port.clone(),
                    });
                }
                Ok(k) => self.pending.extend_from_slice(&buf[..k]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(PowerError::SerialRead {
                        port: self.port.clone(),
                        source,
                    });
                }
            }
        }
    }

    /// Drops every complete line that has already arrived: sent before the next request,
    /// none of them can answer it. A reply among them settles an unanswered request. A
    /// partial last line stays; the rest of it is judged when it arrives. A closed or
    /// failing port is left for the request's own write and read to report.
    fn drain_input(&mut self) {
        let mut buf = [0u8; 256];
        loop {
            match self.file.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => self.pending.extend_from_slice(&buf[..k]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let Some(end) = self.pending.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        let stale: Vec<u8> = self.pending.drain(..=end).collect();
        let late_replies = String::from_utf8_lossy(&stale)
            .lines()
            .filter_map(parse_reply)
            .filter(|r| r.kind != "EVT")
            .count();
        self.unanswered = self.unanswered.saturating_sub(late_replies as u32);
    }

    /// Waits for the answer to `request`: its OK, or an ERR no earlier request may own.
    /// Banners, events, and late replies to earlier requests are skipped.
    fn await_answer(&mut self, request: &str, deadline: Instant) -> Result<Reply, PowerError> {
        loop {
            let line = self.read_line(deadline)?;
            let Some(r) = parse_reply(&line) else {
                continue;
            };
            if answers(&r, request) {
                self.unanswered = 0;
                return Ok(r);
            }
            match r.kind.as_str() {
                "ERR" if self.unanswered == 0 => {
                    return Err(PowerError::SwitchRefused {
                        port: self.port.clone(),
                        text: r.text,
                    });
                }
                "OK" | "ERR" => self.unanswered = self.unanswered.saturating_sub(1),
                _ => {}
            }
        }
    }

    /// Waits for the `EVT <µs> ON <channel>` that ends a board-timed pulse, skipping
    /// banners and other replies; an ERR meanwhile is a refusal.
    fn await_rail_back(&mut self, deadline: Instant) -> Result<Reply, PowerError> {
        let back = format!("ON {}", self.channel);
        loop {
            let line = self.read_line(deadline)?;
            let Some(r) = parse_reply(&line) else {
                continue;
            };
            match r.kind.as_str() {
                "ERR" => {
                    return Err(PowerError::SwitchRefused {
                        port: self.port.clone(),
                        text: r.text,
                    });
                }
                "EVT" if r.text.split_whitespace().eq(back.split_whitespace()) => return Ok(r),
                _ => {}
            }
        }
    }

    /// Sends one request line and returns its OK reply. A request left without a reply
    /// at the timeout is remembered, so its late reply is not taken for a later answer.
    pub fn transact(&mut self, line: &str) -> Result<Reply, PowerError> {
        self.drain_input();
        self.file
            .write_all(format!("{line}\n").as_bytes())
            .map_err(|source| PowerError::SerialWrite {
                port: self.port.clone(),
                source,
            })?;
        let answer = self.await_answer(line, Instant::now() + self.timeout);
        if let Err(PowerError::NoReply { .. }) = answer {
            self.unanswered += 1;
        }
        answer
    }

    fn set(&mut self, on: bool) -> Result<SwitchTiming, PowerError> {
        let issued_ns = crate::model::now_ns();
        let switch_us = match self.protocol {
            Protocol::Plugpull => {
                let cmd = match (on, self.ramp_ms) {
                    (true, _) => format!("ON {}", self.channel),
                    (false, 0) => format!("OFF {}", self.channel),
                    (false, ms) => format!("RAMP {} {ms}", self.channel),
                };
                Some(self.transact(&cmd)?.micros)
            }
            Protocol::Ch340 => {
                self.file
                    .write_all(&ch340_frame(self.channel, on))
                    .map_err(|source| PowerError::SerialWrite {
                        port: self.port.clone(),
                        source,
                    })?;
                // SAFETY: tcdrain on our open fd; waits until the frame left the UART.
                unsafe { libc::tcdrain(self.file.as_raw_fd()) };
                None
            }
        };
        Ok(SwitchTiming {
            issued_ns,
            done_ns: crate::model::now_ns(),
            switch_us,
        })
    }
}

trait NoCtty {
    fn custom_flags_noctty(&mut self) -> &mut Self;
}
impl NoCtty for std::fs::OpenOptions {
    fn custom_flags_noctty(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
    }
}

/// Raw 8N1 at `baud`, no flow control.
fn configure(f: &File, baud: u32) -> Result<(), PowerError> {
    let fd = f.as_raw_fd();
    let speed = baud_const(baud)?;
    // SAFETY: termios is plain data; tcgetattr fills it from our open fd.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and pointer to a termios.
    if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
        return Err(PowerError::NotASerialPort(std::io::Error::last_os_error()));
    }
    // SAFETY: the termios came from tcgetattr and is modified in place.
    unsafe {
        libc::cfmakeraw(&mut t);
        libc::cfsetispeed(&mut t, speed);
        libc::cfsetospeed(&mut t, speed);
    }
    t.c_cflag |= libc::CLOCAL | libc::CREAD;
    t.c_cflag &= !(libc::CRTSCTS | libc::CSTOPB | libc::PARENB);
    // SAFETY: valid fd and termios.
    if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) } != 0 {
        return Err(PowerError::SetSerialAttributes(
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

impl PowerSwitch for SerialSwitch {
    fn describe(&self) -> String {
        format!(
            "serial {} on {} channel {}{}",
            match self.protocol {
                Protocol::Plugpull => "plugpull firmware",
                Protocol::Ch340 => "CH340 relay",
            },
            self.port,
            self.channel,
            self.firmware
                .as_ref()
                .map(|f| format!(" ({f})"))
                .unwrap_or_default()
        )
    }
    fn capabilities(&self) -> Capabilities {
        let ours = self.protocol == Protocol::Plugpull;
        let has = |f: &str| ours && self.features.iter().any(|x| x == f);
        Capabilities {
            scope: Scope::Drive,
            precise_timing: ours,
            reports_state: ours,
            native_pulse: ours,
            ramp: has("ramp"),
            fall_trace: has("trace"),
        }
    }
    fn last_fall(&mut self) -> Result<Option<Trace>, PowerError> {
        if !self.capabilities().fall_trace {
            return Ok(None); // a version 1 board: no trace
        }
        let r = self.transact(&format!("TRACE? {}", self.channel))?;
        parse_trace(&r.text)
            .map(Some)
            .map_err(|source| PowerError::BadTrace {
                what: format!("{} (TRACE? {})", self.port, self.channel),
                source,
            })
    }
    fn set_fall_time(&mut self, fall: Duration) -> Result<(), PowerError> {
        super::switch::check_off("the fall time", fall)?;
        if !fall.is_zero() && !self.capabilities().ramp {
            return Err(PowerError::NoRamp {
                switch: self.describe(),
            });
        }
        self.ramp_ms = fall.as_millis() as u64;
        Ok(())
    }
    fn off(&mut self) -> Result<SwitchTiming, PowerError> {
        self.set(false)
    }
    fn on(&mut self) -> Result<SwitchTiming, PowerError> {
        self.set(true)
    }
    fn state(&mut self) -> Result<Option<bool>, PowerError> {
        if self.protocol != Protocol::Plugpull {
            return Ok(None);
        }
        // "STATE 1=ON 2=OFF"
        let r = self.transact("STATE?")?;
        let key = format!("{}=", self.channel);
        let v = r
            .text
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&key))
            .ok_or_else(|| PowerError::NoChannelState {
                reply: r.text.clone(),
                channel: self.channel,
            })?;
        Ok(Some(v.eq_ignore_ascii_case("ON")))
    }
    fn pulse(&mut self, off_for: Duration) -> Result<(SwitchTiming, SwitchTiming), PowerError> {
        super::switch::check_off("the time off", off_for)?;
        if self.protocol != Protocol::Plugpull {
            let off = self.off()?;
            std::thread::sleep(off_for);
            return Ok((off, self.on()?));
        }
        let issued_ns = crate::model::now_ns();
        let r = self.transact(&format!("PULSE {} {}", self.channel, off_for.as_millis()))?;
        let off = SwitchTiming {
            issued_ns,
            done_ns: crate::model::now_ns(),
            switch_us: Some(r.micros),
        };
        let e = self.await_rail_back(Instant::now() + off_for + self.timeout)?;
        let now = crate::model::now_ns();
        Ok((
            off,
            SwitchTiming {
                issued_ns: now,
                done_ns: now,
                switch_us: Some(e.micros),
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn ch340_frames_match_the_board_documentation() {
        assert_eq!(ch340_frame(1, true), [0xA0, 0x01, 0x01, 0xA2]);
        assert_eq!(ch340_frame(1, false), [0xA0, 0x01, 0x00, 0xA1]);
        assert_eq!(ch340_frame(2, true), [0xA0, 0x02, 0x01, 0xA3]);
    }
    #[test]
    fn replies_parse() {
        let r = parse_reply("OK 123456 OFF 1\r").unwrap();
        assert_eq!(
            (r.kind.as_str(), r.micros, r.text.as_str()),
            ("OK", 123456, "OFF 1")
        );
        assert!(parse_reply("plugpull_switch ready").is_none());
        assert!(parse_reply("OK x").is_none());
    }
    #[test]
    fn an_ok_answers_only_the_request_it_names() {
        let ok = |line| parse_reply(line).unwrap();
        assert!(answers(
            &ok("OK 1 PONG plugpull_switch/1 channels=2"),
            "PING"
        ));
        assert!(answers(&ok("OK 1 STATE 1=ON 2=OFF"), "STATE?"));
        assert!(answers(&ok("OK 1 OFF 1"), "OFF 1"));
        assert!(answers(&ok("OK 1 PULSE 1 150"), "PULSE 1 150"));
        assert!(!answers(
            &ok("OK 1 PONG plugpull_switch/1 channels=2"),
            "STATE?"
        ));
        assert!(!answers(&ok("OK 1 OFF 1"), "STATE?"));
        assert!(!answers(&ok("OK 1 OFF 1"), "ON 1"));
        assert!(!answers(&ok("OK 1 OFF 12"), "OFF 1"));
        assert!(!answers(&ok("OK 1 PULSE 1 150"), "PULSE 1 200"));
        assert!(!answers(&ok("ERR 1 unknown command"), "PING"));
        assert!(!answers(&ok("EVT 1 ON 1"), "ON 1"));
        assert!(answers(&ok("OK 1 TRACE 1 hz=20000 mv=1"), "TRACE? 1"));
        assert!(!answers(&ok("OK 1 TRACE 2 hz=20000 mv=1"), "TRACE? 1"));
        assert!(answers(&ok("OK 1 RAMP 1 50"), "RAMP 1 50"));
        assert!(!answers(&ok("OK 1 OFF 1"), "RAMP 1 50"));
    }
    #[test]
    fn a_version_1_board_has_no_features_and_a_version_2_board_names_them() {
        assert!(pong_features("PONG plugpull_switch/1 channels=2").is_empty());
        assert_eq!(
            pong_features("PONG plugpull_switch/2 channels=2 features=trace,ramp"),
            ["trace", "ramp"]
        );
    }
}
