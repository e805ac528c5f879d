//! Power transitions of the model: power on (a new session: arm and apply post-cut
//! faults, reconcile held writes with media) and the deterministic cut.
//!
//! Why apart from the I/O path: these are the only places a session begins or ends, the
//! points where the oracle's notion of "conditional" fault changes meaning, so they are
//! read together.

use super::{Cache, Model, Power};
use crate::sim::media::PostCut;
use crate::sim::oracle::{Class, Event, records_in};
use crate::sim::profile::Kind;
use std::io;

impl Model {
    /// A new session: the cache starts empty, the faults armed by the last session come
    /// into force (and into the oracle), this session's are armed.
    pub(super) fn power_on_inner(&mut self) -> io::Result<()> {
        self.cache = Cache::default();
        let ev = Event::Start {
            seed: self.seed,
            profile: self.profile.to_string(),
            size_bytes: self.size_bytes,
        };
        self.emit(ev)?;
        let armed = self.sidecar.armed.clone();
        self.sidecar.power_on();
        self.log_post_cut_faults(armed)?;
        // Arm this session's post-cut faults before any write could make them matter.
        self.arm_post_cut_faults();
        if let Some(p) = &self.sidecar_file {
            self.sidecar.store(p)?;
        }
        self.power = if self.sidecar.active.dead {
            Power::Dead
        } else {
            Power::On
        };
        Ok(())
    }

    /// Logs the post-cut faults that came into force at this power on.
    fn log_post_cut_faults(&mut self, armed: PostCut) -> io::Result<()> {
        for (off, len) in armed.unreadable {
            let mut buf = vec![0u8; len as usize];
            self.image.read_at(&mut buf, off)?;
            let records = records_in(&buf, off);
            let id = self.fault_id();
            self.emit(Event::Fault {
                id,
                class: Class::Unreadable,
                write: 0,
                offset: off,
                len,
                records,
                flips: vec![],
                to_offset: None,
                conditional: false,
            })?;
        }
        if armed.dead {
            let id = self.fault_id();
            self.emit(Event::Fault {
                id,
                class: Class::Dead,
                write: 0,
                offset: 0,
                len: self.size_bytes,
                records: vec![],
                flips: vec![],
                to_offset: None,
                conditional: false,
            })?;
        }
        Ok(())
    }

    /// Metadata loss and dead drives: what the next power on will find.
    fn arm_post_cut_faults(&mut self) {
        match self.profile.kind {
            Kind::MetadataLoss => {
                let unit = 4096u64.min(self.size_bytes);
                let want = (self.size_bytes as f64 * self.profile.unreadable_fraction) as u64;
                let len = (want / unit * unit).clamp(unit, self.size_bytes / unit * unit);
                let slots = (self.size_bytes - len) / unit + 1;
                let off = self.rng_layout.below(slots) * unit;
                self.sidecar.armed = PostCut {
                    unreadable: vec![(off, len)],
                    read_hang_ms: self.profile.read_hang_ms,
                    dead: false,
                };
            }
            Kind::Dead => {
                self.sidecar.armed = PostCut {
                    dead: true,
                    ..PostCut::default()
                }
            }
            _ => {}
        }
    }

    /// Power comes back after a cut. A dead drive fails here.
    pub fn power_on(&mut self) -> io::Result<()> {
        if self.power == Power::On {
            return Ok(());
        }
        self.power_on_inner()?;
        self.assert_invariants_and_replay();
        self.check_open()
    }

    /// The deterministic power cut: the profile's last chance to destage, then the cache
    /// is gone. A PLP drive destages everything; any other drive destages a random subset
    /// of unflushed writes and may tear one; held and stuck writes are lost.
    pub fn cut(&mut self) -> io::Result<()> {
        self.cut_power()?;
        self.assert_invariants_and_replay();
        Ok(())
    }

    fn cut_power(&mut self) -> io::Result<()> {
        if self.power != Power::On {
            self.power = Power::Off;
            return Ok(());
        }
        let ids: Vec<u64> = self.cache.pending.keys().copied().collect();
        for id in ids {
            let Some(p) = self.cache.pending.get(&id) else {
                continue;
            };
            if self.profile.kind == Kind::HonestPlp {
                self.destage_all(id)?;
                continue;
            }
            if p.flushed || p.stuck {
                continue;
            }
            let n = p.remaining.len();
            if self.rng_cut.chance(0.5) {
                let k = if n > 1 && self.rng_cut.chance(self.profile.tear_p) {
                    self.rng_cut.range(1, n as u64 - 1) as usize
                } else {
                    n
                };
                self.destage(id, 0..k)?;
            }
        }
        self.emit(Event::Cut)?;
        self.cache = Cache::default();
        self.power = Power::Off;
        Ok(())
    }
}
