#!/usr/bin/env python3
"""Reads TensorBoard event files without trainyard's code: TFRecord frames
checked with this file's own CRC-32C, Event messages decoded by protobuf
classes that protoc generates from tensorboard_event.proto.

usage: read_tensorboard.py PROTO_DIR WORK_DIR EVENT_FILE...
Prints one JSON list of records; exits 3 on a CRC mismatch or a short frame."""
import json
import os
import struct
import subprocess
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def main():
    proto_dir, work_dir, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(work_dir, exist_ok=True)
    subprocess.run(["protoc", "-I", proto_dir, "--python_out", work_dir,
                    os.path.join(proto_dir, "tensorboard_event.proto")], check=True)
    sys.path.insert(0, work_dir)
    import tensorboard_event_pb2 as pb

    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    records = []
    for path in files:
        data = open(path, "rb").read()
        at = 0
        while at < len(data):
            if at + 12 > len(data):
                print("short frame header at byte %d of %s" % (at, path), file=sys.stderr)
                sys.exit(3)
            header = data[at:at + 8]
            (length,) = struct.unpack("<Q", header)
            (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
            if masked(header) != length_crc:
                print("length CRC mismatch at byte %d of %s" % (at, path), file=sys.stderr)
                sys.exit(3)
            payload = data[at + 12:at + 12 + length]
            (payload_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
            if len(payload) != length or masked(payload) != payload_crc:
                print("payload CRC mismatch at byte %d of %s" % (at, path), file=sys.stderr)
                sys.exit(3)
            event = pb.Event()
            event.ParseFromString(payload)
            records.append({
                "wall_time": event.wall_time,
                "step": event.step,
                "file_version": event.file_version,
                "values": {v.tag: v.simple_value for v in event.summary.value},
            })
            at += 16 + length
    print(json.dumps(records))


main()
