//! Offers from a real WebRTC stack (str0m as the browser): taken with Opus audio and a data
//! channel, refused with their message without Opus or without audio.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Instant;

use str0m::Rtc;
use str0m::media::{Direction, MediaKind};
use switchboard_webrtc::{Offer, OfferRules};

#[test]
fn a_real_offer_is_taken() {
    let (_, _, _, offer, _) = common::client(Instant::now(), |c| c);
    let offer = Offer::parse(offer.as_bytes(), OfferRules::default()).unwrap();
    assert!(offer.data_channel);
}

#[test]
fn an_offer_without_opus_is_refused_with_its_message() {
    let (_, _, _, offer, _) = common::client(Instant::now(), |c| c.clear_codecs().enable_pcmu(true, false));
    let error = Offer::parse(offer.as_bytes(), OfferRules::default()).unwrap_err();
    assert_eq!((error.status(), error.code()), (400, "no_opus"));
    assert!(error.to_string().contains("pcmu"), "{error}");
}

#[test]
fn an_offer_without_audio_is_refused_with_its_message() {
    let mut rtc = Rtc::builder().build(Instant::now());
    let mut change = rtc.sdp_api();
    change.add_channel("session".into());
    let (offer, _) = change.apply().unwrap();
    let error = Offer::parse(offer.to_sdp_string().as_bytes(), OfferRules::default()).unwrap_err();
    assert_eq!((error.status(), error.code()), (400, "no_audio"));
    assert!(error.to_string().contains("audio track"), "{error}");
}

#[test]
fn a_video_only_offer_is_refused_as_without_audio() {
    let mut rtc = Rtc::builder().build(Instant::now());
    let mut change = rtc.sdp_api();
    change.add_media(MediaKind::Video, Direction::SendRecv, None, None, None);
    change.add_channel("session".into());
    let (offer, _) = change.apply().unwrap();
    let error = Offer::parse(offer.to_sdp_string().as_bytes(), OfferRules::default()).unwrap_err();
    assert_eq!(error.code(), "no_audio");
}
