//! The `app` layer: the job config file (`config`), turned into each
//! capability's settings when a command asks for them, and the command
//! line (`cli`: clap and printing only). Nothing below `app` imports it
//! (see ARCHITECTURE.md).

pub mod args;
pub mod cli;
pub mod compile;
pub mod config;
pub mod detail;
pub mod new;
pub mod serve;
