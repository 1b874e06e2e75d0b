#!/usr/bin/python3
"""Writes the damaged-record corpus: one LMDB value per .bin file, each broken
in one way (format in docs/lmdb-format.md), and expected.txt, the part of the
error each must give. Rerun after changing a case:
    /usr/bin/python3 tests/bad_inputs/records/make_corpus.py
"""
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def image(encoding=0, rows=28, cols=28, channels=1, data=None, size=None):
    data = bytes(rows * cols * channels) if data is None else data
    size = len(data) if size is None else size
    return struct.pack("<BIIBI", encoding, rows, cols, channels, size) + data


def png(rows, cols):
    """A valid 8-bit grayscale PNG of rows x cols zeros."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    pixels = b"".join(b"\x00" + bytes(cols) for _ in range(rows))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", cols, rows, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(pixels)) + chunk(b"IEND", b""))


def record(images=None, labels=None, magic=b"TYRC", version=1, ident=b"case"):
    images = [image()] if images is None else images
    labels = [struct.pack("<Bq", 0, 3)] if labels is None else labels
    return (magic + bytes([version, len(images)]) + b"".join(images) + bytes([len(labels)]) + b"".join(labels) +
            struct.pack("<H", len(ident)) + ident)


CASES = {
    "bad_magic": (record(magic=b"TYRX"), "not a trainyard record (bad magic)"),
    "newer_version": (record(version=3), "record format version 3, this reader knows 1 and 2"),
    "boxes_in_version_1": (record(labels=[struct.pack("<BI7f", 2, 7, 1, 1, 5, 5, 0, 0, 16)]),
                           "a boxes label (kind 2) in a version-1 record"),
    # A version-2 record of boxes in a database of classes (its metadata says version 1).
    "boxes_among_classes": (record(version=2, labels=[struct.pack("<BI7f", 2, 7, 1, 1, 5, 5, 0, 0, 16)]),
                            "a boxes label in a database without boxes"),
    "header_only": (b"TYRC\x01", "truncated record: no room for"),
    "image_past_the_end": (record(images=[image(data=bytes(100), size=784)]), "truncated record"),
    "raw_size_mismatch": (record(images=[image(data=bytes(700))]), "raw image of 28x28x1"),
    "unknown_encoding": (record(images=[image(encoding=7)]), "unknown image encoding 7"),
    "undecodable_png": (record(images=[image(encoding=1, data=b"definitely not a png")]), "not an image trainyard decodes"),
    "unknown_label_kind": (record(labels=[struct.pack("<Bq", 5, 3)]), "unknown label kind 5"),
    "huge_label_vector": (record(labels=[struct.pack("<BI", 1, 1_000_000_000)]), "a label of 1000000000 values"),
    "trailing_bytes": (record() + b"xx", "2 unexpected bytes after the record"),
    "no_image": (record(images=[]), "no input image"),
    "no_label": (record(labels=[]), "neither a label nor a target image"),
    "zero_rows": (record(images=[image(rows=0, data=b"")]), "image of 0x28x1: expected at least 1x1x1"),
    "huge_side": (record(images=[image(encoding=1, rows=100000, cols=100000, data=png(28, 28))]),
                  "expected at most 16384 pixels per side"),
    "five_channels": (record(images=[image(channels=5)]), "1 to 4 channels"),
    "png_size_lies": (record(images=[image(encoding=1, rows=32, cols=32, data=png(28, 28))]),
                      "decodes to 28x28, the record says 32x32"),
}

if __name__ == "__main__":
    lines = []
    for name, (value, expected) in sorted(CASES.items()):
        with open(os.path.join(HERE, name + ".bin"), "wb") as f:
            f.write(value)
        lines.append(name + ": " + expected)
    with open(os.path.join(HERE, "expected.txt"), "w") as f:
        f.write("# CASE: text the error line must contain (written by make_corpus.py)\n" + "\n".join(lines) + "\n")
