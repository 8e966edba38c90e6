//! Trunks: who may call the edge. A trunk is the platform team's: the source addresses it
//! calls from ([`Cidr`]s), SIP digest credentials ([`digest`]), or both. When trunks are
//! configured, a new INVITE is [`Trunks::admit`]ted only from one: from a trunk's addresses
//! it is let through (when that trunk has no credentials) or challenged (401, one
//! `WWW-Authenticate` per algorithm, SHA-256 first, RFC 8760) until it answers with the
//! trunk's credentials; from anywhere else it is refused (403). A call through a trunk is
//! *trusted*: its caller's number (P-Asserted-Identity) may be vouched for. With no trunks
//! configured every source is let through untrusted (a PBX on a private network, a test).
//!
//! Nonces are the edge's: each is issued once in a challenge, kept at most
//! [`NONCE_LIFETIME`] and in a table of at most [`MAX_NONCES`] (the oldest forgotten
//! first), and each answer's `nc` must grow (a replayed answer is challenged again).

pub mod digest;
pub mod outbound;

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use digest::{Algorithm, Answer};

use crate::sip::Request;

/// Nonces outstanding at most; past it the oldest is forgotten (its UA is challenged again).
pub const MAX_NONCES: usize = 4096;
/// How long a nonce is taken; an answer with an older one is challenged with `stale=true`.
pub const NONCE_LIFETIME: Duration = Duration::from_secs(300);
/// Trunks at most.
pub const MAX_TRUNKS: usize = 64;

/// An address block, `192.0.2.0/24` or `2001:db8::/32` (a bare address is one host).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// Why a trunk's configuration is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TrunkError {
    /// Not `ADDRESS/PREFIX`.
    #[error("{0:?} is not an address block (write 192.0.2.0/24, 2001:db8::/32 or one address)")]
    Cidr(String),
    /// Neither addresses nor credentials: it would let anyone in.
    #[error("trunk {0:?} names neither source addresses nor credentials")]
    Open(String),
    /// Two trunks of one name, an empty name or user, or too many trunks.
    #[error("{0}")]
    Invalid(String),
}

impl std::str::FromStr for Cidr {
    type Err = TrunkError;

    fn from_str(text: &str) -> Result<Self, TrunkError> {
        let bad = || TrunkError::Cidr(text.to_owned());
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix.parse::<u8>().map_err(|_| bad())?)),
            None => (text, None),
        };
        let network: IpAddr = address.trim().parse().map_err(|_| bad())?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        if prefix > max {
            return Err(bad());
        }
        Ok(Self { network, prefix })
    }
}

impl Cidr {
    /// Whether `address` is in the block (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = match address {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
            v4 => v4,
        };
        match (self.network, address) {
            (IpAddr::V4(net), IpAddr::V4(addr)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(addr) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(addr)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(addr) & mask
            }
            _ => false,
        }
    }
}

/// Digest credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("username", &self.username).finish_non_exhaustive()
    }
}

/// One trunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trunk {
    /// Its name (logs, metrics).
    pub name: String,
    /// Where it calls from; empty: anywhere (then it must have credentials).
    pub sources: Vec<Cidr>,
    /// Its digest credentials, if it must prove them.
    pub credentials: Option<Credentials>,
}

/// What to do with a new INVITE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No trunks configured: let it through, untrusted.
    Open,
    /// Through the named trunk: trusted.
    Trunk(String),
    /// Challenge it: 401 with these `WWW-Authenticate` values.
    Challenge(Vec<String>),
    /// Refuse it (403), with the reason for the log.
    Forbidden(&'static str),
}

/// The trunks and the nonces issued (see the module docs).
#[derive(Clone, Debug)]
pub struct Trunks {
    trunks: Vec<Trunk>,
    realm: String,
    secret: [u8; 16],
    counter: u64,
    /// Nonce -> (issued, highest `nc` seen).
    nonces: HashMap<String, (Instant, u32)>,
    order: VecDeque<String>,
    /// The challenges' algorithms, most preferred first.
    algorithms: Vec<Algorithm>,
}

impl Default for Trunks {
    /// No trunks: every source is taken, untrusted.
    fn default() -> Self {
        Self {
            trunks: Vec::new(),
            realm: String::new(),
            secret: [0; 16],
            counter: 0,
            nonces: HashMap::new(),
            order: VecDeque::new(),
            algorithms: vec![Algorithm::Sha256, Algorithm::Md5],
        }
    }
}

