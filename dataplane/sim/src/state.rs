//! The simulator's shared state: the script, the limits, and the counters that drive
//! "first N" faults and that tests read through [`SimStats`].

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use super::script::Script;
use super::service_error::ServiceError;

/// An operation of the Bedrock Runtime API the simulator serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Operation {
    /// `POST /model/{modelId}/converse-stream`.
    ConverseStream,
    /// `POST /model/{modelId}/converse`.
    Converse,
    /// `POST /model/{modelId}/invoke-with-bidirectional-stream` (Nova Sonic).
    InvokeModelWithBidirectionalStream,
}

impl Operation {
    /// Every operation.
    pub const ALL: [Operation; 3] =
        [Operation::ConverseStream, Operation::Converse, Operation::InvokeModelWithBidirectionalStream];

    fn index(self) -> usize {
        match self {
            Self::ConverseStream => 0,
            Self::Converse => 1,
            Self::InvokeModelWithBidirectionalStream => 2,
        }
    }
}

/// A snapshot of the simulator's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SimStats {
    /// Requests received per operation, malformed ones included.
    pub requests: BTreeMap<Operation, u64>,
    /// Valid model calls (the count "first N" faults of the script use).
    pub model_calls: u64,
    /// Requests answered with an injected error, and streams cut.
    pub faults_injected: u64,
    /// Requests that arrived over HTTP/2.
    pub http2_requests: u64,
    /// Requests per access key id they were signed with (the `Credential=` of a SigV4
    /// `Authorization` header; signatures themselves are not checked). At most
    /// [`MAX_ACCESS_KEYS`] keys are counted.
    pub access_keys: BTreeMap<String, u64>,
    /// Requests per region they were signed for (the region of a SigV4 credential scope:
    /// one simulator plays every region a client signs for). At most [`MAX_ACCESS_KEYS`]
    /// regions are counted.
    pub regions: BTreeMap<String, u64>,
}

/// Most distinct access key ids the simulator counts.
pub const MAX_ACCESS_KEYS: usize = 64;

impl SimStats {
    /// Requests received for `operation`.
    pub fn requests(&self, operation: Operation) -> u64 {
        self.requests.get(&operation).copied().unwrap_or(0)
    }
}

/// State shared by every connection.
#[derive(Debug)]
pub struct SimState {
    /// The script.
    pub script: Script,
    /// Largest request body accepted, in bytes.
    pub max_request_bytes: usize,
    /// The bidirectional operation's counters.
    pub sonic: super::sonic::stats::SonicState,
    /// The texts `SynthesizeSpeech` rendered, by phrase id.
    pub spoken: super::polly::Spoken,
    requests: [AtomicU64; Operation::ALL.len()],
    model_calls: AtomicU64,
    rule_matches: Vec<AtomicU64>,
    model_fault_matches: Vec<AtomicU64>,
    faults_injected: AtomicU64,
    http2_requests: AtomicU64,
    request_ids: AtomicU64,
    access_keys: Mutex<BTreeMap<String, u64>>,
    regions: Mutex<BTreeMap<String, u64>>,
}

impl SimState {
    /// State for `script`.
    pub fn new(script: Script, max_request_bytes: usize) -> Self {
        let rule_matches = script.rules.iter().map(|_| AtomicU64::new(0)).collect();
        let model_fault_matches = script.model_faults.iter().map(|_| AtomicU64::new(0)).collect();
        Self {
            script,
            max_request_bytes,
            sonic: super::sonic::stats::SonicState::default(),
            spoken: super::polly::Spoken::default(),
            requests: Default::default(),
            model_calls: AtomicU64::new(0),
            rule_matches,
            model_fault_matches,
            faults_injected: AtomicU64::new(0),
            http2_requests: AtomicU64::new(0),
            request_ids: AtomicU64::new(0),
            access_keys: Mutex::default(),
            regions: Mutex::default(),
        }
    }

