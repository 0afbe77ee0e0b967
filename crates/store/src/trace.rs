//! A message's trace context, as a W3C `traceparent` (`00-{trace id}-{span id}-{flags}`): read
//! from the span current when the message is created and kept with it, so that its delivery
//! attempts, however much later and in whichever process, join the trace of the request that
//! created it. Spans are only traced while OpenTelemetry tracing is on (the binary's
//! `otlp_endpoint`); otherwise every function here returns at its first check, and nothing is
//! stored.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `traceparent` of `span`, if it is traced.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        format!(
            "00-{:032x}-{:016x}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// The `traceparent` of the current span, if it is traced.
pub fn current() -> Option<String> {
    traceparent_of(&tracing::Span::current())
}

/// A stored `traceparent` as a remote span context; None for anything but version `00` with
/// a valid trace and span id (what [`traceparent_of`] writes).
pub fn parse(text: &str) -> Option<SpanContext> {
    let mut parts = text.split('-');
    let (Some("00"), Some(trace), Some(span), Some(flags), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    if trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    let sc = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(u8::from_str_radix(flags, 16).ok()?),
        true,
        TraceState::default(),
    );
    sc.is_valid().then_some(sc)
}

/// Makes `span` (not yet entered) part of the trace `stored` names: its child, with a link to
/// it, as a consumer's span is to the producer's across a queue. Nothing for a span that is not
/// traced or a message created while tracing was off.
pub fn join(span: &tracing::Span, stored: Option<&str>) {
    if span.is_disabled() {
        return;
    }
    let Some(parent) = stored.and_then(parse) else {
        return;
    };
    // Only fails for a span already started or not traced, neither of which is the case here.
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent.clone()));
    span.add_link(parent);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_reads_back_as_written_and_nonsense_does_not_read() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let sc = parse(text).expect("valid");
        assert_eq!(
            format!("{:032x}", sc.trace_id()),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(format!("{:016x}", sc.span_id()), "00f067aa0ba902b7");
        assert!(sc.is_sampled());
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-zzf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn without_tracing_nothing_is_read() {
        let span = tracing::info_span!("untraced");
        let _in = span.enter();
        assert_eq!(current(), None);
    }
}
