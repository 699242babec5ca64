import numpy as np
import vkattn

print(vkattn.__version__, [d["name"] for d in vkattn.devices()])
rng = np.random.default_rng(0)
q = rng.standard_normal((2, 8, 100, 64), dtype=np.float32)  # (batch, heads, seq, dim)
k = rng.standard_normal((2, 2, 120, 64), dtype=np.float32)  # 2 key/value heads: GQA
v = rng.standard_normal((2, 2, 120, 64), dtype=np.float32)
out, lse = vkattn.scaled_dot_product_attention(
    q, k, v, enable_gqa=True, causal="bottom-right", return_lse=True)
print(out.shape, out.dtype, lse.shape)  # (2, 8, 100, 64) float32 (2, 8, 100)
