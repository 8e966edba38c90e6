//! Recorded announcements the edge plays to callers itself, with no agent and no model:
//! the hold announcement while a call waits in the gateway's capacity queue, and the outage
//! announcement when an Agent's outage mode turns a caller away or interrupts a call. The
//! edge has no speech of its own; these are WAV files the platform team provides.
//!
//! Where they come from ([`Announcements::load`]): one folder, read once at start
//! (`switchboard sip --announcements`, local mode's `--sip-announcements`, the chart's
//! `sip.announcements.configMap` mounted there). Its files, and nothing else:
//!
//! - `hold.wav`, `outage.wav`: what every Agent's callers hear;
//! - `<namespace>.<agent>.hold.wav`, `<namespace>.<agent>.outage.wav`: one Agent's own,
//!   which wins over the default for its callers (a namespace holds no dot, so the first
//!   dot ends it).
//!
//! Each is a WAV of 16-bit PCM, mono, 8 or 16 kHz (16 kHz is filtered and halved), 20 ms to
//! [`wav::MAX_SECONDS`] long ([`wav`]); any other file, or one that does not read, stops the
//! edge at start with the file's name and what is wrong ([`AnnounceError`]). Hidden entries
//! (a mounted ConfigMap's `..data` links) are skipped.
//!
//! Playing is sans-I/O: a [`Player`] gives the next 20 ms frame in the call's G.711 law,
//! once or repeated with a gap; [`Interjection`] decides when an outage announcement may
//! start in a call under way (at a turn boundary). The call's task sends the frames
//! ([`crate::call`]).

mod player;
pub mod wav;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use player::{GAP, Interjection, Player};

/// What an announcement is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Purpose {
    /// While a call waits in the capacity queue (early media, repeated).
    Hold,
    /// When outage mode turns the caller away or interrupts the call (once, then the
    /// Agent's fallback).
    Outage,
}

impl Purpose {
    /// Every purpose.
    pub const ALL: [Purpose; 2] = [Purpose::Hold, Purpose::Outage];

    /// Its name: in file names and as the metrics' `purpose` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Hold => "hold",
            Self::Outage => "outage",
        }
    }
}

/// One recording, as 8 kHz samples.
#[derive(Debug)]
pub struct Recording {
    /// Its file's name, for the log.
    pub file: String,
    samples: Vec<i16>,
}

impl Recording {
    /// A recording of `samples` at 8 kHz, named `file`.
    pub fn new(file: impl Into<String>, samples: Vec<i16>) -> Self {
        Self { file: file.into(), samples }
    }

    /// How long it plays.
    pub fn duration(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.samples.len() as u64 / 8)
    }

    pub(crate) fn samples(&self) -> &[i16] {
        &self.samples
    }
}

/// Why the announcements cannot be loaded (the edge does not start).
#[derive(Debug, thiserror::Error)]
pub enum AnnounceError {
    /// The folder cannot be listed.
    #[error("cannot read the announcements folder {}", .dir.display())]
    Folder {
        /// The folder.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file cannot be read.
    #[error("cannot read the announcement {}", .file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file's name is not an announcement's.
    #[error(
        "{} is not an announcement's name: the folder holds hold.wav, outage.wav, <namespace>.<agent>.hold.wav and <namespace>.<agent>.outage.wav only",
        .file.display()
    )]
    Name {
        /// The file.
        file: PathBuf,
    },
    /// A file is larger than any announcement may be.
    #[error("the announcement {} is {bytes} bytes, more than a {}-second recording", .file.display(), wav::MAX_SECONDS)]
    TooLarge {
        /// The file.
        file: PathBuf,
        /// Its size.
        bytes: u64,
    },
    /// A file is not a recording the edge plays.
    #[error("the announcement {} cannot be played", .file.display())]
    Wav {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        #[source]
        source: wav::WavError,
    },
}

/// Whose an announcement is: every Agent's, or one Agent's (`namespace`, `name`).
type Owner = Option<(String, String)>;

