//! Where spans and metrics go: `--otlp-endpoint` and `--otlp-protocol`, else the
//! OpenTelemetry SDK's standard variables.

use clap::ValueEnum;
use serde::Deserialize;

use super::error::ConfigError;

/// The OTLP transports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
pub enum OtlpProtocol {
    /// OTLP/gRPC (the collector's port 4317).
    #[value(name = "grpc")]
    #[serde(rename = "grpc")]
    Grpc,
    /// OTLP/HTTP with protobuf bodies (port 4318; `/v1/traces`, `/v1/metrics`).
    #[value(name = "http/protobuf")]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

/// Where one signal is exported: for HTTP the signal's full URL, for gRPC the collector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpTarget {
    /// The URL.
    pub endpoint: String,
    /// The transport.
    pub protocol: OtlpProtocol,
}

/// The collectors of both signals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Otlp {
    /// Spans.
    pub traces: Option<OtlpTarget>,
    /// Metrics.
    pub metrics: Option<OtlpTarget>,
}

/// The two signals as the standard variables name them.
#[derive(Clone, Copy)]
struct Signal {
    /// `TRACES` or `METRICS`.
    name: &'static str,
    /// The OTLP/HTTP path appended to a base endpoint.
    path: &'static str,
}

const TRACES: Signal = Signal {
    name: "TRACES",
    path: "/v1/traces",
};
const METRICS: Signal = Signal {
    name: "METRICS",
    path: "/v1/metrics",
};

/// The collectors: the flags (or `CYBEROS_OTLP_*`, or the config file), else the OTel
/// SDK's standard variables, signal-specific first. An empty endpoint means none.
pub(super) fn otlp(
    endpoint: Option<String>,
    protocol: Option<OtlpProtocol>,
) -> Result<Otlp, ConfigError> {
    otlp_from(endpoint, protocol, |name| std::env::var(name).ok())
}

