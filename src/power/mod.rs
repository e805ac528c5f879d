//! Power drivers: one small trait over every way an admin can cut power (a relay board on
//! a serial port, a smart plug, a PDU through a command, a person at the plug, the
//! simulated drive), so `plugpull campaign` runs the same cycle whatever switch is owned.
//!
//! Why timestamps on every call: randomising when the cut lands matters more than its
//! precision, but the record must say when the cut command was issued, when the switch
//! confirmed it, and, where the switch has its own clock (our firmware's µs counter), what
//! it said. Those go into each cycle's result line.
//!
//! Configured from the `[power]` table of a campaign file (see docs/campaign.md and
//! hardware/examples/).

pub mod command;
pub mod config;
pub mod error;
pub mod fall;
pub mod http;
pub mod http_auth;
pub mod http_client;
pub mod manual;
pub mod pcie;
pub mod redfish;
pub mod serial;
pub mod sim;
pub mod switch;

pub use config::PowerConfig;
pub use error::PowerError;
pub use switch::{Capabilities, PowerSwitch, Scope, SwitchTiming};
