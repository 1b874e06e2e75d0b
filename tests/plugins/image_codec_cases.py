"""Reference images for tests/plugins/image_codec_test.cpp.

Usage: image_codec_cases.py FOLDER

Writes one image file per case and, beside it, NAME.raw: the pixels the
decoder must give (row-major, channels interleaved in OpenCV's order: grey,
BGR or BGRA; 16-bit samples little-endian). Pillow reads or writes every
file (where Pillow cannot write a variant, the file is built here byte by
byte, and its pixels come from numpy, not from a decoder). cases.txt lists
'NAME FILE ROWS COLS CHANNELS BYTES_PER_SAMPLE EXACT', EXACT 0 for lossy
formats (the test allows a small difference there).
"""
import io
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(7)
lines = []


def case(name, ext, data, pixels, exact=True):
    """pixels: HxW or HxWxC array in the decoder's channel order."""
    (out / (name + ext)).write_bytes(data)
    pixels = np.ascontiguousarray(pixels)
    if pixels.dtype == np.uint16:
        pixels = pixels.astype("<u2")
    (out / (name + ".raw")).write_bytes(pixels.tobytes())
    rows, cols = pixels.shape[:2]
    channels = 1 if pixels.ndim == 2 else pixels.shape[2]
    lines.append(f"{name} {name + ext} {rows} {cols} {channels} {pixels.itemsize} {int(exact)}")


def saved(image, fmt, **params):
    buffer = io.BytesIO()
    image.save(buffer, fmt, **params)
    return buffer.getvalue()


def bgr(rgb):
    return rgb[..., [2, 1, 0]]


def bgra(rgba):
    return rgba[..., [2, 1, 0, 3]]


H, W = 13, 17  # odd sizes: row padding and partial bytes matter
gray = rng.integers(0, 256, (H, W), dtype=np.uint8)
rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
rgba = rng.integers(0, 256, (H, W, 4), dtype=np.uint8)
gray16 = rng.integers(0, 65536, (H, W), dtype=np.uint16)
bits = rng.integers(0, 2, (H, W), dtype=np.uint8).astype(bool)

# --- PNG -------------------------------------------------------------------
case("png_gray8", ".png", saved(Image.fromarray(gray, "L"), "PNG"), gray)
case("png_gray16", ".png", saved(Image.fromarray(gray16), "PNG"), gray16)
case("png_gray1", ".png", saved(Image.fromarray(bits), "PNG"), np.where(bits, 255, 0).astype(np.uint8))
case("png_rgb", ".png", saved(Image.fromarray(rgb, "RGB"), "PNG"), bgr(rgb))
case("png_rgba", ".png", saved(Image.fromarray(rgba, "RGBA"), "PNG"), bgra(rgba))
la = np.stack([gray, rgba[..., 3]], axis=2)
case("png_gray_alpha", ".png", saved(Image.fromarray(la, "LA"), "PNG"),
     np.stack([gray, gray, gray, rgba[..., 3]], axis=2))  # OpenCV: grey+alpha decodes as BGRA
# A grey PNG with a transparent level stays grey (its tRNS is dropped).
case("png_gray_trns", ".png", saved(Image.fromarray(gray, "L"), "PNG", transparency=int(gray[0, 0])), gray)
palette = rng.integers(0, 256, (16, 3), dtype=np.uint8)
index = rng.integers(0, 16, (H, W), dtype=np.uint8)
p = Image.fromarray(index, "P")
p.putpalette(palette.flatten().tolist())
case("png_palette", ".png", saved(p, "PNG"), bgr(palette[index]))
alpha = np.where(index == 3, 0, 255).astype(np.uint8)
case("png_palette_trns", ".png", saved(p, "PNG", transparency=3),
     np.concatenate([bgr(palette[index]), alpha[..., None]], axis=2))
key = tuple(int(v) for v in rgb[1, 1])
rgb_alpha = np.where((rgb == key).all(axis=2), 0, 255).astype(np.uint8)
case("png_rgb_trns", ".png", saved(Image.fromarray(rgb, "RGB"), "PNG", transparency=key),
     np.concatenate([bgr(rgb), rgb_alpha[..., None]], axis=2))


