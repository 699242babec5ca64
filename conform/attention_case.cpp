#include "conform/attention_case.hpp"

#include <sstream>

namespace vkattn::conform {
namespace {

template <typename T>
std::string list(const std::vector<T>& xs) {
  std::ostringstream s;
  s << "{";
  for (std::size_t i = 0; i < xs.size(); ++i) s << (i ? "," : "") << xs[i];
  s << "}";
  return s.str();
}

bool near_tile_edge(int64_t n) {
  // The tile sizes the kernels use (rows and keys per tile: 4 to 128) and the GEMM's 16/64/128.
  for (int64_t edge : {16, 32, 64, 128})
    if (n >= edge - 1 && n <= edge + 1) return true;
  return false;
}

std::string dim_bucket(int64_t d) {
  if (d <= 32) return "1-32";
  if (d <= 64) return "33-64";
  if (d <= 128) return "65-128";
  if (d <= 256) return "129-256";
  return "257-576";
}

}  // namespace

const char* to_string(LayoutKind layout) {
  switch (layout) {
    case LayoutKind::bhsd:
      return "bhsd";
    case LayoutKind::bshd:
      return "bshd";
    case LayoutKind::padded:
      return "padded";
  }
  return "?";
}

const char* to_string(MaskKind mask) {
  switch (mask) {
    case MaskKind::none:
      return "none";
    case MaskKind::boolean:
      return "bool";
    case MaskKind::f32:
      return "f32";
    case MaskKind::f16:
      return "f16";
  }
  return "?";
}

std::string describe(const AttentionCase& c) {
  std::ostringstream s;
  s << vkattn::to_string(c.dtype);
  if (c.kv_quant != KvQuant::none) s << " K/V " << vkattn::to_string(c.kv_quant);
  s << " B" << c.batch << " H" << c.heads << "/KV" << c.kv_heads << " Sq" << c.seq_q
    << " Sk" << c.seq_k << " D" << c.dim_qk << "/" << c.dim_v << " causal=" << vkattn::to_string(c.causal);
  if (!c.kv_lengths.empty()) s << " kv_lengths=" << list(c.kv_lengths);
  if (!c.gpu_kv_lengths.empty()) s << " gpu_kv_lengths=" << list(c.gpu_kv_lengths);
  if (c.mask != MaskKind::none) {
    s << " mask=" << to_string(c.mask) << "(" << c.mask_batch << "," << c.mask_heads << ") drop=" << c.mask_drop;
    if (!c.mask_blank_rows.empty()) s << " blank_rows=" << list(c.mask_blank_rows);
    if (!c.mask_blank_keys.empty()) s << " blank_keys=" << list(c.mask_blank_keys);
  }
  s << attention_text(c.modifiers);
  s << " layout=" << to_string(c.layout) << " offset=" << c.offset;
  if (c.scale) s << " scale=" << *c.scale;
  if (c.qk_range != 2.0f) s << " qk_range=" << c.qk_range;
  s << (c.lse ? " lse" : " no-lse");
  if (c.poison_hidden_kv) s << " poison-hidden-kv";
  if (!c.nan_q_rows.empty()) s << " nan_q_rows=" << list(c.nan_q_rows);
  if (!c.reference_rows.empty()) s << " rows=" << list(c.reference_rows);
  s << " seed=" << c.seed;
  return s.str();
}

std::vector<std::pair<std::string, std::string>> features(const AttentionCase& c) {
  std::vector<std::pair<std::string, std::string>> f;
  f.emplace_back("dtype", vkattn::to_string(c.dtype));
  if (c.kv_quant != KvQuant::none) f.emplace_back("dtype", std::string("K/V ") + vkattn::to_string(c.kv_quant));

  int mask_kinds = 0;
  if (c.causal != Causal::none) {
    f.emplace_back("mask", std::string("causal ") + vkattn::to_string(c.causal));
    ++mask_kinds;
  }
  if (!c.kv_lengths.empty()) {
    f.emplace_back("mask", c.gpu_kv_lengths.empty() ? "key padding" : "key padding, out of range");
    ++mask_kinds;
  }
  if (c.mask != MaskKind::none) {
    const std::string shape = std::string(c.mask_batch > 1 ? "B" : "1") + "," + (c.mask_heads > 1 ? "H" : "1");
    f.emplace_back("mask", std::string(to_string(c.mask)) + " mask (" + shape + ",Sq,Sk)");
    ++mask_kinds;
  }
  if (mask_kinds == 0) f.emplace_back("mask", "none");
  if (mask_kinds > 1) f.emplace_back("mask", "combined");

  add_attention_features(c.modifiers, c.causal, f);

  if (c.kv_heads == c.heads) f.emplace_back("heads", "MHA");
  else if (c.kv_heads == 1) f.emplace_back("heads", "MQA");
  else f.emplace_back("heads", "GQA " + std::to_string(c.heads / c.kv_heads) + ":1");
  if (c.heads > 65535 || c.batch > 65535) f.emplace_back("heads", "grid beyond 65535");

  f.emplace_back("layout", to_string(c.layout));
  if (c.offset) f.emplace_back("layout", "with offset");

  if (c.seq_q == 1) f.emplace_back("seq", "decode (seq_q 1)");
  f.emplace_back("seq", c.seq_q == c.seq_k ? "seq_q = seq_k" : c.seq_q < c.seq_k ? "seq_q < seq_k" : "seq_q > seq_k");
  if (c.seq_q % 2 || c.seq_k % 2) f.emplace_back("seq", "odd");
  if (near_tile_edge(c.seq_q) || near_tile_edge(c.seq_k)) f.emplace_back("seq", "tile edge");
  if (c.seq_k >= 2048) f.emplace_back("seq", "long (>= 2048 keys)");
  if (c.seq_k >= 16384) f.emplace_back("seq", "very long (>= 16384 keys)");
  if (!c.unfused_refusal.empty()) f.emplace_back("seq", "KV head beyond one binding");

  f.emplace_back("dim", "dim " + dim_bucket(c.dim_qk));
  if (c.dim_qk != c.dim_v) f.emplace_back("dim", "dim_qk != dim_v");

  if (c.poison_hidden_kv) f.emplace_back("traps", "NaN/Inf in hidden K, V");
  if (!c.nan_q_rows.empty()) f.emplace_back("traps", "NaN query rows");
  if (!c.mask_blank_rows.empty() || !c.mask_blank_keys.empty()) f.emplace_back("traps", "blank mask rows/keys");
  if (c.scale) f.emplace_back("traps", "explicit scale");
  if (c.qk_range != 2.0f) f.emplace_back("traps", "large Q, K values");
  if (!c.lse) f.emplace_back("traps", "no LSE output");
  return f;
}

uint64_t case_seed(uint64_t base_seed, uint64_t case_number) {
  uint64_t z = base_seed + 0x9e3779b97f4a7c15ull * (case_number + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace vkattn::conform
