//! Checking the frames of a run's log, in order: what each holds, whether the order and
//! numbering make sense, what damage cost, and whether the file proved it is whole.
//!
//! Why one checker: the witness recovering a log, a reader of a log file, the witness
//! streaming a run to `fetch` and the fuzz targets must all agree on what a valid log
//! is. It knows nothing of where the frames come from (module `scan` reads them) or of
//! the journal (module `reader` overlays it).

use crate::model::{Ack, FileName, RunDescriptor, RunLog, WitnessEvent};
use crate::wire::auth::Key;
use crate::wire::frame::{self, FrameType};
use crate::wire::msg::{self, LOG_VERSION, LOG_VERSION_PLAIN, Msg};
use crate::witness::store::error::{StoreResult, invalid};
use crate::witness::store::export::EndMark;
use crate::witness::store::scan::{Damage, MAX_TORN_TAIL_BYTES, ScanEnd};

/// `WitnessEvent::kind` of the event that names damage found in a log or journal.
pub const DAMAGE_EVENT: &str = "log-damage";

/// Checks the order of frames in a log (header, descriptor, then contiguous acks and
/// events, and in `plugpull fetch` output an end mark) and hands out what they hold.
/// Shared by recovery, read_log_file and fetch. It also keeps the running digest and
/// the damage that [`LogChecker::note_damage`] reports, so a reader can tell whether
/// the log proved it is whole ([`LogChecker::wholeness`]).
#[derive(Clone, Default)]
pub struct LogChecker {
    pub descriptor: Option<RunDescriptor>,
    /// Format version in the log's header (0 before the header is read).
    pub version: u16,
    /// Acks read from frames that checked (what a fetch announces in FetchEnd).
    pub acks: u64,
    /// Number the next Acks frame must start at.
    next_ack: u64,
    frames: u64,
    /// Damage met so far, in file order.
    pub damage: Vec<LogDamage>,
    /// Set by `note_damage`, cleared by the next Acks frame: it may start past
    /// `next_ack` (the acks in between were lost to the damage).
    gap_allowed: bool,
    /// BLAKE3 of every frame before the end mark, and how many bytes that was.
    digest: blake3::Hasher,
    digested_bytes: u64,
    /// The end mark, and how many frames came after it (there should be none).
    mark: Option<EndMark>,
    frames_after_mark: u64,
    key: Option<Key>,
    /// The names of the last FileAcks frame's acks (reused like the ack scratch).
    names: Vec<FileName>,
}

/// Damage in a log and what it cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDamage {
    pub damage: Damage,
    /// Acks read before the damage.
    pub acks_before: u64,
    /// Acks the damaged bytes held, when an Acks frame after them tells.
    pub acks_lost: Option<u64>,
}

/// One checked item of a log.
pub enum LogItem<'a> {
    Header,
    Descriptor(&'a RunDescriptor),
    Acks {
        first: u64,
        acks: &'a [Ack],
        /// One name per ack for a FileAcks frame; empty for Acks and CompactAcks.
        names: &'a [FileName],
    },
    Event(WitnessEvent),
    /// The end mark of a `plugpull fetch` output file (checked by `wholeness`).
    EndMark,
}

impl LogChecker {
    /// A checker that also checks the MAC of a signed end mark with `key`.
    pub fn with_key(key: Option<&Key>) -> LogChecker {
        LogChecker {
            key: key.cloned(),
            ..LogChecker::default()
        }
    }

    /// Whether an end mark was read (a `plugpull fetch` output file).
    pub fn has_end_mark(&self) -> bool {
        self.mark.is_some()
    }

    /// Records that the bytes before the next frame were damaged.
    pub fn note_damage(&mut self, d: &Damage) {
        self.damage.push(LogDamage {
            damage: d.clone(),
            acks_before: self.acks,
            acks_lost: None,
        });
        self.gap_allowed = true;
    }

