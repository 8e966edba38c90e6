//! An OTLP trace receiver, as a collector's `otlp` receiver is: over HTTP (port 4318), `POST
//! /v1/traces` with an `ExportTraceServiceRequest` in protobuf, decoded with the types
//! generated from the official protocol definitions (`opentelemetry-proto`), answered with
//! an `ExportTraceServiceResponse`; or over gRPC (port 4317), the `TraceService` server
//! generated from the same definitions, on tonic. Every span is kept with the service that
//! sent it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// A span as received.
#[derive(Clone, Debug)]
pub struct Received {
    /// The `service.name` of the resource that sent it.
    pub service: String,
    pub span: Span,
}

impl Received {
    pub fn trace_id(&self) -> String {
        hex(&self.span.trace_id)
    }

    pub fn span_id(&self) -> String {
        hex(&self.span.span_id)
    }

    pub fn parent_id(&self) -> String {
        hex(&self.span.parent_span_id)
    }

    /// The span's attribute `key`.
    pub fn attr(&self, key: &str) -> Option<&any_value::Value> {
        find(&self.span.attributes, key)
    }

    /// The span's string attribute `key`.
    pub fn text(&self, key: &str) -> Option<&str> {
        match self.attr(key) {
            Some(any_value::Value::StringValue(text)) => Some(text),
            _ => None,
        }
    }

    /// Every string in the span: its name, attributes, events and their attributes.
    pub fn strings(&self) -> Vec<String> {
        let mut all = vec![self.span.name.clone()];
        let mut add = |attrs: &[KeyValue]| {
            for kv in attrs {
                all.push(kv.key.clone());
                collect(kv.value.as_ref(), &mut all);
            }
        };
        add(&self.span.attributes);
        for event in &self.span.events {
            add(&event.attributes);
        }
        all.extend(self.span.events.iter().map(|e| e.name.clone()));
        all
    }
}

fn find<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()).and_then(|v| v.value.as_ref())
}

fn collect(value: Option<&AnyValue>, out: &mut Vec<String>) {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(text)) => out.push(text.clone()),
        Some(any_value::Value::ArrayValue(array)) => array.values.iter().for_each(|v| collect(Some(v), out)),
        Some(any_value::Value::KvlistValue(list)) => list.values.iter().for_each(|kv| collect(kv.value.as_ref(), out)),
        _ => {}
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The receiver: where it listens and what it got.
pub struct Receiver {
    pub addr: SocketAddr,
    spans: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub async fn start() -> Self {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let app = axum::Router::new().route("/v1/traces", axum::routing::post(export)).with_state(spans.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, spans }
    }

    /// A receiver over gRPC: the generated `TraceService` on a tonic server.
    pub async fn start_grpc() -> Self {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("addr");
        let service = TraceServiceServer::new(Grpc(spans.clone()));
        let server = tonic::transport::Server::builder().add_service(service);
        tokio::spawn(server.serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)));
        Self { addr, spans }
    }

    /// What `OTEL_EXPORTER_OTLP_ENDPOINT` is set to.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The spans received so far.
    pub fn spans(&self) -> Vec<Received> {
        self.spans.lock().expect("lock").clone()
    }
}

/// What a collector behind authentication wants in every export: the processes send it
/// because `OTEL_EXPORTER_OTLP_HEADERS` says so (as a Secret gives it on a cluster).
pub const HEADERS: &str = "authorization=Bearer%20collector-token";
const AUTHORIZATION: &str = "Bearer collector-token";

async fn export(
    State(spans): State<Arc<Mutex<Vec<Received>>>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    if headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) != Some(AUTHORIZATION) {
        return (StatusCode::UNAUTHORIZED, b"no collector token".to_vec()).into_response();
    }
    let request = match ExportTraceServiceRequest::decode(body) {
        Ok(request) => request,
        Err(error) => return (StatusCode::BAD_REQUEST, error.to_string().into_bytes()).into_response(),
    };
    keep(&spans, request);
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    ([(header::CONTENT_TYPE, "application/x-protobuf")], answer).into_response()
}

/// The gRPC service: the same token, in the call's metadata.
struct Grpc(Arc<Mutex<Vec<Received>>>);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        if request.metadata().get("authorization").and_then(|v| v.to_str().ok()) != Some(AUTHORIZATION) {
            return Err(tonic::Status::unauthenticated("no collector token"));
        }
        keep(&self.0, request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// Keeps every span of `request` with its service's name.
fn keep(spans: &Mutex<Vec<Received>>, request: ExportTraceServiceRequest) {
    let mut received = Vec::new();
    for resource in request.resource_spans {
        let attrs = resource.resource.map(|r| r.attributes).unwrap_or_default();
        let service = match find(&attrs, "service.name") {
            Some(any_value::Value::StringValue(name)) => name.clone(),
            _ => String::new(),
        };
        for scope in resource.scope_spans {
            received.extend(scope.spans.into_iter().map(|span| Received { service: service.clone(), span }));
        }
    }
    spans.lock().expect("lock").extend(received);
}
