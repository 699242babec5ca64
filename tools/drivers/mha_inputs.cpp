#include "mha_inputs.hpp"

#include <cstdlib>
#include <limits>
#include <utility>

#include "dtype_overflow.hpp"
#include "mha_state_dict.hpp"
#include "npy.hpp"
#include "vkattn/error.hpp"
#include "modifier_options.hpp"

namespace vkattn::cli {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// A batch-first (batch, seq, features) input whose features must be `features` (the layer's E, kdim
// or vdim, named by `feature_name`).
npy::Array read_input(const std::string& path, const char* role, int64_t features, const std::string& feature_name) {
  npy::Array array = npy::read(path);
  if (array.kind != npy::Kind::f32 && array.kind != npy::Kind::f16)
    throw Error(path + ": " + role + " dtype '" + array.descr + "' is not supported; use '<f4' or '<f2'");
  if (array.shape.size() != 3)
    throw Error(path + ": " + role + " must be 3-D (batch, seq, features), batch first, got shape " +
                array.shape_string());
  if (array.shape[2] != features)
    throw Error(path + ": " + role + " has " + str(array.shape[2]) + " features (shape " + array.shape_string() +
                "), the weights expect " + feature_name + " = " + str(features));
  return array;
}

// key_padding_mask (batch, seq_k): bool or integer, nonzero = IGNORE the key (torch's convention).
std::vector<uint8_t> read_key_padding_mask(const std::string& path, int64_t batch, int64_t seq_k) {
  const npy::Array array = npy::read(path);
  if (array.shape != std::vector<int64_t>{batch, seq_k})
    throw Error(path + ": key_padding_mask must have shape (batch, seq_k) = (" + str(batch) + ", " + str(seq_k) +
                "), got " + array.shape_string());
  if (array.kind == npy::Kind::boolean) return npy::to_bools(array, path);
  if (array.kind == npy::Kind::i32 || array.kind == npy::Kind::i64) {
    std::vector<uint8_t> mask;
    for (const int64_t v : npy::to_ints(array, path)) mask.push_back(v != 0 ? 1 : 0);
    return mask;
  }
  throw Error(path + ": key_padding_mask dtype '" + array.descr +
              "' is not supported; use bool or int (nonzero = ignore the key)");
}

// attn_mask (seq_q, seq_k): float, added to the scores; or bool, where (as in torch's layer) True
// means NOT allowed — the opposite of `vkattn run --mask` — converted to -inf / 0.
std::vector<float> read_attn_mask(const std::string& path, int64_t seq_q, int64_t seq_k) {
  const npy::Array array = npy::read(path);
  if (array.shape != std::vector<int64_t>{seq_q, seq_k})
    throw Error(path + ": attn_mask must have shape (seq_q, seq_k) = (" + str(seq_q) + ", " + str(seq_k) + "), got " +
                array.shape_string());
  if (array.kind == npy::Kind::boolean) {
    std::vector<float> mask;
    for (const uint8_t hidden : npy::to_bools(array, path))
      mask.push_back(hidden ? -std::numeric_limits<float>::infinity() : 0.0f);
    return mask;
  }
  if (array.kind == npy::Kind::f32 || array.kind == npy::Kind::f16) return npy::to_floats(array, path);
  throw Error(path + ": attn_mask dtype '" + array.descr +
              "' is not supported; use float32 (added to the scores) or bool (True = not allowed)");
}

}  // namespace

MhaInputs MhaLoaded::inputs() const {
  MhaInputs in;
  in.batch = batch;
  in.seq_q = seq_q;
  in.seq_k = seq_k;
  in.query = query;
  in.key = key;
  in.value = value;
  in.options = options;
  in.key_padding_mask = key_padding_mask;
  in.attn_mask = attn_mask;
  return in;
}