    /// Checks one frame. `scratch` is reused to decode ack batches without allocating.
    pub fn check<'s>(
        &'s mut self,
        f: &frame::Frame<'_>,
        scratch: &'s mut Vec<Ack>,
    ) -> StoreResult<LogItem<'s>> {
        self.frames += 1;
        if f.mac.is_some() {
            invalid!(
                "ack log frame {} carries a MAC: log files hold checked frames without MACs \
                 (is this a capture of the wire?)",
                self.frames
            );
        }
        if self.frames <= 2 && !self.damage.is_empty() {
            invalid!(
                "the log's header or run descriptor is damaged ({}): the file cannot say \
                 which run it belongs to",
                self.damage[0].damage
            );
        }
        if self.mark.is_some() {
            self.frames_after_mark += 1;
        } else if f.ty != FrameType::LogEnd {
            self.digest.update(f.raw);
            self.digested_bytes += f.raw.len() as u64;
        }
        match (self.frames, f.ty) {
            (1, FrameType::FileHeader) => match Msg::decode(f)? {
                Msg::FileHeader { version }
                    if (LOG_VERSION_PLAIN..=LOG_VERSION).contains(&version) =>
                {
                    self.version = version;
                    Ok(LogItem::Header)
                }
                Msg::FileHeader { version } => invalid!(
                    "ack log format version {version} is not supported (this build reads \
                     versions {LOG_VERSION_PLAIN} to {LOG_VERSION}); use the plugpull \
                     version that wrote it"
                ),
                _ => unreachable!(),
            },
            (1, _) => invalid!("not a plugpull ack log: the first frame is not a log header"),
            (2, FrameType::Descriptor) => match Msg::decode(f)? {
                Msg::Descriptor(d) => Ok(LogItem::Descriptor(self.descriptor.insert(d))),
                _ => unreachable!(),
            },
            (2, t) => invalid!("ack log: second frame is {t:?}, expected the run descriptor"),
            (
                _,
                t @ (FrameType::Acks
                | FrameType::CompactAcks
                | FrameType::PackedAcks
                | FrameType::FileAcks),
            ) => {
                scratch.clear();
                self.names.clear();
                let first = match t {
                    FrameType::Acks => msg::decode_acks_into(f.payload, scratch)?,
                    FrameType::CompactAcks => msg::decode_compact_acks_into(f.payload, scratch)?,
                    FrameType::PackedAcks => msg::decode_packed_acks_into(f.payload, scratch)?,
                    _ => msg::decode_file_acks_into(f.payload, scratch, &mut self.names)?,
                };
                self.check_numbering(first)?;
                self.acks += scratch.len() as u64;
                self.next_ack = first + scratch.len() as u64;
                Ok(LogItem::Acks {
                    first,
                    acks: scratch,
                    names: &self.names,
                })
            }
            (_, FrameType::Event) => match Msg::decode(f)? {
                Msg::Event(e) => Ok(LogItem::Event(e)),
                _ => unreachable!(),
            },
            (_, FrameType::LogEnd) => {
                let m = EndMark::decode(f.payload)?;
                if self.mark.is_none() {
                    self.mark = Some(m);
                }
                Ok(LogItem::EndMark)
            }
            (_, t) => invalid!("ack log holds a {t:?} frame, which belongs only on the wire"),
        }
    }

    /// An Acks frame continues the numbering, or starts past it right after damage.
    fn check_numbering(&mut self, first: u64) -> StoreResult<()> {
        let gap_allowed = std::mem::take(&mut self.gap_allowed);
        if gap_allowed && first >= self.next_ack {
            if let Some(d) = self.damage.last_mut() {
                d.acks_lost = Some(first - self.next_ack);
            }
            return Ok(());
        }
        if first != self.next_ack {
            invalid!(
                "ack log is inconsistent: a batch starts at ack {first} but {} acks \
                 precede it (the file was edited or damaged)",
                self.next_ack
            );
        }
        Ok(())
    }

    /// Whether the scanned log proved it holds every ack, nothing more and nothing less:
    /// only a `plugpull fetch` output file whose end mark matches can.
    pub fn wholeness(&self, end: &ScanEnd) -> Wholeness {
        let not = |how: String| Wholeness { whole: false, how };
        let Some(m) = &self.mark else {
            return not(
                "the log has no end mark, so nothing proves it whole: it may have been cut \
                 short (a witness's own log, or a file fetched by an older plugpull, has \
                 none either: fetch the run again with `plugpull fetch`)"
                    .into(),
            );
        };
        if !self.damage.is_empty() {
            return not("the log is damaged (see the damage)".into());
        }
        if self.frames_after_mark > 0 || end.tail_bytes > 0 {
            return not(format!(
                "{} frames and {} unreadable bytes follow the end mark: something was \
                 appended to the file",
                self.frames_after_mark, end.tail_bytes
            ));
        }
        let (frames_before, ours) = (self.frames - 1, *self.digest.finalize().as_bytes());
        if (m.acks, m.frames, m.bytes) != (self.acks, frames_before, self.digested_bytes) {
            return not(format!(
                "the end mark counts {} acks in {} frames and {} bytes, the file holds {} \
                 acks in {frames_before} frames and {} bytes: it was cut short, spliced or \
                 edited",
                m.acks, m.frames, m.bytes, self.acks, self.digested_bytes
            ));
        }
        if m.digest != ours {
            return not(
                "the digest in the end mark does not match the file: it was spliced or \
                 edited after it was fetched"
                    .into(),
            );
        }
        match (&m.mac, &self.key) {
            (Some(mac), Some(key)) if *mac == key.log_mark_mac(&m.signed) => Wholeness {
                whole: true,
                how: "the end mark is signed with the witness key and matches the file".into(),
            },
            (Some(_), Some(_)) => not(
                "the end mark's signature does not match: the file was forged, or it was \
                 fetched with a different --key-file"
                    .into(),
            ),
            (Some(_), None) => Wholeness {
                whole: true,
                how: "the end mark's digest matches the file (that catches damage and \
                      careless edits); its signature was not checked: pass --key-file to \
                      also rule out forgery"
                    .into(),
            },
            (None, Some(_)) => not(
                "the end mark is not signed although --key-file was given: fetch the run \
                 with --key-file to get a signed log"
                    .into(),
            ),
            (None, None) => Wholeness {
                whole: true,
                how: "the end mark's digest matches the file (that catches damage and \
                      careless edits, not forgery: anyone can recompute it; fetch and \
                      verify with --key-file for a signed mark)"
                    .into(),
            },
        }
    }

    /// Events naming the damage this scan met, for a reader's RunLog (kind
    /// [`DAMAGE_EVENT`]); `what` names the file.
    pub fn damage_events(&self, what: &str, end: &ScanEnd) -> Vec<WitnessEvent> {
        let mut out: Vec<WitnessEvent> = self
            .damage
            .iter()
            .map(|d| {
                let lost = match d.acks_lost {
                    Some(n) => format!("{n} acks lost with them"),
                    None => "how many acks were lost is unknown".into(),
                };
                damage_event(
                    d.acks_before,
                    format!("{what} is damaged: {}; {lost}", d.damage),
                )
            })
            .collect();
        if end.tail_bytes > MAX_TORN_TAIL_BYTES {
            out.push(damage_event(
                self.acks,
                format!(
                    "{what} is damaged: its last {} bytes, from byte {}, are unreadable ({}), \
                     more than one commit of the witness can leave torn",
                    end.tail_bytes,
                    end.valid_len_bytes,
                    end.tail.as_deref().unwrap_or("?")
                ),
            ));
        }
        out
    }
}

/// A [`DAMAGE_EVENT`] with `detail`.
pub fn damage_event(acks_before: u64, detail: String) -> WitnessEvent {
    WitnessEvent {
        at_ns: crate::model::now_ns(),
        kind: DAMAGE_EVENT.into(),
        peer: String::new(),
        durable_acks: acks_before,
        last_ack_at_ns: None,
        last_frame_at_ns: None,
        detail,
    }
}

/// The details of the damage events of a run (empty when its log was whole).
pub fn damage_details(log: &RunLog) -> Vec<String> {
    damage_in(&log.events)
}

/// [`damage_details`] of a run's events alone (a run streamed into a file, whose acks
/// are not held).
pub fn damage_in(events: &[WitnessEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.kind == DAMAGE_EVENT)
        .map(|e| e.detail.clone())
        .collect()
}

/// Whether a log proved it is whole, and how (or why not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wholeness {
    pub whole: bool,
    pub how: String,
}
