//! What every cycle of one campaign shares: the settings, the campaign seed, and the
//! per-cycle seeds derived from it.
//!
//! Why its own file: the drive-only loop (`mod.rs`) and the whole-host controller
//! (`host.rs`) both need it, and neither should import the other. That includes the
//! fall-time sweep both run through the switch (`check_ramp`); the proof of the cut is
//! in `proof.rs`.

use super::config::Settings;
use crate::power::{PowerError, PowerSwitch};
use crate::rng::Rng;

/// What every cycle of one campaign shares.
pub struct Campaign<'a> {
    pub settings: &'a Settings,
    /// The campaign seed (the results file's, on resume).
    pub seed: u64,
    pub cycles_wanted: u64,
    pub quiet: bool,
}

impl Campaign<'_> {
    pub fn say(&self, s: String) {
        if !self.quiet {
            eprintln!("{s}");
        }
    }
}

/// A sweep of `campaign.fall_times` needs a switch that can ramp: refused at the start
/// (naming the switch and what can ramp) rather than at the first ramped cycle.
pub fn check_ramp(s: &Settings, power: &dyn PowerSwitch) -> Result<(), PowerError> {
    if s.fall_times.iter().any(|f| !f.is_zero()) && !power.capabilities().ramp {
        return Err(PowerError::NoRamp {
            switch: power.describe(),
        });
    }
    Ok(())
}

/// Mixes the campaign seed with a cycle number: the SplitMix64 mix of
/// `seed ^ n * GAMMA`, computed by `rng::Rng` (whose first output is the mix of its seed
/// plus `GAMMA`), so there is one SplitMix64 in the crate. Pinned by
/// `derived_seeds_never_change`: resumed campaigns depend on them.
pub fn derive(seed: u64, n: u64) -> u64 {
    /// SplitMix64's increment, the one `rng::Rng` adds before mixing.
    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
    Rng::new((seed ^ n.wrapping_mul(GAMMA)).wrapping_sub(GAMMA)).next_u64()
}

#[cfg(test)]
mod tests {
    use super::derive;

    /// Values computed by the hand-written SplitMix64 `derive` had before it used
    /// `rng::Rng`: cycle seeds and simulated drives of existing campaigns follow them.
    #[test]
    fn derived_seeds_never_change() {
        for (seed, n, want) in [
            (0u64, 0u64, 0u64),
            (1, 1, 16490336266968443936),
            (42, 7, 6029533247520485195),
            (u64::MAX, 3, 10318735482467590012),
            (12345, 1 << 40 | 5, 5810308724939162435),
            (7, 1 << 40, 18142462909517338651),
        ] {
            assert_eq!(derive(seed, n), want, "derive({seed}, {n})");
        }
    }
}