MhaLoaded load_mha_inputs(const MhaOptions& o) {
  if (o.key.empty() != o.value.empty())
    throw Error(std::string("--key and --value go together (both for cross-attention, neither for self-attention); "
                            "only ") + (o.key.empty() ? "--value" : "--key") + " was given");
  MhaLoaded l;
  l.options.causal = parse_causal(o.causal);
  // The score modifiers' options, parsed as `run` parses them (modifier_options.hpp); whether the
  // alignment agrees with causal is checked with the inputs below, by the library.
  apply_modifier_options(o.modifiers, l.options);
  l.weights = load_mha_state_dict(o.weights, o.heads, o.kv_heads);
  const MhaWeights& w = l.weights;
  const int64_t E = w.embed_dim;

  const npy::Array q = read_input(o.query, "query", E, "E");
  l.batch = q.shape[0];
  l.seq_q = q.shape[1];
  l.query = npy::to_floats(q, o.query);
  // Without --dtype the files' dtype is the compute dtype, so key and value must share the query's.
  const auto same_dtype = [&](const npy::Array& array, const std::string& path) {
    if (o.dtype.empty() && array.kind != q.kind)
      throw Error(path + ": dtype '" + array.descr + "' differs from the query's '" + q.descr + "' (" + o.query +
                  "); pass --dtype to convert");
  };

  if (o.key.empty()) {
    // Self-attention: the query is also the key and the value, so the layer must take E features there.
    if (w.effective_kdim() != E || w.effective_vdim() != E)
      throw Error("self-attention (no --key/--value) needs kdim and vdim equal to E = " + str(E) + ", but " +
                  o.weights + " has kdim " + str(w.effective_kdim()) + " and vdim " + str(w.effective_vdim()));
    l.seq_k = l.seq_q;
  } else {
    const npy::Array k = read_input(o.key, "key", w.effective_kdim(), "kdim");
    const npy::Array v = read_input(o.value, "value", w.effective_vdim(), "vdim");
    same_dtype(k, o.key);
    same_dtype(v, o.value);
    if (k.shape[0] != l.batch || v.shape[0] != l.batch)
      throw Error("batch sizes differ: query " + str(l.batch) + " (" + o.query + "), key " + str(k.shape[0]) + " (" +
                  o.key + "), value " + str(v.shape[0]) + " (" + o.value + ")");
    if (k.shape[1] != v.shape[1])
      throw Error("key and value must have the same seq_k: key " + str(k.shape[1]) + " (" + o.key + "), value " +
                  str(v.shape[1]) + " (" + o.value + ")");
    l.seq_k = k.shape[1];
    l.key = npy::to_floats(k, o.key);
    l.value = npy::to_floats(v, o.value);
  }
  if (!o.key_padding_mask.empty()) l.key_padding_mask = read_key_padding_mask(o.key_padding_mask, l.batch, l.seq_k);
  if (!o.attn_mask.empty()) l.attn_mask = read_attn_mask(o.attn_mask, l.seq_q, l.seq_k);

  l.dtype = o.dtype.empty() ? (q.kind == npy::Kind::f16 ? DType::f16 : DType::f32) : parse_dtype(o.dtype);
  l.out_f16 = q.kind == npy::Kind::f16 && l.dtype == DType::f16;
  // The layer stores its inputs and weights in the compute dtype: none may overflow it.
  check_fits_dtype(l.query, l.dtype, "--query (" + o.query + ")");
  check_fits_dtype(l.key, l.dtype, "--key (" + o.key + ")");
  check_fits_dtype(l.value, l.dtype, "--value (" + o.value + ")");
  for (const auto& [name, values] : {std::pair{"q_proj_weight", &w.q_proj_weight}, std::pair{"k_proj_weight", &w.k_proj_weight},
                                     std::pair{"v_proj_weight", &w.v_proj_weight}, std::pair{"in_proj_bias", &w.in_proj_bias},
                                     std::pair{"out_proj.weight", &w.out_proj_weight},
                                     std::pair{"out_proj.bias", &w.out_proj_bias}})
    check_fits_dtype(*values, l.dtype, "--weights (" + o.weights + "): " + name);
  // The library's own checks too (they run again in the layer, after the device is open): anything
  // the file checks above missed fails here, still before a device is touched.
  check_mha_inputs(check_mha_weights(l.weights), l.inputs());
  return l;
}

}  // namespace vkattn::cli
