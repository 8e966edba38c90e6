//! The outbound trunks of `switchboard sip` and of local mode's edge from their flags (one
//! parser for both; local mode's are named `--sip-outbound-trunk` and so on, see
//! [`OutboundFlags::prefix`]): `--outbound-trunk [NAME=]URI`
//! (repeatable; one without a name is named `default`), each trunk's digest credentials
//! (`--outbound-credentials [NAME=]DIR`), caller-id (`--caller-id [NAME=]ID`; one without a
//! name is every trunk's that has none of its own) and TLS CA (`--outbound-ca [NAME=]FILE`),
//! and which is the default (`--default-outbound-trunk NAME`, else the first). A value
//! without a name belongs to the trunk named `default`, or to the only trunk there is.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use switchboard_core::outbound::{DEFAULT_TRUNK, is_trunk_name};
use switchboard_sip_edge::Route;
use switchboard_sip_edge::trunk::outbound::OutboundTrunk;

/// The outbound flags, as given.
#[derive(Debug, Default)]
pub(super) struct OutboundFlags<'a> {
    /// What the flags' names start with after `--`: empty for `switchboard sip`, `sip-` for
    /// local mode (`--sip-outbound-trunk`, `--sip-caller-id`...), for the errors' words.
    pub prefix: &'static str,
    pub trunks: &'a [String],
    pub credentials: &'a [String],
    pub caller_ids: &'a [String],
    pub cas: &'a [String],
    pub default: Option<&'a str>,
    pub ring_timeout: Duration,
}

/// `NAME=VALUE` when what comes before the first `=` is a trunk's name, else the value
/// alone (a URI's parameters and a path may hold `=` too, never before a `:` or `/`).
fn named(text: &str) -> (Option<&str>, &str) {
    match text.split_once('=') {
        Some((name, value)) if is_trunk_name(name.trim()) => (Some(name.trim()), value.trim()),
        _ => (None, text.trim()),
    }
}

/// The value of `flag` for trunk `name` among `given`: its own, else one without a name
/// when that belongs to it (`applies`).
fn value_for<'a>(
    flag: &str,
    given: &'a [String],
    name: &str,
    unnamed_applies: bool,
) -> anyhow::Result<Option<&'a str>> {
    let mut found = None;
    for (of, value) in given.iter().map(|g| named(g)) {
        let mine = match of {
            Some(of) => of == name,
            None => unnamed_applies,
        };
        if mine && found.replace(value).is_some() {
            bail!("{flag} is given twice for the outbound trunk {name}");
        }
    }
    Ok(found)
}

/// The one value of `flag` among `given` without a trunk's name.
pub(super) fn unnamed<'a>(flag: &str, given: &'a [String]) -> anyhow::Result<Option<&'a str>> {
    let mut found = None;
    for value in given.iter().map(|g| named(g)).filter_map(|(of, value)| of.is_none().then_some(value)) {
        if found.replace(value).is_some() {
            bail!("{flag} is given twice without a trunk's name (NAME=VALUE names the trunk it is for)");
        }
    }
    Ok(found)
}