    /// Counts a request for `operation`.
    pub fn count_request(&self, operation: Operation, version: http::Version, authorization: Option<&str>) {
        self.requests[operation.index()].fetch_add(1, Ordering::Relaxed);
        if version == http::Version::HTTP_2 {
            self.http2_requests.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(key) = authorization.and_then(access_key_id) {
            let mut keys = self.access_keys.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if keys.len() < MAX_ACCESS_KEYS || keys.contains_key(key) {
                *keys.entry(key.to_owned()).or_default() += 1;
            }
        }
        if let Some(region) = authorization.and_then(credential_region) {
            let mut regions = self.regions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if regions.len() < MAX_ACCESS_KEYS || regions.contains_key(region) {
                *regions.entry(region.to_owned()).or_default() += 1;
            }
        }
    }

    /// What phrase `id` means: the script's `sonic.phrases`, else the text
    /// `SynthesizeSpeech` rendered as it.
    pub fn phrase(&self, id: u32) -> Option<String> {
        self.script.sonic.phrases.get(&id).cloned().or_else(|| self.spoken.text_of(id))
    }

    /// Counts a valid model call; returns its 0-based index.
    pub fn next_model_call(&self) -> u64 {
        self.model_calls.fetch_add(1, Ordering::Relaxed)
    }

    /// Counts a match of rule `rule`; returns its 0-based index among that rule's matches.
    pub fn next_rule_match(&self, rule: usize) -> u64 {
        self.rule_matches.get(rule).map_or(0, |c| c.fetch_add(1, Ordering::Relaxed))
    }

    /// The error of the first `modelFaults` entry that a request for `model` signed for
    /// `region` meets and that still applies (its `first` not used up), counted as a fault.
    pub fn model_fault(&self, model: &str, region: Option<&str>) -> Option<ServiceError> {
        let (index, fault) =
            self.script.model_faults.iter().enumerate().find(|(_, fault)| fault.matches(model, region))?;
        let seen = self.model_fault_matches.get(index)?.fetch_add(1, Ordering::Relaxed);
        if !applies(fault.error.first, seen) {
            return None;
        }
        self.count_fault();
        let error = &fault.error;
        let message = error.message.clone().unwrap_or_else(|| error.kind.default_message().to_owned());
        Some(ServiceError::new(error.kind, message))
    }

    /// Counts an injected fault.
    pub fn count_fault(&self) {
        self.faults_injected.fetch_add(1, Ordering::Relaxed);
    }

    /// A fresh request id (deterministic: a counter formatted like the service's ids).
    pub fn next_request_id(&self) -> String {
        let n = self.request_ids.fetch_add(1, Ordering::Relaxed);
        format!("00000000-0000-4000-8000-{n:012x}")
    }

    /// The counters now.
    pub fn stats(&self) -> SimStats {
        SimStats {
            requests: Operation::ALL
                .iter()
                .map(|op| (*op, self.requests[op.index()].load(Ordering::Relaxed)))
                .collect(),
            model_calls: self.model_calls.load(Ordering::Relaxed),
            faults_injected: self.faults_injected.load(Ordering::Relaxed),
            http2_requests: self.http2_requests.load(Ordering::Relaxed),
            access_keys: self.access_keys.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
            regions: self.regions.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
        }
    }
}

/// Whether a fault limited to the first `first` occurrences applies to occurrence `index`.
pub fn applies(first: Option<u64>, index: u64) -> bool {
    first.is_none_or(|n| index < n)
}

/// The region of a SigV4 `Authorization` header's credential scope
/// (`Credential=<key id>/<date>/<region>/<service>/aws4_request`).
pub fn credential_region(authorization: &str) -> Option<&str> {
    let credential = authorization.split([' ', ',']).find_map(|part| part.strip_prefix("Credential="))?;
    let region = credential.split('/').nth(2)?;
    (!region.is_empty()
        && region.len() <= 32
        && region.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'))
    .then_some(region)
}

/// The access key id of a SigV4 `Authorization` header
/// (`AWS4-HMAC-SHA256 Credential=<key id>/<date>/<region>/<service>/aws4_request, ...`).
fn access_key_id(authorization: &str) -> Option<&str> {
    let credential = authorization.split([' ', ',']).find_map(|part| part.strip_prefix("Credential="))?;
    let key = credential.split('/').next()?;
    (!key.is_empty() && key.len() <= 128 && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
        .then_some(key)
}

#[cfg(test)]
mod access_key_tests {
    use super::access_key_id;

    #[test]
    fn the_key_id_of_a_sigv4_header_and_nothing_from_others() {
        let header = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261125/us-east-1/bedrock/aws4_request, \
                      SignedHeaders=host;x-amz-date, Signature=abc";
        assert_eq!(access_key_id(header), Some("AKIDEXAMPLE"));
        assert_eq!(super::credential_region(header), Some("us-east-1"));
        assert_eq!(super::credential_region("Bearer token"), None);
        assert_eq!(access_key_id("Bearer token"), None);
        assert_eq!(access_key_id("AWS4-HMAC-SHA256 Credential=/x"), None);
        assert_eq!(access_key_id("AWS4-HMAC-SHA256 Credential=a<b>/x"), None, "only a plausible key id");
    }
}
