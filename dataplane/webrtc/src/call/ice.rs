//! A call's ICE sessions after the offer: candidates trickled in `PATCH`es, an ICE restart
//! (new credentials, answered with the edge's new ones), and WHIP's `ETag` / `If-Match`
//! naming the ICE session a `PATCH` is meant for.

use std::time::Instant;

use super::{Call, CallError};
use crate::offer::{Offer, OfferError};
use crate::trickle::{Fragment, answer_fragment, restart_offer};

impl Call {
    /// A `PATCH` body (`application/trickle-ice-sdpfrag`): new candidates, or (new ICE
    /// credentials) an ICE restart, answered with the call's new credentials as a fragment
    /// (`200 OK`); `None` for trickled candidates (`204 No Content`), whose fragment may name
    /// their ICE session by its ufrag alone: another session's are refused
    /// ([`crate::trickle::FragmentError::OtherIceSession`]).
    pub fn patch(&mut self, now: Instant, fragment: &Fragment) -> Result<Option<String>, CallError> {
        let answer = match fragment.credentials() {
            Some((ufrag, pwd)) if ufrag != self.remote_ufrag => {
                let text = restart_offer(&self.offer_text, ufrag, pwd, &fragment.candidates);
                let offer = Offer::parse(text.as_bytes(), self.config.rules)?;
                let answer = self.rtc.sdp_api().accept_offer(offer.sdp).map_err(OfferError::Refused)?.to_sdp_string();
                self.paths.learn_sdp(&text);
                self.offer_text = text;
                self.remote_ufrag = ufrag.to_owned();
                pwd.clone_into(&mut self.remote_pwd);
                self.local_ufrag = ufrag_of(&answer);
                Some(answer_fragment(&answer))
            }
            Some((_, pwd)) if pwd != self.remote_pwd => {
                return Err(crate::trickle::FragmentError::PasswordWithoutRestart.into());
            }
            // Trickled candidates under a ufrag alone: only the current session's are taken.
            None if fragment.ufrag.as_deref().is_some_and(|ufrag| ufrag != self.remote_ufrag) => {
                let found = crate::offer::snippet(fragment.ufrag.as_deref().unwrap_or_default());
                return Err(crate::trickle::FragmentError::OtherIceSession { found }.into());
            }
            _ => {
                for candidate in &fragment.candidates {
                    self.paths.learn(candidate);
                    self.rtc.add_remote_candidate(candidate.clone());
                }
                None
            }
        };
        self.drive(now);
        Ok(answer)
    }

    /// The ICE session's entity-tag, WHIP's `ETag` ([`crate::trickle::ice_session_tag`]).
    pub fn ice_session_tag(&self) -> String {
        crate::trickle::ice_session_tag(&self.local_ufrag)
    }

    /// [`Call::patch`] under WHIP's precondition (RFC 9725, 4.3.1): `if_match`, the request's
    /// `If-Match` when it has one, must hold for [`Call::ice_session_tag`]
    /// ([`crate::trickle::if_match_holds`]); otherwise [`CallError::StaleIceSession`] and
    /// nothing changes.
    pub fn patch_if_match(
        &mut self,
        now: Instant,
        fragment: &Fragment,
        if_match: Option<&str>,
    ) -> Result<Option<String>, CallError> {
        if let Some(field) = if_match
            && !crate::trickle::if_match_holds(field, &self.ice_session_tag())
        {
            return Err(CallError::StaleIceSession { found: crate::offer::snippet(field) });
        }
        self.patch(now, fragment)
    }
}

/// The first `a=ice-ufrag` of an SDP text.
pub(super) fn ufrag_of(sdp: &str) -> String {
    attribute_of(sdp, "a=ice-ufrag:")
}

/// The first `a=ice-pwd` of an SDP text.
pub(super) fn pwd_of(sdp: &str) -> String {
    attribute_of(sdp, "a=ice-pwd:")
}

fn attribute_of(sdp: &str, prefix: &str) -> String {
    sdp.lines().find_map(|l| l.trim_end_matches('\r').strip_prefix(prefix)).unwrap_or_default().trim().to_owned()
}
