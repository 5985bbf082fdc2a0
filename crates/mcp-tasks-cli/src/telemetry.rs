//! OpenTelemetry traces over OTLP: the SDK, its exporter and the W3C
//! TraceContext propagator, installed for the whole process when
//! `serve --otlp-endpoint URL` or the standard variables ask for them.
//!
//! The library makes the spans (feature `otel` of `mcp-tasks`, through the
//! `opentelemetry` API); this file only decides where they go:
//!
//! * `--otlp-endpoint URL` (serve) is the collector's base URL, as
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` is (`/v1/traces` is added), and wins over
//!   the variables; without it, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used
//!   as it is) or `OTEL_EXPORTER_OTLP_ENDPOINT` turn tracing on, for every
//!   command. With none of them nothing is installed and spans cost nothing.
//! * `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`:
//!   `http/protobuf` (the default) is the one supported; anything else is
//!   refused with a message that says so.
//! * `OTEL_SERVICE_NAME` (default `mcp-tasks`), `OTEL_RESOURCE_ATTRIBUTES`,
//!   `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`, `OTEL_BSP_*` and
//!   `OTEL_EXPORTER_OTLP_HEADERS` / `_TIMEOUT` are read by the SDK and the
//!   exporter themselves.
//!
//! Spans go out in batches from the SDK's own thread, over the blocking
//! client of the reqwest already in the tree; [`Telemetry::shutdown`]
//! flushes what is left when the command ends, whichever way it ends.

use anyhow::{Context as _, bail};
use opentelemetry::global;
use opentelemetry_otlp::{SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;

/// The only OTLP protocol this binary speaks.
const HTTP_PROTOBUF: &str = "http/protobuf";

/// The installed tracer provider, if tracing is on.
#[derive(Debug)]
pub(crate) struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Installs the SDK when `endpoint` (serve's `--otlp-endpoint`) or the
    /// environment asks for traces; does nothing otherwise.
    pub(crate) fn init(endpoint: Option<&str>) -> anyhow::Result<Self> {
        let from_env = [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ]
        .iter()
        .any(|name| std::env::var(name).is_ok_and(|value| !value.is_empty()));
        if endpoint.is_none() && !from_env {
            // No provider, no spans: the no-op provider's cost a request
            // is not paid either.
            mcp_tasks::set_spans(false);
            return Ok(Self { provider: None });
        }
        check_protocol()?;
        let mut exporter = SpanExporter::builder().with_http();
        if let Some(endpoint) = endpoint {
            exporter = exporter.with_endpoint(traces_url(endpoint)?);
        }
        let exporter = exporter
            .build()
            .context("cannot set up the OTLP trace exporter")?;
        let mut resource = Resource::builder();
        if std::env::var("OTEL_SERVICE_NAME").is_err() {
            resource = resource.with_service_name("mcp-tasks");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        global::set_text_map_propagator(TraceContextPropagator::new());
        global::set_tracer_provider(provider.clone());
        Ok(Self {
            provider: Some(provider),
        })
    }

    /// Exports what is left and stops the exporter.
    pub(crate) fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(error) = provider.shutdown()
        {
            tracing::warn!(%error, "cannot export the last spans");
        }
    }
}

/// The traces URL of a collector's base `endpoint`, as the OTLP exporter
/// makes it from `OTEL_EXPORTER_OTLP_ENDPOINT`.
fn traces_url(endpoint: &str) -> anyhow::Result<String> {
    let uri: http::Uri = endpoint
        .parse()
        .with_context(|| format!("--otlp-endpoint {endpoint:?} is not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        bail!("--otlp-endpoint {endpoint:?} is not an http:// or https:// URL");
    }
    Ok(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
}

/// Refuses an OTLP protocol other than `http/protobuf`.
fn check_protocol() -> anyhow::Result<()> {
    for name in [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        if let Ok(protocol) = std::env::var(name) {
            if protocol.is_empty() {
                continue;
            }
            if protocol != HTTP_PROTOBUF {
                bail!(
                    "{name}={protocol} is not supported: this build exports traces over \
                     {HTTP_PROTOBUF} only"
                );
            }
            // The signal's own variable wins over the general one.
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_a_base_url() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/").unwrap(),
            "http://collector:4318/v1/traces"
        );
        let error = traces_url("collector:4318").unwrap_err().to_string();
        assert!(error.contains("not an http:// or https:// URL"), "{error}");
        assert!(traces_url("not a url").is_err());
    }
}