def png_chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_by_hand(samples, color_type, depth):
    """A PNG Pillow cannot write (16-bit colour), filter 0 on every row."""
    h, w = samples.shape[:2]
    raw = b"".join(b"\0" + samples[r].astype(">u2" if depth == 16 else "u1").tobytes() for r in range(h))
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 0))
            + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b""))


rgb16 = rng.integers(0, 65536, (H, W, 3), dtype=np.uint16)
rgba16 = rng.integers(0, 65536, (H, W, 4), dtype=np.uint16)
case("png_rgb16", ".png", png_by_hand(rgb16, 2, 16), bgr(rgb16))
case("png_rgba16", ".png", png_by_hand(rgba16, 6, 16), bgra(rgba16))

# --- BMP -------------------------------------------------------------------
case("bmp_gray8", ".bmp", saved(Image.fromarray(gray, "L"), "BMP"), gray)  # grey palette: one channel
case("bmp_rgb24", ".bmp", saved(Image.fromarray(rgb, "RGB"), "BMP"), bgr(rgb))
case("bmp_palette8", ".bmp", saved(p, "BMP"), bgr(palette[index]))
case("bmp_1bit", ".bmp", saved(Image.fromarray(bits), "BMP"), np.where(bits, 255, 0).astype(np.uint8))


def bmp_by_hand(h, w, bpp, rows, compression=0, palette_bgrx=b"", masks=b"", top_down=False, header=40):
    """rows: the pixel bytes of each stored row, unpadded, in file order."""
    stride = (w * bpp + 31) // 32 * 4
    pixels = b"".join(r + b"\0" * (stride - len(r)) for r in rows)
    extra = masks if header == 40 else b""
    info = struct.pack("<IiiHHIIiiII", header, w, -h if top_down else h, 1, bpp, compression, len(pixels), 2835, 2835,
                       len(palette_bgrx) // 4, 0)
    if header > 40:
        info += masks.ljust(header - 40, b"\0")
    offset = 14 + len(info) + len(extra) + len(palette_bgrx)
    return b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset) + info + extra + palette_bgrx + pixels


# 4-bit colour palette, bottom-up (the usual order): rows stored last first.
pal_bgrx = b"".join(bytes([b, g, r, 0]) for r, g, b in palette)
nibbles = [bytes((index[r, c] << 4) | (index[r, c + 1] if c + 1 < W else 0) for c in range(0, W, 2)) for r in range(H)]
case("bmp_4bit_bottom_up", ".bmp", bmp_by_hand(H, W, 4, nibbles[::-1], palette_bgrx=pal_bgrx), bgr(palette[index]))
# 8-bit colour palette, top-down (negative height).
case("bmp_8bit_top_down", ".bmp",
     bmp_by_hand(H, W, 8, [index[r].tobytes() for r in range(H)], palette_bgrx=pal_bgrx, top_down=True),
     bgr(palette[index]))
# 32-bit BI_RGB: the fourth byte is padding, the image has three channels.
case("bmp_32_rgb", ".bmp", bmp_by_hand(H, W, 32, [bgra(rgba)[r].tobytes() for r in range(H)][::-1]), bgr(rgba[..., :3]))
# 32-bit BI_BITFIELDS with an alpha mask (a V4 header, as image editors write): BGRA.
masks = struct.pack("<IIII", 0x00FF0000, 0x0000FF00, 0x000000FF, 0xFF000000)
case("bmp_32_bitfields_alpha", ".bmp",
     bmp_by_hand(H, W, 32, [bgra(rgba)[r].tobytes() for r in range(H)][::-1], compression=3, masks=masks, header=108),
     bgra(rgba))
# 16-bit BI_BITFIELDS 5-6-5 after a plain BITMAPINFOHEADER; 5 and 6 bits widen to 8 by a shift (as OpenCV did).
r5, g6, b5 = rng.integers(0, 32, (H, W)), rng.integers(0, 64, (H, W)), rng.integers(0, 32, (H, W))
word = (r5 << 11) | (g6 << 5) | b5
widen = lambda v, top: (v << (8 - top.bit_length())).astype(np.uint8)
case("bmp_16_565", ".bmp",
     bmp_by_hand(H, W, 16, [word[r].astype("<u2").tobytes() for r in range(H)][::-1], compression=3,
                 masks=struct.pack("<III", 0xF800, 0x07E0, 0x001F)),
     np.stack([widen(b5, 31), widen(g6, 63), widen(r5, 31)], axis=2))

