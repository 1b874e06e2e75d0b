"""Rewrites where a LibTorch archive says its tensors live, as a checkpoint
written by a GPU rank says it: every storage's location 'cpu' becomes the
given device (e.g. cuda:0). The bytes of the tensors are unchanged.

usage: relocate_checkpoint.py IN.pt OUT.pt DEVICE

The archive is a zip of pickles (data.pkl, constants.pkl) whose persistent
ids name each storage as ('storage', type, key, location, numel); the
location is a BINUNICODE string. Only those strings are re-encoded, op by op,
so everything else stays byte for byte (memo indices do not depend on
offsets in protocol 2).
"""
import pickletools
import struct
import sys
import zipfile


def relocate(pickle_bytes, device):
    out = bytearray()
    ops = list(pickletools.genops(pickle_bytes))
    changed = 0
    for i, (op, arg, pos) in enumerate(ops):
        end = ops[i + 1][2] if i + 1 < len(ops) else len(pickle_bytes)
        if op.name == "BINUNICODE" and arg == "cpu":
            data = device.encode()
            out += b"X" + struct.pack("<I", len(data)) + data
            changed += 1
        elif op.name == "SHORT_BINUNICODE" and arg == "cpu":
            data = device.encode()
            out += b"\x8c" + bytes([len(data)]) + data
            changed += 1
        else:
            out += pickle_bytes[pos:end]
    return bytes(out), changed


def main():
    source, target, device = sys.argv[1:4]
    total = 0
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith(".pkl"):
                data, changed = relocate(data, device)
                total += changed
            zout.writestr(info, data)
    if total == 0:
        sys.exit("relocate_checkpoint: no storage location 'cpu' found in " + source)
    print(f"relocated {total} storages to {device}")


if __name__ == "__main__":
    main()
