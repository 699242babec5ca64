#include "run_dropout.hpp"

#include <vector>

#include "cli_numbers.hpp"
#include "npy.hpp"
#include "vkattn/dropout.hpp"

namespace vkattn::cli {
namespace {

void stage_mask(OutputFiles& files, const std::string& path, const std::vector<int64_t>& shape,
                const std::vector<uint8_t>& keep) {
  files.stage(path, npy::serialize(shape, "|u1", std::as_bytes(std::span(keep))));
}

}  // namespace

std::string dropout_usage_error(const RunOptions& o) {
  if (o.dropout.empty()) {
    if (!o.dropout_mask.empty()) return "--dropout-mask needs --dropout (the probability whose keep mask it writes)";
    return "";
  }
  if (o.paged()) return "--dropout cannot be used with a paged cache (--k-cache): it is an inference layout";
  if (!o.kv_dtype.empty()) return "--dropout cannot be used with --kv-dtype " + o.kv_dtype + ": q8_0 K and V are an inference layout";
  return "";
}

bool apply_dropout_option(const RunOptions& run, AttentionOptions& options) {
  if (run.dropout.empty()) return false;
  const float p = parse_float32(run.dropout, "--dropout");  // (its range: checked by the parse and the library)
  options.dropout = Dropout{p, run.seed, 0};
  return p > 0.0f;
}

void stage_dense_dropout_mask(OutputFiles& files, const RunOptions& run, const AttentionOptions& options, int64_t batch,
                              int64_t heads, int64_t seq_q, int64_t seq_k) {
  if (run.dropout_mask.empty()) return;
  const Dropout d = options.dropout.value_or(Dropout{});
  std::vector<uint8_t> keep(static_cast<std::size_t>(batch * heads * seq_q * seq_k));
  std::size_t n = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < seq_q; ++i)
        for (int64_t j = 0; j < seq_k; ++j) keep[n++] = d.p > 0.0f ? uint8_t(dropout_keep(d, heads, b, h, i, j)) : 1;
  stage_mask(files, run.dropout_mask, {batch, heads, seq_q, seq_k}, keep);
}

void stage_packed_dropout_mask(OutputFiles& files, const RunOptions& run, const AttentionOptions& options, int64_t heads,
                               std::span<const int32_t> cu_q, std::span<const int32_t> cu_k) {
  if (run.dropout_mask.empty()) return;
  const Dropout d = options.dropout.value_or(Dropout{});
  const int64_t total_q = cu_q.back(), total_k = cu_k.back();
  std::vector<uint8_t> keep(static_cast<std::size_t>(heads * total_q * total_k), 0);
  for (int64_t h = 0; h < heads; ++h)
    for (std::size_t b = 0; b + 1 < cu_q.size(); ++b)
      for (int64_t i = 0; i < cu_q[b + 1] - cu_q[b]; ++i)
        for (int64_t j = 0; j < cu_k[b + 1] - cu_k[b]; ++j)
          keep[std::size_t((h * total_q + cu_q[b] + i) * total_k + cu_k[b] + j)] =
              d.p > 0.0f ? uint8_t(dropout_keep(d, heads, int64_t(b), h, i, j)) : 1;
  stage_mask(files, run.dropout_mask, {heads, total_q, total_k}, keep);
}

}  // namespace vkattn::cli
