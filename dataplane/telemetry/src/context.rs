//! A trace crossing a process boundary: the W3C `traceparent` of a `tracing` span (what the
//! gateway puts in a runtime's signed `session_start`, and a runtime in its requests to
//! tool servers), and a span made the child of one that came in. Without traces (no
//! exporter, or a build without the `otlp` feature) there is no `traceparent` to send and
//! one received is ignored, so callers need not ask whether tracing is on.

use tracing::Span;

/// The name of the header (and of the session context field) that carries the context.
pub const TRACEPARENT: &str = "traceparent";

/// The `traceparent` of `span` (`00-<trace id>-<span id>-<flags>`), or none when the span
/// is not traced.
pub fn traceparent(span: &Span) -> Option<String> {
    #[cfg(feature = "otlp")]
    {
        use opentelemetry::propagation::TextMapPropagator;
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let context = span.context();
        if !context.span().span_context().is_valid() {
            return None;
        }
        let mut carrier = std::collections::HashMap::with_capacity(2);
        opentelemetry_sdk::propagation::TraceContextPropagator::new().inject_context(&context, &mut carrier);
        carrier.remove(TRACEPARENT)
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = span;
        None
    }
}

/// Makes `span` a child of the span `traceparent` names (another process's), before the
/// span is first entered. A malformed value, or none, leaves it as it was.
pub fn set_parent(span: &Span, traceparent: Option<&str>) {
    #[cfg(feature = "otlp")]
    {
        use opentelemetry::propagation::TextMapPropagator;
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let Some(traceparent) = traceparent else { return };
        let carrier = std::collections::HashMap::from([(TRACEPARENT.to_owned(), traceparent.to_owned())]);
        let parent = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
        if parent.span().span_context().is_valid() {
            // Only refused without traces (no layer) or once the span started: nothing to do.
            let _ = span.set_parent(parent);
        }
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = (span, traceparent);
    }
}

/// The trace id of `span` (32 hex digits), or none when the span is not traced.
pub fn trace_id(span: &Span) -> Option<String> {
    #[cfg(feature = "otlp")]
    {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let context = span.context();
        let span_context = context.span().span_context().clone();
        span_context.is_valid().then(|| span_context.trace_id().to_string())
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = span;
        None
    }
}

/// Records the trace id of `span` in its `trace_id` field (declared empty), so that log
/// lines inside the span carry it; nothing when the span is not traced.
pub fn record_trace_id(span: &Span) {
    if let Some(id) = trace_id(span) {
        span.record("trace_id", id.as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_traces_there_is_no_context_to_send() {
        // No subscriber with the OpenTelemetry layer in this test: nothing is traced.
        let span = tracing::info_span!("session", trace_id = tracing::field::Empty);
        set_parent(&span, Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        assert_eq!(traceparent(&span), None);
        assert_eq!(trace_id(&span), None);
        record_trace_id(&span);
    }

    #[cfg(feature = "otlp")]
    #[test]
    fn a_span_joins_the_trace_its_traceparent_names() {
        use opentelemetry::trace::TracerProvider as _;
        use tracing_subscriber::layer::SubscriberExt;
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
        let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        let upstream = tracing::info_span!("gateway");
        let sent = traceparent(&upstream).expect("a traced span has a traceparent");
        let trace = trace_id(&upstream).expect("and a trace id");
        assert!(sent.starts_with(&format!("00-{trace}-")), "{sent}");

        let downstream = tracing::info_span!(parent: None, "runtime", trace_id = tracing::field::Empty);
        set_parent(&downstream, Some(&sent));
        assert_eq!(trace_id(&downstream), Some(trace.clone()), "one trace across the boundary");
        let onward = traceparent(&downstream).expect("onward");
        assert_ne!(onward, sent, "its own span id");
        // Garbage is ignored: a span without a valid parent starts its own trace.
        let other = tracing::info_span!(parent: None, "other");
        set_parent(&other, Some("not-a-traceparent"));
        assert_ne!(trace_id(&other), Some(trace));
    }
}
