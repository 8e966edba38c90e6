//! The phones: a baresip that dials the edge ([`Phone`]: it plays a WAV, records what it
//! hears, presses keys through its console) and one that takes calls ([`Callee`], in
//! [`callee`]: the person of a transfer's far side, the callee of an outbound call). Either
//! speaks the codecs it is told to ([`codec_config`]: G.711, G.722, Opus).

mod callee;

pub(crate) use callee::Callee;

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use switchboard_tests::ports;

use crate::stack::{Stack, free_udp_tcp_ports, wait_for};

/// How a baresip instance runs, beyond its config.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Options {
    /// SIP trace (`-s`): every SIP message in the log.
    pub(crate) trace: bool,
    /// Its tone: how many seconds, at what frequency (default 1.5 s of 500 Hz, phrase 1).
    pub(crate) tone: Option<(f64, u32)>,
    /// After the silence, a second tone: its frequency and seconds.
    pub(crate) then: Option<(u32, u32)>,
    /// Seconds of silence after the second tone (default none: the file ends with it).
    pub(crate) after: Option<u32>,
    /// The codecs it offers and takes, in its order of preference, as baresip's
    /// `audio_codecs` names them (default `PCMU`; `G722/16000/1` and `opus/48000/1` load
    /// baresip's codec modules: [`codec_config`]).
    pub(crate) codec: Option<&'static str>,
    /// Seconds of silence before its tone (default half a second).
    pub(crate) lead: Option<u32>,
    /// Load baresip's `srtp` module (before the accounts, whose `mediaenc=` names it).
    pub(crate) srtp: bool,
    /// Say nothing: silence where the tone would be (a caller who waits to be greeted).
    pub(crate) silent: bool,
    /// After all of the above, more tones, each `(hz, seconds, quiet)`: `seconds` of a sine
    /// at `hz`, then `quiet` seconds of silence (a caller who says several phrases, each once
    /// the agent has answered the last).
    pub(crate) more: &'static [(u32, u32, u32)],
}

/// A baresip instance dialling one URI.
pub(crate) struct Phone {
    dir: PathBuf,
    child: Child,
}

impl Drop for Phone {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Phone {
    /// Dials `sip:<user>@<edge>` playing half a second of silence, 1.5 s of a 500 Hz tone
    /// (phrase 1) and `silence` seconds of silence; hangs up at the end of the file and
    /// quits after `quit` seconds.
    pub(crate) fn dial(stack: &Stack, name: &str, user: &str, silence: u32, quit: u32) -> Self {
        Self::dial_over(stack, name, user, silence, quit, "udp")
    }

    /// [`Phone::dial`] over `transport` (`udp` or `tcp`).
    pub(crate) fn dial_over(stack: &Stack, name: &str, user: &str, silence: u32, quit: u32, transport: &str) -> Self {
        Self::dial_as(stack, name, user, silence, quit, transport, "")
    }

    /// [`Phone::dial_over`] with more account parameters (`;auth_user=..;auth_pass=..`).
    pub(crate) fn dial_as(
        stack: &Stack,
        name: &str,
        user: &str,
        silence: u32,
        quit: u32,
        transport: &str,
        account: &str,
    ) -> Self {
        Self::dial_with(stack, name, user, silence, quit, transport, account, "")
    }

    /// [`Phone::dial`] with baresip's console listening on a UDP port ([`Phone::press`]
    /// types keys into the call through it).
    pub(crate) fn dial_with_keypad(stack: &Stack, name: &str, user: &str, silence: u32, quit: u32) -> (Self, u16) {
        let console = free_udp_tcp_ports(1);
        (Self::dial_with(stack, name, user, silence, quit, "udp", "", &console_config(console)), console)
    }

    /// A trunk's call with a keypad: a phone whose account is `caller` (the number it calls
    /// from) with `account`'s parameters (the trunk's digest credentials) dials `number` at
    /// the edge, plays its tone and 20 s of silence, and quits after 60 s; its console, for
    /// [`Phone::press`], on the port returned.
    pub(crate) fn dial_trunk_with_keypad(stack: &Stack, caller: &str, number: &str, account: &str) -> (Self, u16) {
        let console = free_udp_tcp_ports(1);
        let dial = format!("/dial sip:{number}@{};transport=udp", stack.sip);
        let config = console_config(console);
        let (phone, _) =
            Self::start(&stack.dir, &stack.tools, "caller", caller, 20, 60, "udp", account, &config, Some(&dial));
        (phone, console)
    }

