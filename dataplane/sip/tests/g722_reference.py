"""Independent G.722 implementations for dataplane/sip/tests/g722_interop.rs.

Usage: python g722_reference.py IMPL OP < in > out
  IMPL: ffmpeg (libavcodec's g722, through PyAV) or spandsp (libspandsp, as Debian's
        baresip uses it, through ctypes)
  OP:   encode (16 kHz PCM16 little-endian in, G.722 at 64 kbit/s out)
        decode (G.722 in, 16 kHz PCM16 little-endian out)
Run by the interpreter of the aiortc virtualenv tests/tools/install.sh makes (PyAV brings
FFmpeg's libraries); libspandsp.so.2 comes with Debian's baresip-core.
"""

import ctypes
import sys


def spandsp(op, data):
    lib = ctypes.CDLL("libspandsp.so.2")
    lib.g722_encode_init.restype = ctypes.c_void_p
    lib.g722_decode_init.restype = ctypes.c_void_p
    lib.g722_encode.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    lib.g722_decode.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    if op == "encode":
        state = lib.g722_encode_init(None, 64000, 0)
        samples = len(data) // 2
        out = ctypes.create_string_buffer(samples // 2 + 1)
        n = lib.g722_encode(state, out, data, samples)
        return out.raw[:n]
    state = lib.g722_decode_init(None, 64000, 0)
    out = ctypes.create_string_buffer(len(data) * 4)
    n = lib.g722_decode(state, out, data, len(data))
    return out.raw[: n * 2]


def ffmpeg(op, data):
    import av

    if op == "encode":
        context = av.CodecContext.create("g722", "w")
        context.sample_rate = 16000
        context.layout = "mono"
        context.format = "s16"
        out = bytearray()
        step = 640  # 20 ms
        for start in range(0, len(data) - len(data) % step, step):
            frame = av.AudioFrame(format="s16", layout="mono", samples=step // 2)
            frame.planes[0].update(data[start : start + step])
            frame.sample_rate = 16000
            for packet in context.encode(frame):
                out += bytes(packet)
        for packet in context.encode(None):
            out += bytes(packet)
        return bytes(out)
    context = av.CodecContext.create("g722", "r")
    context.sample_rate = 16000
    context.layout = "mono"
    out = bytearray()
    for start in range(0, len(data), 160):
        for frame in context.decode(av.Packet(data[start : start + 160])):
            out += bytes(frame.planes[0])[: frame.samples * 2]
    return bytes(out)


def main():
    impl, op = sys.argv[1], sys.argv[2]
    data = sys.stdin.buffer.read()
    out = {"ffmpeg": ffmpeg, "spandsp": spandsp}[impl](op, data)
    sys.stdout.buffer.write(out)


if __name__ == "__main__":
    main()
