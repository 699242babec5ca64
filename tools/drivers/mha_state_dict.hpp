// The weights of `vkattn mha`: a .npz holding torch.nn.MultiheadAttention's state_dict, written by
//     numpy.savez('w.npz', **{k: v.numpy() for k, v in m.state_dict().items()})
// Two layouts, named exactly as torch names them:
//   packed   (kdim == vdim == E):  in_proj_weight (3E, E)
//   separate (kdim or vdim != E, or kv_heads < heads):
//            q_proj_weight (E, E), k_proj_weight (kv_heads·E/H, kdim), v_proj_weight (kv_heads·E/H, vdim)
// plus out_proj.weight (E, E) in both, and the biases in_proj_bias (E + 2·kv_heads·E/H) and
// out_proj.bias (E): both present (bias on) or both absent (bias off). E is out_proj.weight's size.
// Optional, vkattn's score modifiers (docs/semantics.md, "Score modifiers"), not torch's: the per-head weights,
// (H) each, named as MhaWeights' members (per_head_weight_name: the ALiBi slopes are alibi_slopes).
// Any other array name is an error listing the expected ones: a mistyped name must not silently
// turn a bias off.
#pragma once

#include <cstdint>
#include <string>

#include "vkattn/mha_types.hpp"

namespace vkattn::cli {

// Reads and checks `path`. `kv_heads` 0: from k_proj_weight's rows (separate layout) or = heads.
// Throws vkattn::Error naming the file, the array, its shape and the expected one.
MhaWeights load_mha_state_dict(const std::string& path, int64_t heads, int64_t kv_heads);

}  // namespace vkattn::cli