    /// Presses `keys` on the phone in the call: baresip's `/sndcode` sends each as an RFC
    /// 4733 telephone event.
    pub(crate) fn press(console: u16, keys: &str) {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a socket");
        socket.send_to(format!("/sndcode {keys}\n").as_bytes(), ("127.0.0.1", console)).expect("send");
    }

    /// [`Phone::dial_as`] with more lines for baresip's config.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn dial_with(
        stack: &Stack,
        name: &str,
        user: &str,
        silence: u32,
        quit: u32,
        transport: &str,
        account: &str,
        more_config: &str,
    ) -> Self {
        let dial = format!("/dial sip:{user}@{};transport={transport}", stack.sip);
        Self::start(
            &stack.dir,
            &stack.tools,
            name,
            "caller",
            silence,
            quit,
            transport,
            account,
            more_config,
            Some(&dial),
        )
        .0
    }

    /// A phone that answers calls to `sip:<user>@127.0.0.1:<its port>` at once (it plays
    /// the same WAV as a caller and records what it hears); returns it with its port.
    pub(crate) fn answering(dir: &Path, tools: &Path, name: &str, user: &str, quit: u32) -> (Self, u16) {
        Self::start(dir, tools, name, user, 20, quit, "udp", ";answermode=auto", "", None)
    }

    /// [`Phone::dial`] with baresip's SIP trace on (`-s`): every SIP message it sends and
    /// receives is in its log, headers and all.
    pub(crate) fn dial_traced(stack: &Stack, name: &str, user: &str, silence: u32, quit: u32) -> Self {
        let dial = format!("/dial sip:{user}@{};transport=udp", stack.sip);
        let options = Options { trace: true, ..Options::default() };
        Self::start_with(&stack.dir, &stack.tools, name, "caller", silence, quit, "udp", "", "", Some(&dial), options).0
    }

