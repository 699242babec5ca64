// The inputs of `vkattn run`: .npy files read, converted and checked before any device is touched,
// so a bad file or a shape that does not agree fails fast, with one message, and writes nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <span>

#include "modifier_options.hpp"
#include "per_head_options.hpp"
#include "npy.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/problem.hpp"
#include "vkattn/types.hpp"

namespace vkattn::cli {

// What the user passed (paths and flag values as typed).
struct RunOptions {
  std::string q, k, v, mask, kv_lens, out, lse;  // empty = absent
  std::string weights, heatmap;                   // empty = absent; either needs the unfused path
  std::string path = "auto";                      // auto | fused | unfused
  std::string causal = "none";
  std::string scale;  // empty = default 1/sqrt(dim_qk); a finite float32 (parse_float32)
  std::string dtype;  // empty = Q's dtype
  std::string device;
  AttentionOptions modifiers;  // the modifier options as parsed (modifier_options.hpp)
  PerHead<std::string> per_head_files;  // .npy files (per_head_options.hpp); empty = absent
  // A paged KV cache instead of --k/--v (run_paged.hpp); empty = absent.
  std::string k_cache, v_cache, block_table, cache_lens;
  std::string k_new, v_new;              // appended first: both or neither
  std::string k_cache_out, v_cache_out;  // the caches after the append
  std::string page_order;                // "" or "nhd": (num_pages, page_size, kv_heads, dim); "hnd": (num_pages, kv_heads, page_size, dim)
  std::string kv_dtype;                  // empty = the compute dtype; "q8_0" (dense, paged or packed K/V)
  bool check = false;                    // compare with the fp64 reference (paged and varlen only)
  // A packed variable-length batch (run_varlen.hpp): 3-D --q/--k/--v with these; empty = absent.
  std::string cu_seqlens_q, cu_seqlens_k;
  // The backward pass (run_gradients.hpp): dO in, the gradients out; empty = absent.
  std::string grad_out, dq, dk, dv, dsinks;
  // Dropout (run_dropout.hpp): p as typed ("" = none), the seed, the keep mask's file.
  std::string dropout, dropout_mask;
  uint64_t seed = 0;
  bool backward() const { return !grad_out.empty(); }
  bool paged() const { return !k_cache.empty(); }
  bool varlen() const { return !cu_seqlens_q.empty() || !cu_seqlens_k.empty(); }
};

struct RunInputs {
  AttentionLayouts layouts;  // dense BHSD layouts in the compute dtype; checked
  AttentionProblem problem;
  std::vector<float> q, k, v;      // values as read (rounded to the dtype on upload; q8_0: k and v
                                   // hold what the blocks stand for, dequantized)
  // --kv-dtype q8_0 (layouts.kv_quant): K and V as uploaded, quantize_q8_0 of the values read.
  std::vector<uint8_t> k_q8_0, v_q8_0;
  std::vector<std::byte> mask;     // device bytes for layouts.mask: 0/1 bytes, f32 or f16
  std::vector<int32_t> kv_lengths;  // empty when absent
  PerHeadInputs per_head;  // with the layouts' per-head tensors
  bool out_f16 = false;             // write O as '<f2' (Q was '<f2' and the dtype is not bf16)
};

// Reads and checks everything; throws vkattn::Error naming the file or the argument.
RunInputs load_run_inputs(const RunOptions& options);

// Shared by the dense run (cmd_run.cpp) and the paged one (run_paged.cpp).

// Reads `path` and requires a 4-D array: "<path>: <role> must be a 4-D array <dims>, got shape ...".
npy::Array read_4d(const std::string& path, const char* role, const char* dims = "(batch, heads, seq, dim)");
// The compute dtype: --dtype, else Q's file dtype, which every array of `others` (array, its path)
// must then share ("Q, K and V must share one dtype" with `together` = "Q, K and V").
DType compute_dtype(const RunOptions& options, const npy::Array& q,
                    const std::vector<std::pair<const npy::Array*, std::string>>& others, const char* together);
// A device buffer of at least 16 bytes (an empty tensor still gets one), and one holding `values`
// encoded in `dtype`.
Buffer allocate_at_least(Context& context, uint64_t bytes);
Buffer upload_encoded(Context& context, DType dtype, std::span<const float> values);
// K or V as the call reads them: `quant` q8_0, its blocks as they are; else `values` encoded in `dtype`.
Buffer upload_kv(Context& context, DType dtype, KvQuant quant, std::span<const float> values,
                 std::span<const uint8_t> blocks);
// The first two lines of a comparison's text (its summary and first mismatch): what --check's
// one-line error shows.
std::string first_lines(const std::string& text);
// --kv-dtype q8_0: `values` (rows of `dim`, in the layout's element order) as q8_0 blocks; a value
// q8_0 cannot hold (NaN, Inf, a scale beyond f16) throws quantize_q8_0's message prefixed by
// "<option> (<path>): ".
std::vector<uint8_t> quantize_kv(std::span<const float> values, int64_t dim, const std::string& option,
                                 const std::string& path);
// An output file from device bytes in `dtype`: '<f2' as is when `as_f16` and the dtype is f16, else
// decoded to float32 (or rounded to '<f2' when `as_f16`).
std::vector<std::byte> output_npy(std::span<const std::byte> device_bytes, DType dtype,
                                  const std::vector<int64_t>& shape, bool as_f16);

}  // namespace vkattn::cli
