#!/usr/bin/python3
"""Writes the seed shards of the fuzz_shard target (tests/fuzz/fuzz_shard.cpp)
into corpus/shard/: a valid WebDataset tar, and tars broken in the ways the
issue-37 campaign found (a base-256 size that wraps, sizes past the end, a
non-octal size, duplicate members, a JPEG header claiming 65500x65500
pixels, metadata members, pax and GNU long names, a truncated header).
Uses only the standard library (the JPEG is a hand-made 8x8 baseline file
header plus data from a fixed byte string). Rerun after changing a case:
    /usr/bin/python3 tests/fuzz/corpus/make_shard_seeds.py
"""
import io
import os
import struct
import tarfile
import zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shard")


def png(width, height):
    """A gray PNG of the given size (real, decodable)."""
    raw = b"".join(b"\0" + bytes((x * 16 + y) % 256 for x in range(width)) for y in range(height))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


# A real 8x8 gray baseline JPEG (written once by Pillow, kept as bytes so
# that this script needs only the standard library).
SMALL_JPEG = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb0043000302020302020303030304030304050805050404050a070706080c0a0c"
    "0c0b0a0b0b0d0e12100d0e110e0b0b1016101113141515150c0f171816141812141514ffc0000b080008000801011100ffc4001f0000"
    "010501010101010100000000000000000102030405060708090a0bffc400b5100002010303020403050504040000017d010203000411"
    "05122131410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a434445"
    "464748494a535455565758595a636465666768696a737475767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8a9"
    "aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffda00080101"
    "00003f008bfe09eff0ff00fe41bfbbfeef6affd9")


def jpeg_claiming(width, height):
    """SMALL_JPEG with its frame header (SOF0) saying width x height: a
    decoder that trusts it allocates width x height before reading a scan."""
    b = bytearray(SMALL_JPEG)
    sof = b.index(b"\xff\xc0")
    b[sof + 5:sof + 9] = struct.pack(">HH", height, width)
    return bytes(b)


def tar(members, fmt=tarfile.USTAR_FORMAT):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            t.addfile(info, io.BytesIO(data))
    return out.getvalue()


def set_size_field(shard, header_at, field):
    """Overwrites the 12-byte size field of the header at `header_at` and fixes its checksum."""
    b = bytearray(shard)
    b[header_at + 124:header_at + 136] = field
    b[header_at + 148:header_at + 156] = b" " * 8
    b[header_at + 148:header_at + 156] = b"%06o\0 " % sum(b[header_at:header_at + 512])
    return bytes(b)


def main():
    os.makedirs(OUT, exist_ok=True)
    good = [("a/s0.png", png(8, 8)), ("a/s0.cls", b"1"), ("a/s1.png", png(8, 8)), ("a/s1.cls", b"2")]
    cases = {
        "valid.tar": tar(good),
        "json_label_and_metadata.tar": tar([("s0.png", png(8, 8)), ("s0.cls", b"3"), ("s0.json", b'{"caption": "x"}'),
                                           ("__meta__.json", b'{"n": 1}'), ("s1.png", png(8, 8)),
                                           ("s1.json", b'{"label": 2}')]),
        "pax_long_name.tar": tar([("p/" + "x" * 150 + ".png", png(8, 8)), ("p/" + "x" * 150 + ".cls", b"0")],
                                 tarfile.PAX_FORMAT),
        "gnu_long_name.tar": tar([("g/" + "y" * 150 + ".png", png(8, 8)), ("g/" + "y" * 150 + ".cls", b"0")],
                                 tarfile.GNU_FORMAT),
        "duplicate_member.tar": tar([("d/s0.png", png(8, 8)), ("d/s0.cls", b"1"), ("d/s0.cls", b"3")]),
        "pixel_bomb.tar": tar([("b/s0.jpg", jpeg_claiming(65500, 65500)), ("b/s0.cls", b"1")] + good),
        "undecodable_image.tar": tar([("u/s0.png", b"\x89PNG\r\n\x1a\nnot really"), ("u/s0.cls", b"1")] + good),
        "bad_label.tar": tar([("l/s0.png", png(8, 8)), ("l/s0.cls", b"seven")] + good),
        "valid_jpeg.tar": tar([("j/s0.jpg", SMALL_JPEG), ("j/s0.cls", b"4")]),
        "truncated_header.tar": tar(good)[:512 * 4 + 100],
    }
    base = tar(good)
    # base-256: high bit set, a value that wraps 64 bits when shifted in
    cases["base256_wraps.tar"] = set_size_field(base, 0, b"\x80" + b"\xff" * 11)
    cases["base256_negative.tar"] = set_size_field(base, 0, b"\xff" * 12)
    cases["size_past_the_end.tar"] = set_size_field(base, 0, b"%011o\0" % (1 << 30))
    cases["size_not_octal.tar"] = set_size_field(base, 0, b"0000000009z\0")
    for name, data in sorted(cases.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        print(name, len(data))


if __name__ == "__main__":
    main()
