//! What every cycle of one campaign shares: the settings, the campaign seed, and the
//! per-cycle seeds derived from it.
//!
//! Why its own file: the drive-only loop (`mod.rs`) and the whole-host controller
//! (`host.rs`) both need it, and neither should import the other. That includes what
//! both do with the switch around a cut: the fall-time sweep (`check_ramp`) and the
//! proof of the cut (`cut_proof`).

use super::config::Settings;
use super::results::CycleResult;
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

/// Reads the rail's fall from the switch (while power is still off) into `r`, and says
/// whether it proves the cut: `None` when the switch samples no rail and no proof is
/// required; the text says why a cut is not proven.
pub fn cut_proof(
    r: &mut CycleResult,
    s: &Settings,
    power: &mut dyn PowerSwitch,
) -> Result<(Option<bool>, String), PowerError> {
    let threshold = s.file.campaign.cut_proof_threshold;
    let Some(trace) = power.last_fall()? else {
        let required = s.file.campaign.require_cut_proof;
        return Ok((
            required.then_some(false),
            "the switch reported no fall trace (campaign.require_cut_proof)".into(),
        ));
    };
    let fall = crate::power::fall::analyze(&trace);
    let proven = fall.proven(threshold);
    let why = format!(
        "rail {} fell only to {:.2} V, above {:.0}% of its nominal {:.2} V",
        fall.channel,
        fall.min_mv as f64 / 1e3,
        threshold * 100.0,
        fall.nominal_mv as f64 / 1e3
    );
    r.fall = Some(fall);
    Ok((Some(proven), why))
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
