//! Fault profiles: which real drive behaviour the simulated drive imitates, and the knobs
//! of that behaviour.
//!
//! A profile is parsed from one string so the CLI, the demo and tests share one syntax:
//! `NAME[:ARG][,KEY=VALUE...]`, for example `honest`, `lose-recent:8`,
//! `shorn,p=0.05`, `metadata-loss,fraction=0.3,hang_ms=60000`. Every knob has a default
//! chosen so the fault really happens in a few-second run of thousands of 4 KiB flushed
//! writes. docs/fault-model.md explains each profile and what verify reports for it.

use std::fmt;

/// Which behaviour the drive has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// No power-loss protection: a flush persists everything, slowly (~2 ms).
    Honest,
    /// Power-loss protection: fast flushes; the cache is destaged at the cut. Because a
    /// SIGKILL gives no chance to destage, this is modelled as write-through.
    HonestPlp,
    /// Flush returns at once without persisting; the cache is destaged lazily.
    Lying,
    /// The last N flushed writes are held in cache only.
    LoseRecent,
    /// A flushed write persists only its first k of n sectors.
    Shorn,
    /// A flushed write reaches media with flipped bits.
    Corrupt,
    /// A flushed write lands at another offset.
    Misdirected,
    /// Flushed writes are destaged out of order: an earlier one is held while later ones
    /// reach media (an ordering hole).
    Reorder,
    /// After the cut a range of the drive is unreadable (EIO, or a hang).
    MetadataLoss,
    /// After the cut the drive cannot be opened.
    Dead,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::Honest,
        Kind::HonestPlp,
        Kind::Lying,
        Kind::LoseRecent,
        Kind::Shorn,
        Kind::Corrupt,
        Kind::Misdirected,
        Kind::Reorder,
        Kind::MetadataLoss,
        Kind::Dead,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Honest => "honest",
            Kind::HonestPlp => "honest-plp",
            Kind::Lying => "lying",
            Kind::LoseRecent => "lose-recent",
            Kind::Shorn => "shorn",
            Kind::Corrupt => "corrupt",
            Kind::Misdirected => "misdirected",
            Kind::Reorder => "reorder",
            Kind::MetadataLoss => "metadata-loss",
            Kind::Dead => "dead",
        }
    }

    /// True for profiles that keep every flushed write: verify must PASS them.
    pub fn is_honest(self) -> bool {
        matches!(self, Kind::Honest | Kind::HonestPlp)
    }
}

/// Why a profile string does not parse. The messages name the offending part.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("unknown profile {name:?}; known: {known}")]
    UnknownProfile { name: String, known: String },
    #[error("profile {name} takes no ':' argument (use KEY=VALUE)")]
    UnexpectedArgument { name: String },
    #[error("profile option {option:?} is not KEY=VALUE")]
    NotKeyValue { option: String },
    #[error("unknown profile option {option:?}")]
    UnknownOption { option: String },
    #[error("{what}: {value:?} is not a valid number")]
    NotANumber { what: String, value: String },
    #[error("{what}: {value} is not a probability in 0..=1")]
    NotAProbability { what: String, value: String },
}

/// A profile with all its knobs resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    pub kind: Kind,
    /// Simulated time a flush takes (a sleep outside the drive's lock).
    pub flush_latency_us: u64,
    /// Chance that an unflushed write is destaged as soon as it arrives (what any drive
    /// may do: the verifier must tolerate unflushed data that survived).
    pub early_destage_p: f64,
    /// Chance that such an early destage tears: only a sector prefix reaches media.
    pub tear_p: f64,
    /// Chance, per write that arrives while two or more unflushed writes are cached,
    /// that one of them other than the oldest reaches media now, ahead of the oldest:
    /// writes in flight together (a `write --batch`) landing out of order, which every
    /// drive may do before the flush that covers them. The oracle logs each one
    /// (`Event::Reordered`). Option `batch_reorder_p`; 0 by default.
    pub batch_reorder_p: f64,
    /// Per flushed write chance of the profile's fault (shorn, corrupt, misdirected,
    /// reorder).
    pub fault_p: f64,
    /// lose-recent: how many of the most recent flushed writes are held.
    pub lose_recent_n: usize,
    /// lying: the cache destages its oldest writes once it holds more than this many.
    pub cache_writes: usize,
    /// reorder: a held write is released after this many further flushes.
    pub hold_flushes: u64,
    /// corrupt: at most this many bits flipped per write (at least 1).
    pub corrupt_bits_max: u32,
    /// metadata-loss: the share of the drive that becomes unreadable after the cut.
    pub unreadable_fraction: f64,
    /// metadata-loss: reads of the lost range hang this long before failing with EIO
    /// (`None`: fail at once). Set by `hang-reads` or `hang_ms=`.
    pub read_hang_ms: Option<u64>,
}

impl Profile {
    /// The defaults of one kind.
    pub fn new(kind: Kind) -> Profile {
        let flush_latency_us = match kind {
            Kind::Honest => 2_000,
            Kind::HonestPlp => 50,
            Kind::Lying => 0,
            // Faulty profiles flush fast so a short run holds thousands of flushed writes.
            _ => 100,
        };
        let fault_p = match kind {
            Kind::Misdirected => 0.005,
            Kind::Reorder => 0.01,
            _ => 0.02,
        };
        Profile {
            kind,
            flush_latency_us,
            early_destage_p: 0.25,
            tear_p: 0.2,
            batch_reorder_p: 0.0,
            fault_p,
            lose_recent_n: 8,
            cache_writes: 512,
            hold_flushes: 1_000,
            corrupt_bits_max: 3,
            unreadable_fraction: 0.1,
            read_hang_ms: None,
        }
    }