    /// A baresip instance with account `<user>` and `more_config` lines in its config,
    /// running `command` at start.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        root: &Path,
        tools: &Path,
        name: &str,
        user: &str,
        silence: u32,
        quit: u32,
        transport: &str,
        account: &str,
        more_config: &str,
        command: Option<&str>,
    ) -> (Self, u16) {
        let options = Options::default();
        Self::start_with(root, tools, name, user, silence, quit, transport, account, more_config, command, options)
    }

    /// [`Phone::start`] with `options`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start_with(
        root: &Path,
        tools: &Path,
        name: &str,
        user: &str,
        silence: u32,
        quit: u32,
        transport: &str,
        account: &str,
        more_config: &str,
        command: Option<&str>,
        options: Options,
    ) -> (Self, u16) {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("snd")).expect("a folder");
        let sox = tools.join("sox");
        let codec = options.codec.unwrap_or("PCMU");
        let (rate, codec_modules) = codec_config(codec);
        let part = |file: &str, args: &[&str]| {
            let status = Command::new(&sox)
                .args(["-n", "-r", rate, "-c", "1", "-b", "16"])
                .arg(dir.join(file))
                .args(args)
                .status()
                .expect("sox runs");
            assert!(status.success(), "sox made {file}");
        };
        let lead = options.lead.map_or_else(|| "0.5".to_owned(), |s| s.to_string());
        part("lead.wav", &["trim", "0", &lead]);
        let (seconds, hz) = options.tone.unwrap_or((1.5, 500));
        if options.silent {
            part("tone.wav", &["trim", "0", &seconds.to_string()]);
        } else {
            part("tone.wav", &["synth", &seconds.to_string(), "sine", &hz.to_string(), "vol", "0.5"]);
        }
        part("tail.wav", &["trim", "0", &silence.to_string()]);
        let mut parts = vec![dir.join("lead.wav"), dir.join("tone.wav"), dir.join("tail.wav")];
        if let Some((hz, seconds)) = options.then {
            part("then.wav", &["synth", &seconds.to_string(), "sine", &hz.to_string(), "vol", "0.5"]);
            parts.push(dir.join("then.wav"));
            if let Some(after) = options.after {
                part("after.wav", &["trim", "0", &after.to_string()]);
                parts.push(dir.join("after.wav"));
            }
        }
        for (n, &(hz, seconds, quiet)) in options.more.iter().enumerate() {
            let (tone, rest) = (format!("more-{n}.wav"), format!("more-{n}-quiet.wav"));
            part(&tone, &["synth", &seconds.to_string(), "sine", &hz.to_string(), "vol", "0.5"]);
            part(&rest, &["trim", "0", &quiet.to_string()]);
            parts.extend([dir.join(tone), dir.join(rest)]);
        }
        let status = Command::new(&sox).args(&parts).arg(dir.join("say.wav")).status().expect("sox runs");
        assert!(status.success(), "sox joined the WAV");
        // baresip listens on a port and the next (TLS): both free. Picked again when some
        // other program took the port before baresip bound it (baresip exits saying so).
        for _ in 0..5 {
            let port = free_phone_port();
            let d = dir.display();
            // SRTP's module loads before the accounts that name it (mediaenc).
            let srtp = if options.srtp { "module srtp.so\n" } else { "" };
            let config = format!(
                "sip_listen 127.0.0.1:{port}\nmodule_path /usr/lib/baresip/modules\nmodule stdio.so\nmodule g711.so\n{codec_modules}{srtp}\
                 module aufile.so\nmodule sndfile.so\nmodule account.so\nmodule menu.so\n\
                 audio_source aufile,{d}/say.wav\naudio_player aufile,{d}/play.wav\naudio_alert aufile,{d}/say.wav\n\
                 snd_path {d}/snd\n{}{more_config}",
                rtp_ports()
            );
            std::fs::write(dir.join("config"), config).expect("config");
            let account =
                format!("<sip:{user}@127.0.0.1:{port};transport={transport}>;regint=0;audio_codecs={codec}{account}\n");
            std::fs::write(dir.join("accounts"), account).expect("accounts");
            let log = std::fs::File::create(dir.join("baresip.log")).expect("a log");
            let mut baresip = Command::new(tools.join("baresip"));
            baresip.arg("-f").arg(&dir);
            if let Some(command) = command {
                baresip.args(["-e", command]);
            }
            if options.trace {
                baresip.arg("-s");
            }
            let child = baresip
                .args(["-t", &quit.to_string()])
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("baresip starts");
            let mut phone = Self { dir: dir.clone(), child };
            if phone.ready() {
                return (phone, port);
            }
            eprintln!("baresip {name}: another program took port {port} before it bound it; picking another");
        }
        panic!("baresip {name}: its port was taken before it bound it five times")
    }

    /// Waits until baresip is ready (true), or has exited because a port it was told to
    /// listen on was taken (false). Panics when it exits for another reason, when a module
    /// could not bind its port (the console's: the test gave it), or after 30 s.
    fn ready(&mut self) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let log = self.log();
            if let Some((start, _)) = log.split_once("baresip is ready") {
                assert!(
                    !ports::address_in_use(start),
                    "baresip in {} could not bind a port its config names: another program took it after it \
                     was picked (a port collision, not the code under test):\n{log}",
                    self.dir.display()
                );
                return true;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = self.log();
                assert!(ports::address_in_use(&log), "baresip exited ({status}) before it was ready:\n{log}");
                return false;
            }
            assert!(std::time::Instant::now() < deadline, "baresip was not ready in 30 s:\n{log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// This caller's phone was referred to `person` (answering as `user`) and is in a call
    /// with it: the person's phone took the call within 10 s.
    pub(crate) fn put_through_to(&self, person: &Phone, user: &str, context: impl Fn() -> String) {
        wait_for(
            "the person's phone took the call",
            Duration::from_secs(10),
            || person.log().contains("Call established"),
            context,
        );
        let caller_log = self.log();
        assert!(
            caller_log.contains("menu: transferring call")
                && caller_log.contains(&format!("Call established: sip:{user}@")),
            "the caller's phone was referred and is in a call with the person: {caller_log}"
        );
    }

    /// Freezes the phone's process (SIGSTOP) or thaws it (SIGCONT): frozen, it sends no RTP
    /// and answers nothing, as a phone whose network went quiet; what reaches it meanwhile
    /// waits in its sockets and is read once it is thawed.
    pub(crate) fn freeze(&self, frozen: bool) {
        let signal = if frozen { "-STOP" } else { "-CONT" };
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status().expect("kill runs");
        assert!(status.success(), "kill {signal} the phone");
    }

    pub(crate) fn log(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(self.dir.join("baresip.log")).unwrap_or_default()).into_owned()
    }

    /// Waits for the call to be over (answered and hung up, or refused) within `limit`; its
    /// recordings are closed then.
    pub(crate) fn wait_over(&self, limit: Duration) {
        let over = || {
            let log = self.log();
            log.contains("terminated") || log.contains("session closed")
        };
        wait_for("the call is over", limit, over, || self.log());
        std::thread::sleep(Duration::from_millis(300));
    }

    /// How strongly the phone heard a tone of `hz` in each 250 ms of its recording (the
    /// tone's amplitude, 0..1 of full scale, by the Goertzel algorithm): a sine of another
    /// frequency — an agent's voice, another phone's tone — barely registers.
    pub(crate) fn heard_tone(&self, sox: &Path, hz: f64) -> Vec<f64> {
        let samples = self.samples(sox);
        samples
            .chunks_exact(2000)
            .map(|window| {
                let w = 2.0 * std::f64::consts::PI * hz / 8000.0;
                let (mut s1, mut s2) = (0.0f64, 0.0f64);
                for x in window {
                    let s0 = x + 2.0 * w.cos() * s1 - s2;
                    s2 = s1;
                    s1 = s0;
                }
                let power = s1 * s1 + s2 * s2 - 2.0 * w.cos() * s1 * s2;
                2.0 * power.max(0.0).sqrt() / window.len() as f64
            })
            .collect()
    }

    /// The samples of what the phone heard (its `-dec.wav`), -1..1.
    fn samples(&self, sox: &Path) -> Vec<f64> {
        let dec = self.recording();
        let raw = Command::new(sox)
            .arg(&dec)
            .args(["-t", "raw", "-e", "signed-integer", "-b", "16", "-c", "1", "-r", "8000", "-"])
            .output()
            .expect("sox converts");
        raw.stdout.chunks_exact(2).map(|b| f64::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0).collect()
    }

    /// Its recording of what it heard (`-dec.wav`) in its first call: a caller referred to a
    /// person has a second, named by a later start time (`dump-<time>-dec.wav`).
    fn recording(&self) -> PathBuf {
        std::fs::read_dir(self.dir.join("snd"))
            .expect("the recordings")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().ends_with("-dec.wav"))
            .min()
            .unwrap_or_else(|| panic!("baresip wrote no -dec.wav:\n{}", self.log()))
    }

    /// What the phone heard (its `-dec.wav`): its length in seconds (sox stat) and the RMS
    /// of each 250 ms of it (0..1 of full scale).
    pub(crate) fn heard(&self, sox: &Path) -> (f64, Vec<f64>) {
        let dec = self.recording();
        let stat = Command::new(sox).arg(&dec).args(["-n", "stat"]).output().expect("sox stat");
        let text = String::from_utf8_lossy(&stat.stderr);
        let length = text
            .lines()
            .find_map(|l| l.strip_prefix("Length (seconds):"))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("sox stat: {text}"));
        let samples = self.samples(sox);
        let windows = samples.chunks(2000).map(|w| (w.iter().map(|s| s * s).sum::<f64>() / w.len() as f64).sqrt());
        (length, windows.collect())
    }
}

