//! A baresip that takes calls: the callee of the edge's outbound calls, the person of a
//! transfer's far side.

use std::path::Path;
use std::process::{Command, Stdio};

use super::{Phone, codec_config, rtp_ports};
use crate::stack::Stack;

/// A baresip that takes calls (the callee of the edge's outbound calls) on `port`:
/// `answermode` `auto` (answers at once, plays the phrase tone, records what it hears) or
/// `manual` (rings until the caller gives up); `max_calls` calls at once (past it: 486 Max
/// Calls). It hangs up when told to stop ([`Callee::hang_up`]).
pub(crate) struct Callee {
    pub(crate) phone: Phone,
    port: u16,
}

/// How a [`Callee`] takes calls.
struct Listening<'a> {
    answermode: &'a str,
    /// baresip's `audio_codecs` (`PCMU`, `G722/16000/1`, `opus/48000/1`).
    codec: &'a str,
    max_calls: u32,
    port: u16,
    transport: &'a str,
    more_config: &'a str,
}

impl Callee {
    pub(crate) fn listen(stack: &Stack, name: &str, answermode: &str, max_calls: u32, port: u16) -> Self {
        // Half a second of silence, the phrase tone (500 Hz, 1.5 s), then silence.
        let phrase: &[&str] = &["synth", "1.5", "sine", "500", "vol", "0.5", "pad", "0.5", "60"];
        Self::listen_saying(&stack.dir, &stack.tools, name, answermode, max_calls, port, &[phrase])
    }

    /// [`Callee::listen`] answering at once, its account on `transport` (`tcp`, `tls`), with
    /// `more_config` lines in its config (a TLS callee's `sip_certificate`: it takes TLS on
    /// `port + 1`).
    pub(crate) fn listen_over(stack: &Stack, name: &str, port: u16, transport: &str, more_config: &str) -> Self {
        let phrase: &[&str] = &["synth", "1.5", "sine", "500", "vol", "0.5", "pad", "0.5", "60"];
        let how = Listening { answermode: "auto", codec: "PCMU", max_calls: 4, port, transport, more_config };
        Self::listen_as(&stack.dir, &stack.tools, name, how, &[phrase])
    }

    /// [`Callee::listen`] answering at once and speaking only `codec` (baresip's
    /// `audio_codecs` name: `G722/16000/1`, `opus/48000/1`).
    pub(crate) fn listen_speaking(stack: &Stack, name: &str, port: u16, codec: &str) -> Self {
        let phrase: &[&str] = &["synth", "1.5", "sine", "500", "vol", "0.5", "pad", "0.5", "60"];
        let how = Listening { answermode: "auto", codec, max_calls: 4, port, transport: "udp", more_config: "" };
        Self::listen_as(&stack.dir, &stack.tools, name, how, &[phrase])
    }

    /// [`Callee::listen`] in `dir` (not a [`Stack`]'s), saying the parts that sox makes
    /// from each list of `synth` effects (`sox -n ... PART <effects>`), one after another.
    pub(crate) fn listen_saying(
        dir: &Path,
        tools: &Path,
        name: &str,
        answermode: &str,
        max_calls: u32,
        port: u16,
        parts: &[&[&str]],
    ) -> Self {
        let how = Listening { answermode, codec: "PCMU", max_calls, port, transport: "udp", more_config: "" };
        Self::listen_as(dir, tools, name, how, parts)
    }

    fn listen_as(dir: &Path, tools: &Path, name: &str, how: Listening<'_>, parts: &[&[&str]]) -> Self {
        let Listening { answermode, codec, max_calls, port, transport, more_config } = how;
        let (rate, codec_modules) = codec_config(codec);
        let dir = dir.join(name);
        std::fs::create_dir_all(dir.join("snd")).expect("a folder");
        let sox = tools.join("sox");
        let mut files = Vec::new();
        for (i, effects) in parts.iter().enumerate() {
            let part = dir.join(format!("part{i}.wav"));
            let status = Command::new(&sox)
                .args(["-n", "-r", rate, "-c", "1", "-b", "16"])
                .arg(&part)
                .args(*effects)
                .status()
                .expect("sox runs");
            assert!(status.success(), "sox made the callee's part {effects:?}");
            files.push(part);
        }
        let status = if files.len() == 1 {
            Command::new(&sox).arg(&files[0]).arg(dir.join("say.wav")).status()
        } else {
            Command::new(&sox).args(&files).arg(dir.join("say.wav")).status()
        };
        assert!(status.expect("sox runs").success(), "sox made the callee's WAV");
        let d = dir.display();
        let config = format!(
            "sip_listen 127.0.0.1:{port}\nmodule_path /usr/lib/baresip/modules\nmodule stdio.so\nmodule g711.so\n{codec_modules}\
             module aufile.so\nmodule sndfile.so\nmodule account.so\nmodule menu.so\n\
             audio_source aufile,{d}/say.wav\naudio_player aufile,{d}/play.wav\naudio_alert aufile,{d}/say.wav\n\
             snd_path {d}/snd\ncall_max_calls {max_calls}\n{}{more_config}",
            rtp_ports()
        );
        std::fs::write(dir.join("config"), config).expect("config");
        let account = format!(
            "<sip:callee@127.0.0.1:{port};transport={transport}>;regint=0;answermode={answermode};audio_codecs={codec}\n"
        );
        std::fs::write(dir.join("accounts"), account).expect("accounts");
        let log = std::fs::File::create(dir.join("baresip.log")).expect("a log");
        let child = Command::new(tools.join("baresip"))
            .arg("-f")
            .arg(&dir)
            .args(["-t", "180"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("baresip starts");
        let mut phone = Phone { dir, child };
        // Its port is in the stack's configuration already: taken meanwhile, it cannot be
        // picked again here.
        assert!(
            phone.ready(),
            "the callee's port {port} was taken by another program after it was picked, before baresip \
             bound it (a port collision, not the code under test):\n{}",
            phone.log()
        );
        Self { phone, port }
    }

    pub(crate) fn uri(&self) -> String {
        format!("sip:callee@127.0.0.1:{}", self.port)
    }

    /// Stops baresip as a person hangs up: SIGTERM, it sends BYE and closes its recordings.
    pub(crate) fn hang_up(&self) {
        let status = Command::new("kill").args(["-TERM", &self.phone.child.id().to_string()]).status().expect("kill");
        assert!(status.success(), "SIGTERM to the callee");
    }
}
