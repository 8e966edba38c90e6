//! Writes transcripts as JSONL, one file per session (`<dir>/<session id>.jsonl`), from a
//! background task fed through a bounded channel so slow disks never block a session; a
//! full channel drops lines and logs it.

use std::path::PathBuf;

use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use switchboard_core::TranscriptEntry;

/// Lines buffered before new ones are dropped.
pub const BUFFER: usize = 4096;

/// The sending side of the transcript writer.
#[derive(Clone, Debug)]
pub struct TranscriptSink {
    tx: mpsc::Sender<TranscriptEntry>,
}

impl TranscriptSink {
    /// Starts a writer into `dir` (created if missing).
    pub fn start(dir: PathBuf) -> Self {
        let (tx, mut rx) = mpsc::channel::<TranscriptEntry>(BUFFER);
        tokio::spawn(async move {
            if let Err(e) = tokio::fs::create_dir_all(&dir).await {
                tracing::error!(dir = %dir.display(), "cannot create the transcript directory: {e}; transcripts are not written");
                return;
            }
            while let Some(entry) = rx.recv().await {
                let name: String =
                    entry.session_id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
                let path = dir.join(format!("{name}.jsonl"));
                let mut line = serde_json::to_string(&entry).unwrap_or_default();
                line.push('\n');
                let written = async {
                    let mut file = tokio::fs::OpenOptions::new().create(true).append(true).open(&path).await?;
                    file.write_all(line.as_bytes()).await
                }
                .await;
                if let Err(e) = written {
                    tracing::warn!(path = %path.display(), "cannot write a transcript line: {e}");
                }
            }
        });
        Self { tx }
    }

    /// Queues `entry`.
    pub fn write(&self, entry: TranscriptEntry) {
        if self.tx.try_send(entry).is_err() {
            tracing::warn!("transcript writer is behind; a transcript line was dropped");
        }
    }
}
