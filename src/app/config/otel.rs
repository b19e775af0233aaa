//! Where spans go: `--otlp-endpoint`, else the OpenTelemetry SDK's standard variables.

use super::error::ConfigError;

/// The span collector: the flag (or `CYBEROS_OTLP_ENDPOINT`, or the config file), else the
/// OTel SDK's standard variables, traces-specific first. An empty value means none.
pub(super) fn otlp_endpoint(flag: Option<String>) -> Result<Option<String>, ConfigError> {
    otlp_endpoint_from(flag, |name| std::env::var(name).ok())
}

/// [`otlp_endpoint`] over an environment. The standard variables are read as the OTel SDKs
/// read them, but only when the flag is absent (the flag always means OTLP/gRPC):
/// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn export off, and a
/// `…_PROTOCOL` other than `grpc` is refused rather than sent to the wrong port in silence.
fn otlp_endpoint_from(
    flag: Option<String>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, ConfigError> {
    let var = |name| {
        env(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let url = match flag {
        Some(url) => Some(url),
        None => {
            let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
                || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
            let url = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"))
                .filter(|_| !disabled);
            let protocol = [
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ]
            .into_iter()
            .find_map(|name| Some((name, var(name)?)));
            match protocol {
                Some((name, p)) if url.is_some() && p != "grpc" => {
                    return Err(ConfigError(format!(
                        "{name}={p}: spans are exported over OTLP/gRPC only; set it to grpc and point the endpoint at the collector's gRPC port (usually 4317), or pass --otlp-endpoint"
                    )));
                }
                _ => url,
            }
        }
    };
    let url = url.filter(|u| !u.trim().is_empty());
    match url {
        Some(u) if !(u.starts_with("http://") || u.starts_with("https://")) => Err(ConfigError(
            "--otlp-endpoint must be an http:// or https:// URL (OTLP over gRPC, e.g. http://localhost:4317)".into(),
        )),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_otel_variables_choose_the_collector_as_the_sdks_do() {
        let run = |flag: Option<&str>, vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            otlp_endpoint_from(flag.map(str::to_owned), |name| {
                vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
            })
        };
        let grpc = "http://collector:4317";
        assert_eq!(run(None, &[]).unwrap(), None);
        assert_eq!(
            run(None, &[("OTEL_EXPORTER_OTLP_ENDPOINT", grpc)])
                .unwrap()
                .as_deref(),
            Some(grpc)
        );
        let both = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://other:4317"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", grpc),
        ];
        assert_eq!(run(None, &both).unwrap().as_deref(), Some(grpc));
        for off in [
            ("OTEL_SDK_DISABLED", "TRUE"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", grpc), off];
            assert_eq!(run(None, &vars).unwrap(), None, "{off:?}");
            // The flag is explicit and wins.
            assert_eq!(run(Some(grpc), &vars).unwrap().as_deref(), Some(grpc));
        }
        let http = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ];
        let err = run(None, &http).unwrap_err();
        assert!(
            err.0
                .starts_with("OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"),
            "{err}"
        );
        // The traces-specific protocol wins; a protocol without an endpoint is no error.
        let traces_grpc = [
            http[0],
            http[1],
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
        ];
        assert!(run(None, &traces_grpc).unwrap().is_some());
        assert_eq!(run(None, &[http[1]]).unwrap(), None);
        assert!(run(Some(grpc), &http).unwrap().is_some());
        assert!(run(None, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")]).is_err());
    }
}
