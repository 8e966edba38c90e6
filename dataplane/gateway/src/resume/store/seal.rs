//! Seals: what the Redis store keeps is signed with the gateway's key (every replica has
//! it) over where it is kept and what it says, so a value that was changed, moved to
//! another key, or written by anyone else is refused ([`StoreError::Tampered`]).

use switchboard_core::grant::GatewaySigner;

use super::StoreError;
use crate::resume::Parked;

/// What a seal signs before the store key and the session's JSON.
const SEAL_DOMAIN: &[u8] = b"switchboard parked session\0";
/// What an alias's seal signs before the old and the new key.
const ALIAS_DOMAIN: &[u8] = b"switchboard resume alias\0";
/// An Ed25519 signature.
pub(super) const SEAL_BYTES: usize = 64;

/// What the seal of the session `json` parked at `key` signs.
fn sealed(key: &str, json: &[u8]) -> Vec<u8> {
    [SEAL_DOMAIN, key.as_bytes(), b"\0", json].concat()
}

/// The stored value of `session` at `key`: its seal, then its JSON.
pub(super) fn seal(signer: &GatewaySigner, key: &str, session: &Parked) -> Result<Vec<u8>, StoreError> {
    let json = serde_json::to_vec(session)?;
    let mut value = signer.seal(&sealed(key, &json)).to_vec();
    value.extend_from_slice(&json);
    Ok(value)
}

/// `session` sealed for `key` as text (the conversation record's continuation state): the
/// seal in hex, then the JSON.
pub fn seal_text(signer: &GatewaySigner, key: &str, session: &Parked) -> Result<String, StoreError> {
    let json = serde_json::to_string(session)?;
    let seal = signer.seal(&sealed(key, json.as_bytes()));
    Ok(format!("{}{json}", hex::encode(seal)))
}

/// The session sealed for `key` as `text` by [`seal_text`], if the seal is this gateway's.
pub fn open_text(signer: &GatewaySigner, key: &str, text: &str) -> Result<Parked, StoreError> {
    let split = SEAL_BYTES * 2;
    if !text.is_char_boundary(split) || text.len() < split {
        return Err(StoreError::Tampered);
    }
    let (seal, json) = text.split_at(split);
    let seal = hex::decode(seal).map_err(|_| StoreError::Tampered)?;
    if !signer.public().opens(&sealed(key, json.as_bytes()), &seal) {
        return Err(StoreError::Tampered);
    }
    Ok(serde_json::from_str(json)?)
}

/// The session stored at `key` as `value`, if its seal is this gateway's.
pub(super) fn open(signer: &GatewaySigner, key: &str, value: &[u8]) -> Result<Parked, StoreError> {
    if value.len() < SEAL_BYTES {
        return Err(StoreError::Tampered);
    }
    let (signature, json) = value.split_at(SEAL_BYTES);
    if !signer.public().opens(&sealed(key, json), signature) {
        return Err(StoreError::Tampered);
    }
    Ok(serde_json::from_slice(json)?)
}

/// An alias from `old` (a resume key the client may still hold) to `new`, sealed: a store
/// key binds a token to its client's identity, and an alias that anyone could write would
/// undo that.
pub(super) fn seal_alias(signer: &GatewaySigner, old: &str, new: &str) -> Vec<u8> {
    let mut value = signer.seal(&[ALIAS_DOMAIN, old.as_bytes(), b"\0", new.as_bytes()].concat()).to_vec();
    value.extend_from_slice(new.as_bytes());
    value
}

/// The key the alias at `old` names, if sealed by this gateway for `old`.
pub(super) fn open_alias(signer: &GatewaySigner, old: &str, value: &[u8]) -> Result<String, StoreError> {
    if value.len() < SEAL_BYTES {
        return Err(StoreError::Tampered);
    }
    let (signature, new) = value.split_at(SEAL_BYTES);
    if !signer.public().opens(&[ALIAS_DOMAIN, old.as_bytes(), b"\0", new].concat(), signature) {
        return Err(StoreError::Tampered);
    }
    String::from_utf8(new.to_vec()).map_err(|_| StoreError::Tampered)
}
