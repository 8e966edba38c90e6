#!/usr/bin/env python3
"""Where the time from the end of speech to the first reply audio goes on a WebRTC call.

Reads the `webrtc` benchmark's BENCH_TRACE lines (its stdout) and the gateway's
`switchboard_webrtc::latency` trace (its stderr) of a one-call run, sets them side by side by
their timestamps (both the machine's clock) and prints each turn's steps and their medians
(BENCHMARKS.md, `webrtc`). One call only: the lines of several would interleave.

    cd dataplane && SWITCHBOARD_VOICE_AUDIO_CHUNK_MS=0 BENCH_TRACE=1 \
      BENCH_GATEWAY_LOG=warn,switchboard_webrtc::latency=trace BENCH_CALLS=1 BENCH_TURNS=20 \
      BENCH_ROUNDS=1 cargo bench --profile release -p switchboard-dataplane --bench webrtc \
      > out.txt 2> err.txt
    python3 benchmarks/webrtc_latency.py dataplane/out.txt dataplane/err.txt
"""
import re, sys, datetime, statistics
out, err = open(sys.argv[1]).read(), open(sys.argv[2]).read()
ev = []
for m in re.finditer(r"^trace (\d+) call (\d+) turn (\d+) (end of speech|first reply audio)(.*)$", out, re.M):
    ev.append((int(m.group(1)), "client " + m.group(4), m.group(5)))
ansi = re.compile(r"\x1b\[[0-9;]*m")
for line in err.splitlines():
    line = ansi.sub("", line)
    m = re.match(r"^(\S+Z)\s+TRACE.*?switchboard_webrtc::latency: (.*)$", line)
    if not m:
        continue
    stamp = m.group(1)
    t = datetime.datetime.strptime(stamp[:26] + "Z" if len(stamp) > 27 else stamp, "%Y-%m-%dT%H:%M:%S.%fZ")
    us = int((t - datetime.datetime(1970, 1, 1)).total_seconds() * 1e6)
    ev.append((us, m.group(2), ""))
ev.sort()
rows = []
for i, (t0, what, _) in enumerate(ev):
    if what != "client end of speech":
        continue
    after = ev[i + 1:]
    decoded = [e for e in after if "caller audio decoded" in e[1]]
    reply = next((e for e in after if "reply audio from the session" in e[1]), None)
    frame = next((e for e in after if "reply frame to str0m" in e[1]), None)
    first = next((e for e in after if e[1] == "client first reply audio"), None)
    if not (decoded and reply and frame and first):
        continue
    before_reply = [e for e in decoded if e[0] <= reply[0]]
    trigger = before_reply[-1]
    rows.append(dict(
        packets_after=len(before_reply) - 1,
        to_decoded=(decoded[0][0] - t0) / 1000,
        trigger_after=(trigger[0] - t0) / 1000,
        runtime=(reply[0] - trigger[0]) / 1000,
        encode=(frame[0] - reply[0]) / 1000,
        to_client=(first[0] - frame[0]) / 1000,
        total=(first[0] - t0) / 1000,
        released=first[2].strip(),
        rms=[re.search(r"rms=(\d+)", e[1]).group(1) for e in decoded[:3]],
    ))
for r in rows:
    print(r)
if rows:
    for k in ["to_decoded", "trigger_after", "runtime", "encode", "to_client", "total"]:
        v = [r[k] for r in rows]
        print(f"{k:>14}: median {statistics.median(v):7.2f} ms  min {min(v):7.2f}  max {max(v):7.2f}")
    print("turns whose reply followed a later packet than the one that ended the speech:",
          sum(1 for r in rows if r["packets_after"] > 0), "of", len(rows))
