#!/usr/bin/env python3
"""Writes the seed inputs of the .npy and .npz fuzzers into tests/fuzz/corpus/{npy,npz}/.

The seeds are valid files of every dtype the reader takes (and a few it must refuse), so the fuzzer
starts from deep inside the format instead of discovering the magic bytes first. The interesting
inputs a fuzzing run finds are merged next to them (scripts/fuzz.sh --update-corpus).
Needs numpy (Debian: python3-numpy). Run from anywhere: python3 tests/fuzz/make_corpus.py
"""
import io
import os
import struct
import zipfile
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def npy_bytes(a, version=None):
    f = io.BytesIO()
    if version is None:
        np.save(f, a)
    else:
        np.lib.format.write_array(f, a, version=version)
    return f.getvalue()


def raw_npy(header, data=b"", major=1):
    """A .npy with a literal header text (for inputs numpy would not write)."""
    text = header.encode("latin1")
    length = struct.pack("<H", len(text)) if major == 1 else struct.pack("<I", len(text))
    return b"\x93NUMPY" + bytes([major, 0]) + length + text + data


def npz_bytes(arrays, compressed):
    f = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(f, **arrays)
    return f.getvalue()


def zip64_npz(members):
    """A zip whose central directory uses ZIP64 (placeholders, extra fields, the ZIP64 end record and
    locator), as a writer does for archives over 4 GiB, with tiny members."""
    out = io.BytesIO()
    central = []
    for name, payload, deflate in members:
        data = zlib.compress(payload)[2:-4] if deflate else payload
        crc = zlib.crc32(payload)
        offset = out.tell()
        nm = name.encode()
        extra = struct.pack("<HHQQ", 1, 16, len(payload), len(data))
        out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 8 if deflate else 0, 0, 0, crc,
                              0xFFFFFFFF, 0xFFFFFFFF, len(nm), len(extra)))
        out.write(nm + extra + data)
        central.append((nm, crc, len(data), len(payload), offset, deflate))
    cd_start = out.tell()
    for nm, crc, csize, usize, offset, deflate in central:
        extra = struct.pack("<HHQQQ", 1, 24, usize, csize, offset)
        out.write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 8 if deflate else 0, 0, 0, crc,
                              0xFFFFFFFF, 0xFFFFFFFF, len(nm), len(extra), 0, 0, 0, 0, 0xFFFFFFFF))
        out.write(nm + extra)
    cd_size = out.tell() - cd_start
    zip64_end = out.tell()
    out.write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, len(central), len(central), cd_size, cd_start))
    out.write(struct.pack("<IIQI", 0x07064B50, 0, zip64_end, 1))
    out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0))
    return out.getvalue()


def main():
    rng = np.random.default_rng(20261122)
    npy_dir = os.path.join(HERE, "corpus", "npy")
    npz_dir = os.path.join(HERE, "corpus", "npz")
    os.makedirs(npy_dir, exist_ok=True)
    os.makedirs(npz_dir, exist_ok=True)

    f32 = rng.standard_normal((2, 3)).astype(np.float32)
    f16 = np.array([0.5, -2.0, np.inf, np.nan], dtype=np.float16)
    seeds = {
        "f32_2x3.npy": npy_bytes(f32),
        "f16_nan_inf.npy": npy_bytes(f16),
        "bool_2x2.npy": npy_bytes(np.array([[True, False], [False, True]])),
        "i32_3.npy": npy_bytes(np.array([1, -7, 2**31 - 1], dtype=np.int32)),
        "i64_scalar.npy": npy_bytes(np.array(-5, dtype=np.int64)),
        "f32_empty_0x5.npy": npy_bytes(np.zeros((0, 5), dtype=np.float32)),
        "f32_4d.npy": npy_bytes(rng.standard_normal((1, 2, 2, 3)).astype(np.float32)),
        "f32_v2.npy": npy_bytes(f32, version=(2, 0)),
        "f32_v3.npy": npy_bytes(f32, version=(3, 0)),
        "refused_fortran.npy": npy_bytes(np.asfortranarray(f32)),
        "refused_f64.npy": npy_bytes(np.arange(3, dtype=np.float64)),
        "refused_big_endian.npy": npy_bytes(np.arange(3, dtype=">f4")),
        "python2_long.npy": raw_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2L,), }\n", b"\1\0\0\0\2\0\0\0"),
        "structured_descr.npy": raw_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }\n", b"\0" * 4),
        # Regression, found by fuzz_npy in CI: a zero dimension after nonzero ones whose product overflows.
        "regression_zero_dim_overflow.npy": raw_npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (737, 551615, 80, 6, 80, 8000, 80, 0, 90000, 0, 3), }\n"),
    }
    for name, data in seeds.items():
        with open(os.path.join(npy_dir, name), "wb") as f:
            f.write(data)

    small = {"q": f32, "mask": np.array([[True, False]]), "lens": np.array([3, 1], dtype=np.int32)}
    empty = io.BytesIO()
    zipfile.ZipFile(empty, "w").close()
    commented = io.BytesIO()
    with zipfile.ZipFile(commented, "w") as z:
        z.comment = b"a comment after the directory"
        z.writestr("w.npy", npy_bytes(f16))
    zseeds = {
        "savez_stored.npz": npz_bytes(small, compressed=False),
        "savez_compressed.npz": npz_bytes({"in_proj_weight": rng.standard_normal((6, 2)).astype(np.float32),
                                           "out_proj.bias": np.zeros(2, dtype=np.float16)}, compressed=True),
        "zip64_central.npz": zip64_npz([("a.npy", npy_bytes(f32), False), ("b.npy", npy_bytes(f16), True)]),
        "empty.npz": empty.getvalue(),
        "comment.npz": commented.getvalue(),
    }
    for name, data in zseeds.items():
        with open(os.path.join(npz_dir, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
