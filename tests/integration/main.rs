//! The integration tests: one test binary, not one per file. Each file of tests/ was its
//! own crate linking the whole of plugpull (and its dependencies) again, so a change to
//! src/ relinked some fifty binaries; here it is one. The files are modules of this crate
//! and share [`common`], the harness and fixtures.
//!
//! A new test file: put it in this directory and add `mod NAME;` below (in order). A file
//! here without its `mod` line would never be compiled, and a `.rs` file directly in
//! tests/ is a test binary of its own again: [`suite_layout`] fails on either.
//!
//! Run one file's tests with its module as the filter: `cargo test --test integration
//! witness_crash::` (`-- --exact witness_crash::NAME` for one test). Tests of different
//! files now run in parallel in one process: a test must not change process-wide state
//! (the current directory, environment variables, signal dispositions) or judge things
//! of its own process that another test changes too (its temporary files, open file
//! descriptors, threads or memory).

mod common;

mod ack_log_damage;
mod ack_sender_heartbeat;
mod ack_sender_idle;
mod agent;
mod architecture;
mod attack_house;
mod attack_today;
mod bench;
mod campaign;
mod campaign_agent_conn;
mod campaign_fleet;
mod campaign_results;
mod cli_day;
mod cli_write_verify;
mod cycle_fetched;
mod deb_package;
mod demo_fleet;
mod fetch_streamed;
mod guide_simdrive;
mod hardware_schematics;
mod hostile;
mod hostile_fuzz;
mod install;
mod interrupted_fetch;
mod lab;
mod ocp_output;
mod peer_strings;
mod plain_words;
mod power;
mod power_firmware;
mod power_http;
mod power_redfish;
mod replay;
mod replay_memory;
mod replay_parts;
mod report;
mod run_identity;
mod runs;
mod scenarios;
mod signatures;
mod simdrive;
mod soak;
mod static_binary;
mod suite_layout;
mod target_safety;
mod target_swap;
mod tree_damage;
mod tree_file_acks;
mod tree_fs;
mod tree_fs_bench;
mod tree_memory;
mod trust;
mod verify_allocation;
mod verify_attacks_more;
mod verify_budget;
mod verify_damage;
mod verify_exhaustive;
mod verify_memory;
mod verify_no_read_buffers;
mod verify_sparse;
mod verify_streamed_attacks;
mod verify_unacked;
mod verify_witness_streamed;
mod witness;
mod witness_crash;
mod witness_hostile_conns;
mod witness_idle_deadline;
mod witness_load;
mod witness_validation;
mod write_batch;
mod write_depth;
mod writer_day;
mod writer_failures;
mod writer_panic;
