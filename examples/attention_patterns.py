#!/usr/bin/env python3
"""Draws the attention patterns of 8 heads with `vkattn run --heatmap` (the picture in docs/command-line.md).

The inputs are built so that each head has a pattern one meets in trained transformers: queries and
keys are sinusoidal position encodings, and a head that shifts its queries by `o` positions attends
`o` tokens back (o = 0, 3, 8, 16 here; o = 1 is the "previous-token" head of trained models); a sink head attends mostly to the first token;
a broad head spreads over a local window; a content head attends to the tokens sharing the query's
token id. Causal (top-left), 48 tokens, f32.

    /usr/bin/python3 examples/attention_patterns.py --vkattn build/release/tools/vkattn --out docs/attention_heads.png
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

TOKENS, DIM = 48, 64


def positions(offset=0):
    """(TOKENS, DIM) sinusoidal encodings of positions i - offset."""
    i = np.arange(TOKENS)[:, None] - offset
    freq = 1.0 / (10000.0 ** (np.arange(DIM // 2) / (DIM // 2)))[None, :] * 8.0
    return np.concatenate([np.sin(i * freq), np.cos(i * freq)], axis=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vkattn", default="build/release/tools/vkattn")
    parser.add_argument("--out", default="docs/attention_heads.png")
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    token_ids = rng.integers(0, 6, TOKENS)
    content = rng.standard_normal((6, DIM))
    content /= np.linalg.norm(content, axis=1, keepdims=True)

    pos = positions()
    q_heads, k_heads = [], []
    for offset in (0, 3, 8, 16):  # diagonal heads: attend to the token `offset` back
        q_heads.append(positions(offset) * 0.5)
        k_heads.append(pos * 0.5)
    sink_k = pos * 0.1
    sink_k[0] += 6.0  # the first key stands out for every query
    q_heads.append(np.ones((TOKENS, DIM)) * 0.25)
    k_heads.append(sink_k / np.sqrt(DIM) * 4)
    q_heads.append(pos * 0.25)  # broad, local
    k_heads.append(pos * 0.25)
    q_heads.append(content[token_ids] * 3.0)  # same token id
    k_heads.append(content[token_ids] * 3.0)
    q_heads.append(rng.standard_normal((TOKENS, DIM)) * 0.15)  # near uniform
    k_heads.append(rng.standard_normal((TOKENS, DIM)) * 0.15)

    q = np.stack(q_heads)[None].astype(np.float32)  # (1, 8, TOKENS, DIM)
    k = np.stack(k_heads)[None].astype(np.float32)
    v = rng.standard_normal(k.shape).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        for name, x in (("q", q), ("k", k), ("v", v)):
            np.save(os.path.join(tmp, name + ".npy"), x)
        cmd = [args.vkattn, "run", "--q", os.path.join(tmp, "q.npy"), "--k", os.path.join(tmp, "k.npy"),
               "--v", os.path.join(tmp, "v.npy"), "--causal", "top-left", "--scale", "1",
               "--out", os.path.join(tmp, "o.npy"), "--heatmap", args.out]
        print(" ".join(cmd))
        return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
