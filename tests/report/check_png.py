#!/usr/bin/env python3
"""tests/report/check_png.py — checks that a screenshot is a real picture, not a blank page: the file is
big enough, has many distinct colours, and shows each given colour (the chart series) on enough
pixels. A small PNG decoder on zlib (8-bit RGB/RGBA, non-interlaced: what Chromium writes), so no
imaging library is needed.
Usage: check_png.py FILE.png [--min-bytes N] [--min-colors N] [--color '#1f77b4' ...]"""
import argparse
import struct
import sys
import zlib


def decode(path):
    """(width, height, channels, rows of bytes) of an 8-bit, non-interlaced RGB or RGBA PNG."""
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG file")
    position, compressed, header = 8, b"", None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed += body
        elif kind == b"IEND":
            break
    width, height, depth, color_type, _, _, interlace = header
    if depth != 8 or color_type not in (2, 6) or interlace:
        raise ValueError(f"{path}: unsupported PNG (bit depth {depth}, colour type {color_type}, interlace {interlace})")
    channels = 3 if color_type == 2 else 4
    raw = zlib.decompress(compressed)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            up_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else up_left)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("png")
    parser.add_argument("--min-bytes", type=int, default=20000)
    parser.add_argument("--min-colors", type=int, default=50)
    parser.add_argument("--color", action="append", default=[], help="#rrggbb that must cover --min-pixels pixels")
    parser.add_argument("--min-pixels", type=int, default=40)
    args = parser.parse_args()
    size = len(open(args.png, "rb").read())
    if size < args.min_bytes:
        sys.exit(f"FAIL: {args.png} has {size} bytes, fewer than {args.min_bytes}: the page did not render")
    width, height, channels, rows = decode(args.png)
    counts = {}
    for row in rows:
        for x in range(0, width * channels, channels):
            pixel = row[x:x + 3]
            counts[pixel] = counts.get(pixel, 0) + 1
    if len(counts) < args.min_colors:
        sys.exit(f"FAIL: {args.png} has {len(counts)} distinct colours, fewer than {args.min_colors}")
    for color in args.color:
        target = bytes.fromhex(color.lstrip("#"))
        near = sum(n for pixel, n in counts.items() if max(abs(a - b) for a, b in zip(pixel, target)) <= 8)
        if near < args.min_pixels:
            sys.exit(f"FAIL: {args.png} shows colour {color} on {near} pixels, fewer than {args.min_pixels}")
        print(f"check_png: {color} on {near} pixels")
    print(f"check_png: {args.png} {width}x{height}, {size} bytes, {len(counts)} distinct colours")


if __name__ == "__main__":
    main()