/// The trunks the flags describe, credentials read from their folders and CAs from their
/// files; `None` without `--outbound-trunk`.
pub(super) fn outbound(flags: &OutboundFlags<'_>) -> anyhow::Result<Option<switchboard_sip_edge::Outbound>> {
    if flags.trunks.is_empty() {
        return Ok(None);
    }
    let trunks: Vec<(&str, &str)> =
        flags.trunks.iter().map(|t| named(t)).map(|(name, uri)| (name.unwrap_or(DEFAULT_TRUNK), uri)).collect();
    let names: Vec<&str> = trunks.iter().map(|(name, _)| *name).collect();
    let prefix = flags.prefix;
    let (credentials_flag, caller_id_flag, ca_flag) =
        (format!("--{prefix}outbound-credentials"), format!("--{prefix}caller-id"), format!("--{prefix}outbound-ca"));
    for (flag, given) in [(&credentials_flag, flags.credentials), (&caller_id_flag, flags.caller_ids)]
        .into_iter()
        .chain([(&ca_flag, flags.cas)])
    {
        for (of, _) in given.iter().map(|g| named(g)) {
            if let Some(of) = of.filter(|of| !names.contains(of)) {
                bail!("{flag} names the outbound trunk {of}, which is not one: the trunks are {}", names.join(", "));
            }
        }
    }
    let mut routes = Vec::new();
    for (name, uri) in &trunks {
        // A value without a name: the `default` trunk's, or the only trunk's.
        let alone = *name == DEFAULT_TRUNK || trunks.len() == 1;
        let caller_id = match value_for(&caller_id_flag, flags.caller_ids, name, false)? {
            Some(own) => own,
            None => unnamed(&caller_id_flag, flags.caller_ids)?.with_context(|| {
                format!(
                    "the outbound trunk {name} needs {caller_id_flag}: the number (E.164) or SIP user its calls come \
                     from ({caller_id_flag} {name}=ID for it alone)"
                )
            })?,
        };
        let credentials = match value_for(&credentials_flag, flags.credentials, name, alone)? {
            Some(dir) => Some(super::sip::read_credentials(&format!("the outbound trunk {name}"), Path::new(dir))?),
            None => None,
        };
        let ca = value_for(&ca_flag, flags.cas, name, alone)?.map(PathBuf::from);
        let trunk = OutboundTrunk::new(uri, caller_id, credentials)?;
        routes.push(Route::new(name, trunk, ca.as_deref())?);
    }
    Ok(Some(switchboard_sip_edge::Outbound::routes(routes, flags.default, flags.ring_timeout)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn one_trunk_without_a_name_is_the_default_and_named_trunks_each_take_their_own() {
        let ring = Duration::from_secs(30);
        let (trunks, ids) = (strings(&["sip:10.0.0.1:5070"]), strings(&["+4930123"]));
        let flags = OutboundFlags { trunks: &trunks, caller_ids: &ids, ring_timeout: ring, ..Default::default() };
        let one = outbound(&flags).expect("valid").expect("some");
        assert_eq!(one.names(), ["default"]);
        assert_eq!(one.trunk.caller_id, "+4930123");
        let trunks = strings(&["carrier=sip:10.0.0.1;transport=tcp", "pbx=sip:10.0.0.2:5080"]);
        let ids = strings(&["+4930123", "pbx=desk-7"]);
        let flags = OutboundFlags {
            trunks: &trunks,
            caller_ids: &ids,
            default: Some("pbx"),
            ring_timeout: ring,
            ..Default::default()
        };
        let two = outbound(&flags).expect("valid").expect("some");
        assert_eq!(two.names(), ["pbx", "carrier"], "the default first");
        assert_eq!(two.route(None).expect("default").trunk.caller_id, "desk-7");
        assert_eq!(two.route(Some("carrier")).expect("carrier").trunk.caller_id, "+4930123", "the unnamed one");
        assert!(two.route(Some("other")).is_none());
    }

    #[test]
    fn what_does_not_fit_the_trunks_is_refused_with_what_to_write() {
        let ring = Duration::from_secs(30);
        let trunks = strings(&["carrier=sip:10.0.0.1", "pbx=sip:10.0.0.2"]);
        let refused = |ids: &[&str], cas: &[&str], default: Option<&str>| {
            let (ids, cas) = (strings(ids), strings(cas));
            let flags = OutboundFlags {
                trunks: &trunks,
                caller_ids: &ids,
                cas: &cas,
                default,
                ring_timeout: ring,
                ..Default::default()
            };
            outbound(&flags).expect_err("refused").to_string()
        };
        assert!(refused(&["carrier=+4930"], &[], None).contains("the outbound trunk pbx needs --caller-id"));
        assert!(refused(&["+4930", "other=+4931"], &[], None).contains("names the outbound trunk other"));
        assert!(refused(&["+4930"], &[], Some("other")).contains("the default outbound trunk \"other\""));
        assert!(refused(&["+4930"], &["carrier=/ca.pem"], None).contains("a CA file is for a TLS trunk"));
        assert!(refused(&["+4930", "pbx=a", "pbx=b"], &[], None).contains("given twice"));
        // Local mode's flags are named in its errors as it spells them.
        let ids = strings(&["carrier=+4930"]);
        let flags = OutboundFlags { prefix: "sip-", trunks: &trunks, caller_ids: &ids, ..Default::default() };
        let local = outbound(&flags).expect_err("refused").to_string();
        assert!(local.contains("needs --sip-caller-id") && local.contains("--sip-caller-id pbx=ID"), "{local}");
        let twice = strings(&["a=sip:10.0.0.1", "a=sip:10.0.0.2"]);
        let ids = strings(&["+4930"]);
        let flags = OutboundFlags { trunks: &twice, caller_ids: &ids, ring_timeout: ring, ..Default::default() };
        assert!(outbound(&flags).expect_err("twice").to_string().contains("named twice"));
    }
}