# --- PNM -------------------------------------------------------------------
case("pgm_p5", ".pgm", saved(Image.fromarray(gray, "L"), "PPM"), gray)
case("ppm_p6", ".ppm", saved(Image.fromarray(rgb, "RGB"), "PPM"), bgr(rgb))
case("pgm_p5_16", ".pgm", b"P5\n# 16-bit\n%d %d\n65535\n" % (W, H) + gray16.astype(">u2").tobytes(), gray16)
case("ppm_p6_16", ".ppm", b"P6 %d %d 65535 " % (W, H) + rgb16.astype(">u2").tobytes(), bgr(rgb16))
case("pgm_p2", ".pgm",
     b"P2\n%d %d\n255\n" % (W, H) + b"\n".join(b" ".join(b"%d" % v for v in row) for row in gray) + b"\n", gray)
case("ppm_p3", ".ppm",
     b"P3 %d %d 255\n" % (W, H) + b"\n".join(b" ".join(b"%d" % v for v in row.flatten()) for row in rgb) + b"\n", bgr(rgb))
case("pbm_p4", ".pbm", saved(Image.fromarray(bits), "PPM"), np.where(bits, 255, 0).astype(np.uint8))
case("pbm_p1", ".pbm",
     b"P1\n%d %d\n" % (W, H) + b"\n".join(b" ".join(b"0" if v else b"1" for v in row) for row in bits),
     np.where(bits, 255, 0).astype(np.uint8))

# --- TIFF --------------------------------------------------------------------
for compression in ("raw", "tiff_lzw", "tiff_adobe_deflate", "packbits"):
    case(f"tiff_rgb_{compression}", ".tif", saved(Image.fromarray(rgb, "RGB"), "TIFF", compression=compression),
         bgr(rgb))
case("tiff_gray", ".tif", saved(Image.fromarray(gray, "L"), "TIFF"), gray)
# Unassociated alpha: libtiff's RGBA interface premultiplies the colour (OpenCV's decode did the same).
premultiplied = np.concatenate([(rgba[..., :3].astype(int) * rgba[..., 3:] + 127) // 255, rgba[..., 3:]], axis=2)
case("tiff_rgba", ".tif", saved(Image.fromarray(rgba, "RGBA"), "TIFF", compression="tiff_lzw"),
     bgra(premultiplied.astype(np.uint8)))
case("tiff_palette", ".tif", saved(p, "TIFF"), bgr(palette[index]))
# 16-bit grey and colour keep their 16 bits.
case("tiff_gray16", ".tif", saved(Image.fromarray(gray16), "TIFF"), gray16)

# --- WebP ------------------------------------------------------------------
case("webp_lossless", ".webp", saved(Image.fromarray(rgb, "RGB"), "WEBP", lossless=True), bgr(rgb))
case("webp_lossless_alpha", ".webp", saved(Image.fromarray(rgba, "RGBA"), "WEBP", lossless=True, exact=True),
     bgra(rgba))
smooth = np.stack(np.meshgrid(np.arange(W) * 15, np.arange(H) * 19), axis=2)
smooth = np.concatenate([smooth, smooth[..., :1] // 2], axis=2).astype(np.uint8)
lossy = saved(Image.fromarray(smooth, "RGB"), "WEBP", quality=90)
case("webp_lossy", ".webp", lossy, bgr(np.asarray(Image.open(io.BytesIO(lossy)).convert("RGB"))), exact=False)

# --- JPEG (the same libjpeg on both sides; compared within a level) ----------
for name, image in (("jpeg_rgb", Image.fromarray(smooth, "RGB")), ("jpeg_gray", Image.fromarray(smooth[..., 0], "L"))):
    data = saved(image, "JPEG", quality=92)
    decoded = np.asarray(Image.open(io.BytesIO(data)))
    case(name, ".jpg", data, bgr(decoded) if decoded.ndim == 3 else decoded, exact=False)

(out / "cases.txt").write_text("\n".join(lines) + "\n")
