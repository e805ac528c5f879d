//! Attacks on the promises of the fleet campaign, its page, the drive's health counters
//! and the records counted past the last ack: each test is the input that would break
//! one, and asserts what was promised.
//!
//! - [`busy`]: a cycle's fetch from a witness that refuses, busy or not.
//! - [`fleet`]: results files of another fleet or of one drive, drives renamed, names
//!   that would forge lines.
//! - [`fleet_page`]: `plugpull report` of a hand-made `plugpull-fleet/1` matrix: names
//!   with HTML, rows that disagree with their own cuts, hostile numbers.
//! - [`health`]: nvme-cli and smartctl output that is not a count.
//! - [`ocp`]: a fleet campaign as an OCP run.
//! - [`unacked`]: another run's records on the same target past this run's last ack.

mod busy;
mod fleet;
mod fleet_page;
mod health;
mod ocp;
mod unacked;