/// [`otlp`] over an environment. The standard variables are read as the OTel SDKs read
/// them: the protocol (`--otlp-protocol`, else `OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL`,
/// else `OTEL_EXPORTER_OTLP_PROTOCOL`, else grpc) applies to whichever endpoint is used;
/// `http/json` is refused rather than sent in a form the bridge does not speak. When the
/// flag names no endpoint, `OTEL_SDK_DISABLED=true` or `OTEL_<SIGNAL>S_EXPORTER=none`
/// turns a signal off, a signal-specific endpoint is used as it is, and the general one
/// gets the signal's path on HTTP. The flag's endpoint serves both signals.
fn otlp_from(
    flag: Option<String>,
    flag_protocol: Option<OtlpProtocol>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Otlp, ConfigError> {
    let var = |name: &str| {
        env(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let flag = flag.filter(|u| !u.trim().is_empty());
    let target = |signal: Signal| -> Result<Option<OtlpTarget>, ConfigError> {
        let exporter = if signal.name == "TRACES" {
            "OTEL_TRACES_EXPORTER"
        } else {
            "OTEL_METRICS_EXPORTER"
        };
        let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || var(exporter).is_some_and(|v| v.eq_ignore_ascii_case("none"));
        // The URL, and whether it is a base that takes the signal's path on HTTP.
        let found = match &flag {
            Some(url) => Some((url.clone(), true)),
            None if disabled => None,
            None => var(&format!("OTEL_EXPORTER_OTLP_{}_ENDPOINT", signal.name))
                .map(|u| (u, false))
                .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT").map(|u| (u, true))),
        };
        let Some((url, is_base)) = found else {
            return Ok(None);
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError(
                "--otlp-endpoint must be an http:// or https:// URL (e.g. http://localhost:4317 for grpc, http://localhost:4318 for http/protobuf)".into(),
            ));
        }
        let protocol = match flag_protocol {
            Some(p) => p,
            None => env_protocol(signal, &var)?,
        };
        let endpoint = match protocol {
            OtlpProtocol::HttpProtobuf if is_base => {
                format!("{}{}", url.trim_end_matches('/'), signal.path)
            }
            _ => url,
        };
        Ok(Some(OtlpTarget { endpoint, protocol }))
    };
    Ok(Otlp {
        traces: target(TRACES)?,
        metrics: target(METRICS)?,
    })
}

/// The protocol the standard variables choose for `signal` (grpc when they say nothing).
fn env_protocol(
    signal: Signal,
    var: &impl Fn(&str) -> Option<String>,
) -> Result<OtlpProtocol, ConfigError> {
    let specific = format!("OTEL_EXPORTER_OTLP_{}_PROTOCOL", signal.name);
    let found = [specific.as_str(), "OTEL_EXPORTER_OTLP_PROTOCOL"]
        .into_iter()
        .find_map(|name| Some((name, var(name)?)));
    match found {
        None => Ok(OtlpProtocol::Grpc),
        Some((name, p)) => OtlpProtocol::from_str(&p, false).map_err(|_| {
            ConfigError(format!(
                "{name}={p}: spans and metrics are exported over grpc or http/protobuf; set one of those (or pass --otlp-protocol)"
            ))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        flag: Option<&str>,
        protocol: Option<OtlpProtocol>,
        vars: &[(&str, &str)],
    ) -> Result<Otlp, ConfigError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        otlp_from(flag.map(str::to_owned), protocol, |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    fn grpc(url: &str) -> Option<OtlpTarget> {
        Some(OtlpTarget {
            endpoint: url.into(),
            protocol: OtlpProtocol::Grpc,
        })
    }

    fn http(url: &str) -> Option<OtlpTarget> {
        Some(OtlpTarget {
            endpoint: url.into(),
            protocol: OtlpProtocol::HttpProtobuf,
        })
    }

    #[test]
    fn the_standard_otel_variables_choose_the_collector_as_the_sdks_do() {
        let url = "http://collector:4317";
        assert_eq!(run(None, None, &[]).unwrap(), Otlp::default());
        let general = run(None, None, &[("OTEL_EXPORTER_OTLP_ENDPOINT", url)]).unwrap();
        assert_eq!((general.traces, general.metrics), (grpc(url), grpc(url)));
        let both = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://other:4317"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url),
        ];
        let got = run(None, None, &both).unwrap();
        assert_eq!(got.traces, grpc(url));
        assert_eq!(got.metrics, grpc("http://other:4317"));
        for (off, traces, metrics) in [
            (("OTEL_SDK_DISABLED", "TRUE"), None, None),
            (("OTEL_TRACES_EXPORTER", "none"), None, grpc(url)),
            (("OTEL_METRICS_EXPORTER", "none"), grpc(url), None),
        ] {
            let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", url), off];
            let got = run(None, None, &vars).unwrap();
            assert_eq!((got.traces, got.metrics), (traces, metrics), "{off:?}");
            // The flag is explicit and wins.
            let flagged = run(Some(url), None, &vars).unwrap();
            assert_eq!((flagged.traces, flagged.metrics), (grpc(url), grpc(url)));
        }
        assert!(
            run(
                None,
                None,
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")]
            )
            .is_err()
        );
    }

    #[test]
    fn http_protobuf_gets_the_signal_paths_on_a_base_endpoint_only() {
        let base = "http://collector:4318/";
        let proto = ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf");
        let got = run(None, None, &[("OTEL_EXPORTER_OTLP_ENDPOINT", base), proto]).unwrap();
        assert_eq!(got.traces, http("http://collector:4318/v1/traces"));
        assert_eq!(got.metrics, http("http://collector:4318/v1/metrics"));
        // A signal-specific endpoint is the full URL already.
        let vars = [
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://m:9/ingest"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", base),
            proto,
        ];
        assert_eq!(
            run(None, None, &vars).unwrap().metrics,
            http("http://m:9/ingest")
        );
        // The flag's endpoint is a base for both; --otlp-protocol beats the variables.
        let got = run(Some("http://c:4318"), Some(OtlpProtocol::HttpProtobuf), &[]).unwrap();
        assert_eq!(got.traces, http("http://c:4318/v1/traces"));
        let got = run(Some("http://c:4317"), Some(OtlpProtocol::Grpc), &[proto]).unwrap();
        assert_eq!(got.metrics, grpc("http://c:4317"));
        // A signal's own protocol variable wins over the general one.
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            proto,
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
        ];
        let got = run(None, None, &vars).unwrap();
        assert_eq!(got.traces, grpc("http://c:4317"));
        assert_eq!(got.metrics, http("http://c:4317/v1/metrics"));
    }

    #[test]
    fn http_json_is_refused_naming_the_variable() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/json"),
        ];
        let err = run(None, None, &vars).unwrap_err();
        assert!(
            err.0
                .starts_with("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=http/json"),
            "{err}"
        );
        assert!(run(None, Some(OtlpProtocol::Grpc), &vars).is_ok());
        // A protocol without an endpoint is no error.
        assert_eq!(run(None, None, &vars[1..]).unwrap(), Otlp::default());
    }
}