/// baresip's config for a phone offering `codecs` (its `audio_codecs` names): the rate its
/// WAVs are made at, and the codec modules it loads beside g711. baresip's aufile plays a
/// WAV only at the codec's own rate: 16 kHz for G.722 (spandsp's codec, module g722), 48 kHz
/// for Opus (libopus, module opus: mono both ways, so it offers `opus/48000/2` with
/// `stereo=0;sprop-stereo=0` and names the codec `opus/48000/1`). One wideband codec a
/// phone: with two, the WAV's rate would fit only one of them.
pub(crate) fn codec_config(codecs: &str) -> (&'static str, String) {
    let mut modules = String::new();
    if codecs.contains("G722") {
        modules.push_str("module g722.so\n");
    }
    if codecs.contains("opus") {
        modules.push_str("module opus.so\nopus_stereo no\nopus_sprop_stereo no\n");
    }
    let rate = if codecs.contains("opus") {
        "48000"
    } else if codecs.contains("G722") {
        "16000"
    } else {
        "8000"
    };
    (rate, modules)
}

/// baresip's config lines for its console on UDP `port` ([`Phone::press`] types through it).
pub(crate) fn console_config(port: u16) -> String {
    format!("module cons.so\ncons_listen 127.0.0.1:{port}\n")
}

/// A port for a baresip: it and the next free over UDP and TCP.
pub(crate) fn free_phone_port() -> u16 {
    free_udp_tcp_ports(2)
}

/// baresip's `rtp_ports` line: it picks its RTP ports at random and retries a taken one;
/// above the kernel's ephemeral range it takes none that the tests hand out ([`ports`]).
fn rtp_ports() -> String {
    ports::above_ephemeral().map(|(low, high)| format!("rtp_ports {low}-{high}\n")).unwrap_or_default()
}
