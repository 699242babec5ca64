#include "bench_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "usage_error.hpp"
#include "vkattn/error.hpp"

namespace vkattn::cli {
namespace {

// Powers of two from `first` to `last`, both included.
std::vector<int64_t> doubling(int64_t first, int64_t last) {
  std::vector<int64_t> values;
  for (int64_t v = first; v <= last; v *= 2) values.push_back(v);
  return values;
}

std::string range(const std::vector<int64_t>& values) {
  return std::to_string(values.front()) + ".." + std::to_string(values.back());
}

// The FlashAttention papers' forward benchmark: a fixed number of tokens in total and a fixed model
// width, so every point does the same amount of work per token and only the sequence length moves.
struct PrefillPreset {
  int64_t tokens, hidden;
  std::vector<int64_t> seqs;
};
const PrefillPreset kPrefillGpu{16384, 2048, doubling(512, 16384)};
// lavapipe on 2 cores does well under 1 GFLOP/s: the full grid (about 40 TFLOP in all) would take
// days. 2048 tokens of width 256 keep every shape under a few seconds.
const PrefillPreset kPrefillCpu{2048, 256, doubling(128, 1024)};
const std::vector<int64_t> kPrefillDims = {64, 128, 256};

// Decoding one token against a KV cache: a Llama-style GQA layer (32 query heads, 8 KV heads).
const std::vector<int64_t> kDecodeGpu = doubling(1024, 131072);
const std::vector<int64_t> kDecodeCpu = doubling(1024, 16384);

// Fixed heads and dim, seq doubling: the growth of time and memory with seq on each path. Fewer
// heads on a CPU keep its last point (4096) to seconds per run.
struct ScalingPreset {
  int64_t heads, dim;
  std::vector<int64_t> seqs;
};
const ScalingPreset kScalingGpu{8, 64, doubling(256, 8192)};
const ScalingPreset kScalingCpu{2, 64, doubling(256, 4096)};

std::vector<int64_t> capped(const std::vector<int64_t>& seqs, int64_t max_seq, Sweep sweep) {
  if (max_seq <= 0) return seqs;
  std::vector<int64_t> kept;
  for (int64_t s : seqs)
    if (s <= max_seq) kept.push_back(s);
  if (kept.empty())
    throw UsageError("--max-seq " + std::to_string(max_seq) + " leaves no shape of the " + to_string(sweep) +
                " sweep on this device (its sequence lengths are " + range(seqs) + ")");
  return kept;
}

}  // namespace

const char* to_string(Sweep sweep) {
  switch (sweep) {
    case Sweep::prefill: return "prefill";
    case Sweep::decode: return "decode";
    case Sweep::scaling: return "scaling";
  }
  return "?";
}

Sweep parse_sweep(const std::string& name) {
  for (Sweep s : {Sweep::prefill, Sweep::decode, Sweep::scaling})
    if (name == to_string(s)) return s;
  throw Error("--sweep: unknown preset '" + name + "' (expected prefill, decode or scaling)");
}

bool is_cpu_device(const DeviceInfo& device) { return device.is_llvmpipe || device.is_cpu(); }

SweepGrid sweep_grid(Sweep sweep, bool cpu_device, int64_t max_seq) {
  SweepGrid grid;
  std::string full, reduced_to;  // descriptions of the full grid and, on a CPU, of the reduced one
  std::vector<int64_t> all_seqs;
  switch (sweep) {
    case Sweep::prefill: {
      const PrefillPreset& p = cpu_device ? kPrefillCpu : kPrefillGpu;
      all_seqs = p.seqs;
      const std::vector<int64_t> seqs = capped(p.seqs, max_seq, sweep);
      // Causal as bottom-right (FlashAttention >= 2.1); with seq_q == seq_k it is the same mask as
      // top-left, so the figures compare with either convention's tables.
      for (Causal causal : {Causal::none, Causal::bottom_right})
        for (int64_t dim : kPrefillDims)
          for (int64_t seq : seqs) {
            BenchShape s;
            s.batch = p.tokens / seq;
            s.heads = s.kv_heads = p.hidden / dim;
            s.seq_q = s.seq_k = seq;
            s.dim_qk = s.dim_v = dim;
            s.options.causal = causal;
            grid.shapes.push_back(s);
          }
      const auto describe = [](const PrefillPreset& q) {
        return std::to_string(q.tokens) + " tokens (batch = tokens/seq), hidden " + std::to_string(q.hidden) +
               " (heads = hidden/dim), seq " + range(q.seqs);
      };
      full = describe(kPrefillGpu);
      reduced_to = describe(kPrefillCpu);
      grid.note = "prefill: dim 64/128/256, non-causal and causal (bottom-right, the same mask as top-left "
                  "since seq_q = seq_k)";
      break;
    }
    case Sweep::decode: {
      const std::vector<int64_t>& preset = cpu_device ? kDecodeCpu : kDecodeGpu;
      all_seqs = preset;
      for (int64_t seq_k : capped(preset, max_seq, sweep)) {
        BenchShape s;
        s.batch = 1;
        s.heads = 32;
        s.kv_heads = 8;
        s.seq_q = 1;
        s.seq_k = seq_k;
        s.dim_qk = s.dim_v = 128;
        s.options.causal = Causal::none;  // one query sees every key: bottom-right would mask nothing
        grid.shapes.push_back(s);
      }
      full = "seq_k " + range(kDecodeGpu);
      reduced_to = "seq_k " + range(kDecodeCpu);
      grid.note = "decode: batch 1, seq_q 1, 32 heads, 8 KV heads, dim 128, no mask";
      break;
    }
    case Sweep::scaling: {
      const ScalingPreset& p = cpu_device ? kScalingCpu : kScalingGpu;
      all_seqs = p.seqs;
      const std::vector<int64_t> seqs = capped(p.seqs, max_seq, sweep);
      for (AttentionPath path : {AttentionPath::fused, AttentionPath::unfused})
        for (int64_t seq : seqs) {
          BenchShape s;
          s.batch = 1;
          s.heads = s.kv_heads = p.heads;
          s.seq_q = s.seq_k = seq;
          s.dim_qk = s.dim_v = p.dim;
          s.path = path;
          grid.shapes.push_back(s);
        }
      const auto describe = [](const ScalingPreset& q) {
        return "heads " + std::to_string(q.heads) + ", seq " + range(q.seqs);
      };
      full = describe(kScalingGpu);
      reduced_to = describe(kScalingCpu);
      grid.note = "scaling: batch 1, dim 64, no mask, each seq on the fused path and on the three-stage path "
                  "writing P (unfused)";
      break;
    }
  }
  grid.note += "; " + (cpu_device ? reduced_to : full);
  if (cpu_device) {
    grid.reduced = true;
    grid.note += " (reduced for a CPU device; the full grid: " + full + ")";
  }
  if (max_seq > 0 && max_seq < all_seqs.back()) {
    grid.reduced = true;
    grid.note += std::string("; capped at ") + (sweep == Sweep::decode ? "seq_k " : "seq ") + std::to_string(max_seq) +
                 " by --max-seq";
  }
  return grid;
}

std::string sweep_label(Sweep sweep, const BenchShape& s) {
  std::string label = to_string(sweep);
  switch (sweep) {
    case Sweep::prefill:
      label += " seq " + std::to_string(s.seq_q) + " dim " + std::to_string(s.dim_qk) +
               (s.options.causal == Causal::none ? "" : " causal");
      break;
    case Sweep::decode: label += " seq_k " + std::to_string(s.seq_k); break;
    case Sweep::scaling:
      label += std::string(" ") + (s.path == AttentionPath::unfused ? "unfused" : "fused") + " seq " +
               std::to_string(s.seq_q);
      break;
  }
  return label;
}

double fit_exponent(const std::vector<std::pair<double, double>>& points) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Two points always lie on a line: their "fit" would print an exponent with nothing behind it.
  std::vector<double> xs;
  for (const auto& point : points) xs.push_back(point.first);
  std::sort(xs.begin(), xs.end());
  if (std::unique(xs.begin(), xs.end()) - xs.begin() < kMinFitPoints) return nan;
  double mx = 0, my = 0;
  for (const auto& [x, y] : points) {
    if (!(x > 0) || !(y > 0)) return nan;
    mx += std::log(x);
    my += std::log(y);
  }
  mx /= static_cast<double>(points.size());
  my /= static_cast<double>(points.size());
  double sxy = 0, sxx = 0;
  for (const auto& [x, y] : points) {
    sxy += (std::log(x) - mx) * (std::log(y) - my);
    sxx += (std::log(x) - mx) * (std::log(x) - mx);
  }
  return sxx > 0 ? sxy / sxx : nan;
}

std::vector<Fit> fit_scaling(const std::vector<BenchResult>& results) {
  std::vector<std::string> paths;
  for (const BenchResult& r : results) {
    const std::string path = r.shape.path == AttentionPath::unfused ? "unfused" : "fused";
    bool seen = false;
    for (const std::string& p : paths) seen = seen || p == path;
    if (!seen) paths.push_back(path);
  }
  std::vector<Fit> fits;
  for (const std::string& path : paths) {
    std::vector<std::pair<double, double>> time, memory;
    for (const BenchResult& r : results) {
      if (r.skipped || (r.shape.path == AttentionPath::unfused ? "unfused" : "fused") != path) continue;
      const double seq = static_cast<double>(r.shape.seq_k);
      time.emplace_back(seq, r.ms_median);
      memory.emplace_back(seq, static_cast<double>(r.peak_device_bytes));
    }
    for (const auto& [metric, points] : {std::pair{"ms_median", &time}, std::pair{"peak_device_bytes", &memory}}) {
      const double exponent = fit_exponent(*points);
      if (std::isfinite(exponent)) fits.push_back(Fit{path, metric, exponent, static_cast<int>(points->size())});
    }
  }
  return fits;
}

}  // namespace vkattn::cli
