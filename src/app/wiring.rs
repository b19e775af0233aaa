//! The composition root: configuration in, real adapters out. The only module that names
//! concrete adapters.

use std::sync::Arc;

use crate::adapters::skills_fs::FsSkillIndex;
use crate::adapters::system_clock::SystemClock;
use crate::adapters::unwired::Unwired;
use crate::app::config::Config;
use crate::app::identity::Identity;
use crate::app::{App, Settings};
use crate::domain::Upstream;
use crate::ports::Ports;

/// Builds the ports for `config`. Unreachable upstreams are allowed: their tools answer
/// `upstream_unavailable` and `check` reports them.
pub fn ports(config: &Config) -> Ports {
    Ports {
        tasks: Arc::new(Unwired(Upstream::TaskStore)),
        cuo: Arc::new(Unwired(Upstream::Cuo)),
        memory: Arc::new(Unwired(Upstream::Memory)),
        skills: Arc::new(FsSkillIndex::new(config.skills_dirs.clone())),
        clock: Arc::new(SystemClock),
    }
}

/// Builds the application for `config`.
pub fn app(config: &Config) -> App {
    let settings = Settings {
        tool_errors: config.tool_errors,
        long_running: config.long_running,
    };
    App::new(ports(config), settings, Identity::Local)
}
