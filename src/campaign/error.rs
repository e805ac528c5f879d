//! Why a campaign could not start, go on, or print its summary (a failed cycle is not
//! one of these: it is recorded as an ERROR result, see `drive_only::CycleError`).

use super::config::ConfigError;
use super::host::HostError;
use super::results_file::ResultsError;
use crate::power::PowerError;
use crate::sim::ProfileError;
use crate::units::UnitError;
use crate::witness::server::WitnessError;
use std::path::PathBuf;

/// Why the campaign could not start, go on, or print its summary. A failed cycle is
/// not one of these: it is recorded as an ERROR result (see [`CycleError`]).
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// The `[power]` table does not build a switch.
    #[error(transparent)]
    Power(#[from] PowerError),
    /// Whole-host mode stopped.
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("target.profile: {reason}")]
    BadProfile { reason: ProfileError },
    #[error("target.size: {reason}")]
    BadSize { reason: UnitError },
    #[error("creating the simulated drive")]
    SimDrive(#[source] std::io::Error),
    #[error("starting the campaign's witness in {}", dir.display())]
    Witness {
        dir: PathBuf,
        #[source]
        source: WitnessError,
    },
    /// The summary as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

pub type Result<T, E = CampaignError> = std::result::Result<T, E>;