impl Trunks {
    /// The trunks, the realm challenges name, and a random secret nonces are made from.
    pub fn new(trunks: Vec<Trunk>, realm: impl Into<String>, secret: [u8; 16]) -> Result<Self, TrunkError> {
        if trunks.len() > MAX_TRUNKS {
            return Err(TrunkError::Invalid(format!("{} trunks; at most {MAX_TRUNKS}", trunks.len())));
        }
        for (i, trunk) in trunks.iter().enumerate() {
            if trunk.name.is_empty() || trunks[..i].iter().any(|t| t.name == trunk.name) {
                return Err(TrunkError::Invalid(format!("trunk names must be set and distinct ({:?})", trunk.name)));
            }
            if trunk.sources.is_empty() && trunk.credentials.is_none() {
                return Err(TrunkError::Open(trunk.name.clone()));
            }
            if trunk.credentials.as_ref().is_some_and(|c| c.username.is_empty() || c.password.is_empty()) {
                return Err(TrunkError::Invalid(format!("trunk {:?}: an empty user name or password", trunk.name)));
            }
        }
        let realm = realm.into();
        let algorithms = vec![Algorithm::Sha256, Algorithm::Md5];
        Ok(Self { trunks, realm, secret, counter: 0, nonces: HashMap::new(), order: VecDeque::new(), algorithms })
    }

    /// Challenges with `algorithms` only, in this order (default: SHA-256, then MD5, as
    /// RFC 8760 asks). Some deployed UAs give up at a first challenge they cannot compute
    /// instead of taking the next: for them, `[Md5]`. An empty list keeps the default.
    pub fn with_algorithms(mut self, algorithms: Vec<Algorithm>) -> Self {
        if !algorithms.is_empty() {
            self.algorithms = algorithms;
        }
        self
    }

    /// Whether any trunk is configured.
    pub fn is_empty(&self) -> bool {
        self.trunks.is_empty()
    }

    /// Nonces outstanding.
    pub fn nonces(&self) -> usize {
        self.nonces.len()
    }

    /// What to do with a new INVITE from `source` (see the module docs).
    pub fn admit(&mut self, now: Instant, source: IpAddr, invite: &Request) -> Verdict {
        if self.trunks.is_empty() {
            return Verdict::Open;
        }
        let reachable: Vec<usize> = (0..self.trunks.len())
            .filter(|&i| {
                let sources = &self.trunks[i].sources;
                sources.is_empty() || sources.iter().any(|c| c.contains(source))
            })
            .collect();
        if reachable.is_empty() {
            return Verdict::Forbidden("not from a trunk's addresses");
        }
        if let Some(&open) = reachable.iter().find(|&&i| self.trunks[i].credentials.is_none()) {
            return Verdict::Trunk(self.trunks[open].name.clone());
        }
        let answer = invite.headers.get("Authorization").or_else(|| invite.headers.get("Proxy-Authorization"));
        let Some(answer) = answer else { return self.challenge(now, false) };
        let Ok(answer) = Answer::parse(answer) else { return Verdict::Forbidden("a malformed Authorization") };
        if answer.realm != self.realm {
            return self.challenge(now, false);
        }
        match self.nonces.get(&answer.nonce).copied() {
            None => return self.challenge(now, false),
            Some((issued, _)) if now.saturating_duration_since(issued) > NONCE_LIFETIME => {
                self.forget(&answer.nonce);
                return self.challenge(now, true);
            }
            Some((_, seen)) => {
                let nc = answer.qop.as_ref().map_or(u32::MAX, |(nc, _)| *nc);
                if answer.qop.is_some() && nc <= seen {
                    return self.challenge(now, false);
                }
            }
        }
        let method = invite.method.as_str();
        let proven = reachable.iter().map(|&i| &self.trunks[i]).find(|t| {
            t.credentials
                .as_ref()
                .is_some_and(|c| c.username == answer.username && answer.verifies(method, &c.password))
        });
        let Some(trunk) = proven.map(|t| t.name.clone()) else {
            return Verdict::Forbidden("wrong trunk credentials");
        };
        match &answer.qop {
            // The nonce takes the next count only.
            Some((nc, _)) => {
                if let Some(entry) = self.nonces.get_mut(&answer.nonce) {
                    entry.1 = *nc;
                }
            }
            // RFC 2069 has no count: the nonce is used up.
            None => self.forget(&answer.nonce),
        }
        Verdict::Trunk(trunk)
    }

    fn challenge(&mut self, now: Instant, stale: bool) -> Verdict {
        self.counter += 1;
        let seed: String = self.secret.iter().map(|b| format!("{b:02x}")).collect();
        let nonce = Algorithm::Sha256.hex(&format!("{seed}:{}", self.counter))[..32].to_owned();
        while self.nonces.len() >= MAX_NONCES {
            let Some(oldest) = self.order.pop_front() else { break };
            self.nonces.remove(&oldest);
        }
        // Expired ones go too (the table holds only what may still be answered).
        while let Some(oldest) = self.order.front() {
            match self.nonces.get(oldest) {
                Some((issued, _)) if now.saturating_duration_since(*issued) <= NONCE_LIFETIME => break,
                _ => {
                    let oldest = self.order.pop_front().unwrap_or_default();
                    self.nonces.remove(&oldest);
                }
            }
        }
        self.nonces.insert(nonce.clone(), (now, 0));
        self.order.push_back(nonce.clone());
        Verdict::Challenge(self.algorithms.iter().map(|a| digest::challenge(&self.realm, &nonce, *a, stale)).collect())
    }

    fn forget(&mut self, nonce: &str) {
        self.nonces.remove(nonce);
        self.order.retain(|n| n != nonce);
    }
}

#[cfg(test)]
mod tests;
