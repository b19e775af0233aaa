//! Where each option's value came from, for `check`: the command line, the environment,
//! the `--config` file, or the built-in default.

use std::collections::BTreeMap;

/// The origin of one option's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Not set anywhere: the built-in default.
    Default,
    /// The `--config` TOML file.
    File,
    /// A `CYBEROS_*` (or standard `OTEL_*`) environment variable.
    Env,
    /// A command-line flag.
    Flag,
}

/// Sources by option name (kebab-case, as in flags and TOML keys); unnamed means default.
#[derive(Debug, Clone, Default)]
pub struct Sources(BTreeMap<String, Source>);

impl Sources {
    /// The flags and variables clap read.
    pub fn from_matches(matches: &clap::ArgMatches) -> Sources {
        use clap::parser::ValueSource;
        let mut sources = Sources::default();
        for id in matches.ids() {
            let source = match matches.value_source(id.as_str()) {
                Some(ValueSource::CommandLine) => Source::Flag,
                Some(ValueSource::EnvVariable) => Source::Env,
                _ => continue,
            };
            sources.set(id.as_str(), source);
        }
        sources
    }

    /// Records `source` for the option whose field or flag name is `name`.
    pub fn set(&mut self, name: &str, source: Source) {
        self.0.insert(name.replace('_', "-"), source);
    }

    /// Where `option` (kebab-case) came from.
    pub fn of(&self, option: &str) -> Source {
        self.0.get(option).copied().unwrap_or(Source::Default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::config::Cli;
    use clap::{CommandFactory, FromArgMatches};

    #[test]
    fn flags_are_told_from_defaults_wherever_they_stand() {
        let m = Cli::command()
            .try_get_matches_from(["x", "check", "--listen", "127.0.0.1:1", "--dev"])
            .unwrap();
        let sources = Sources::from_matches(&m);
        assert_eq!(sources.of("listen"), Source::Flag);
        assert_eq!(sources.of("dev"), Source::Flag);
        assert_eq!(sources.of("transport"), Source::Default);
        assert!(Cli::from_arg_matches(&m).is_ok());
    }
}