    /// Parses `NAME[:ARG][,KEY=VALUE...]`. `ARG` is lose-recent's N; `hang-reads` is
    /// metadata-loss whose reads hang for an hour.
    pub fn parse(s: &str) -> Result<Profile, ProfileError> {
        let mut parts = s.trim().split(',');
        let head = parts.next().unwrap_or("").trim();
        let (name, arg) = match head.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (head, None),
        };
        let mut p = if name == "hang-reads" {
            let mut p = Profile::new(Kind::MetadataLoss);
            p.read_hang_ms = Some(3_600_000);
            p
        } else {
            let kind = Kind::ALL
                .into_iter()
                .find(|k| k.name() == name)
                .ok_or_else(|| ProfileError::UnknownProfile {
                    name: name.to_string(),
                    known: known(),
                })?;
            Profile::new(kind)
        };
        if let Some(a) = arg {
            if p.kind != Kind::LoseRecent {
                return Err(ProfileError::UnexpectedArgument {
                    name: name.to_string(),
                });
            }
            p.lose_recent_n = num(a, "lose-recent N")?;
        }
        for kv in parts {
            let kv = kv.trim();
            if kv.is_empty() {
                continue;
            }
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| ProfileError::NotKeyValue {
                    option: kv.to_string(),
                })?;
            let v = v.trim();
            match k.trim() {
                "flush_latency_us" | "latency_us" => p.flush_latency_us = num(v, k)?,
                "early_destage_p" | "early_p" => p.early_destage_p = prob(v, k)?,
                "tear_p" => p.tear_p = prob(v, k)?,
                "batch_reorder_p" => p.batch_reorder_p = prob(v, k)?,
                "p" | "fault_p" => p.fault_p = prob(v, k)?,
                "n" => p.lose_recent_n = num(v, k)?,
                "cache_writes" => p.cache_writes = num(v, k)?,
                "hold_flushes" => p.hold_flushes = num(v, k)?,
                "bits" => {
                    p.corrupt_bits_max = num::<u32>(v, k)?.max(1);
                }
                "fraction" => p.unreadable_fraction = prob(v, k)?,
                "hang_ms" => p.read_hang_ms = Some(num(v, k)?),
                other => {
                    return Err(ProfileError::UnknownOption {
                        option: other.to_string(),
                    });
                }
            }
        }
        Ok(p)
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind.name())?;
        match self.kind {
            Kind::LoseRecent => write!(f, ":{}", self.lose_recent_n)?,
            Kind::Shorn | Kind::Corrupt | Kind::Misdirected | Kind::Reorder => {
                write!(f, ",p={}", self.fault_p)?
            }
            Kind::MetadataLoss => {
                write!(f, ",fraction={}", self.unreadable_fraction)?;
                if let Some(h) = self.read_hang_ms {
                    write!(f, ",hang_ms={h}")?;
                }
            }
            _ => {}
        }
        if self.batch_reorder_p > 0.0 {
            write!(f, ",batch_reorder_p={}", self.batch_reorder_p)?;
        }
        write!(f, ",flush_latency_us={}", self.flush_latency_us)
    }
}

fn known() -> String {
    let mut v: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    v.push("hang-reads");
    v.join(", ")
}

fn num<T: std::str::FromStr>(v: &str, what: &str) -> Result<T, ProfileError> {
    v.parse().map_err(|_| ProfileError::NotANumber {
        what: what.to_string(),
        value: v.to_string(),
    })
}

fn prob(v: &str, what: &str) -> Result<f64, ProfileError> {
    let x: f64 = num(v, what)?;
    if (0.0..=1.0).contains(&x) {
        Ok(x)
    } else {
        Err(ProfileError::NotAProbability {
            what: what.to_string(),
            value: v.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_by_name() {
        for k in Kind::ALL {
            assert_eq!(Profile::parse(k.name()).unwrap().kind, k);
        }
    }

    #[test]
    fn arguments_and_options() {
        let p = Profile::parse("lose-recent:3,flush_latency_us=7").unwrap();
        assert_eq!((p.lose_recent_n, p.flush_latency_us), (3, 7));
        let p = Profile::parse("hang-reads").unwrap();
        assert_eq!(p.kind, Kind::MetadataLoss);
        assert!(p.read_hang_ms.is_some());
        assert!(Profile::parse("shorn,p=2").is_err());
        assert!(Profile::parse("shorn:3").is_err());
        assert!(Profile::parse("nonsense").is_err());
        assert!(Profile::parse("corrupt,bogus=1").is_err());
        assert!(Profile::parse("corrupt,bits").is_err());
    }

    #[test]
    fn batch_reordering_is_an_option_of_any_profile_and_round_trips() {
        assert_eq!(Profile::parse("honest").unwrap().batch_reorder_p, 0.0);
        for name in ["honest", "lying"] {
            let p = Profile::parse(&format!("{name},batch_reorder_p=0.5")).unwrap();
            assert_eq!(p.batch_reorder_p, 0.5);
            assert_eq!(Profile::parse(&p.to_string()).unwrap(), p, "{p}");
        }
        assert!(Profile::parse("honest,batch_reorder_p=1.5").is_err());
    }
}