/// The recordings the edge plays (see the module docs); empty: it plays none.
#[derive(Clone, Debug, Default)]
pub struct Announcements {
    recordings: Arc<BTreeMap<(Owner, Purpose), Arc<Recording>>>,
}

/// Whose and what for a file named `name` is, if it is an announcement's name.
fn parse_name(name: &str) -> Option<(Owner, Purpose)> {
    let stem = name.strip_suffix(".wav")?;
    let (rest, purpose) = Purpose::ALL.into_iter().find_map(|p| {
        if stem == p.label() {
            return Some(("", p));
        }
        stem.strip_suffix(p.label())?.strip_suffix('.').map(|rest| (rest, p))
    })?;
    if rest.is_empty() {
        return Some((None, purpose));
    }
    let (namespace, agent) = rest.split_once('.')?;
    let label = |s: &str, dots: bool| {
        !s.is_empty()
            && s.len() <= 253
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || (dots && b == b'.'))
    };
    (label(namespace, false) && label(agent, true)).then(|| (Some((namespace.to_owned(), agent.to_owned())), purpose))
}

impl Announcements {
    /// Reads and checks every recording in `dir` (see the module docs).
    pub fn load(dir: &Path) -> Result<Self, AnnounceError> {
        let folder = |source| AnnounceError::Folder { dir: dir.to_owned(), source };
        let mut recordings = BTreeMap::new();
        let mut entries: Vec<_> = std::fs::read_dir(dir).map_err(folder)?.collect::<Result<_, _>>().map_err(folder)?;
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let file = entry.path();
            if name.starts_with('.') {
                continue;
            }
            let key = parse_name(&name).ok_or_else(|| AnnounceError::Name { file: file.clone() })?;
            let read = |source| AnnounceError::Read { file: file.clone(), source };
            // Follows links (a ConfigMap's files are links into `..data`).
            let bytes = std::fs::metadata(&file).map_err(read)?.len();
            if bytes > wav::MAX_BYTES {
                return Err(AnnounceError::TooLarge { file: file.clone(), bytes });
            }
            let content = std::fs::read(&file).map_err(read)?;
            let samples = wav::read(&content).map_err(|source| AnnounceError::Wav { file: file.clone(), source })?;
            recordings.insert(key, Arc::new(Recording::new(name, samples)));
        }
        Ok(Self { recordings: Arc::new(recordings) })
    }

    /// Announcements made of `recordings` (`(namespace, agent)` or `None` for the default).
    pub fn of(recordings: impl IntoIterator<Item = (Owner, Purpose, Recording)>) -> Self {
        let map = recordings.into_iter().map(|(owner, purpose, r)| ((owner, purpose), Arc::new(r))).collect();
        Self { recordings: Arc::new(map) }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.recordings.is_empty()
    }

    /// The file names loaded, for the log at start.
    pub fn files(&self) -> Vec<&str> {
        self.recordings.values().map(|r| r.file.as_str()).collect()
    }

    /// The recording for `purpose` that a caller of `agent` hears: the Agent's own, or the
    /// default. `agent` is `namespace/name` when the gateway named it (an outage's
    /// fallback, a call waiting in the queue, also when the caller dialled a number the
    /// Agent claims); a bare name (what the caller dialled, where an older gateway names no
    /// Agent in the queue) matches an Agent's own recording when exactly one namespace has
    /// one for that name; a number names no Agent (the default).
    pub fn for_agent(&self, purpose: Purpose, agent: &str) -> Option<Arc<Recording>> {
        let own = match agent.split_once('/') {
            Some((namespace, name)) => self.recordings.get(&(Some((namespace.to_owned(), name.to_owned())), purpose)),
            None => {
                let mut found = self
                    .recordings
                    .iter()
                    .filter(|((owner, p), _)| *p == purpose && owner.as_ref().is_some_and(|(_, name)| name == agent));
                match (found.next(), found.next()) {
                    (Some((_, recording)), None) => Some(recording),
                    _ => None,
                }
            }
        };
        own.or_else(|| self.recordings.get(&(None, purpose))).cloned()
    }
}

#[cfg(test)]
mod tests;
