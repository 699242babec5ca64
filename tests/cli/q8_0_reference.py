"""The reference's reading of --kv-dtype q8_0 (check_run.py's dense, paged and packed q8_0 cases):
K and V as the values their q8_0 blocks hold."""
import numpy as np


def q8_0_values(x):
    """What ggml's q8_0 blocks hold for float32 x (rows of a multiple of 32 along the last axis): per
    32 values d = f16(max|x| / 127), q = round(x / d) half away from zero, clamped to [-127, 127],
    value d * q. Written from the format's definition, not from vkattn's code."""
    blocks = np.asarray(x, np.float32).reshape(-1, 32)
    d = (np.abs(blocks).max(axis=1) / np.float32(127)).astype(np.float16).astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.abs(blocks.astype(np.float64)) / d
    q = np.where(d == 0, 0.0, np.sign(blocks) * np.minimum(np.floor(ratio + 0.5), 127.0))
    return (d * q).astype(np.float32).reshape(np.shape(x))
