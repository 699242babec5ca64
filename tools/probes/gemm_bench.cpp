// The GEMM of the three-stage path and of the multi-head layer (runtime/gemm.hpp, shaders/gemm*.comp)
// timed alone, without the softmax or the attention around it: `vkattn bench --path unfused` times
// the whole three-stage path. It links the runtime's internals (runtime/) to record one GEMM dispatch;
// it measures, it is not an example.
//
//   vkattn_gemm_bench [--device NAME] [--op scores|pv|linear] [--m M] [--n N] [--k K] [--dtype f32|f16|bf16]
//                     [--batch B] [--warmup W] [--iters I]
//
//   scores: C (m, n) f32 = A·Bᵀ / sqrt(k), A (m, k) and B (n, k) in dtype (S = scale·Q·Kᵀ: m = seq_q,
//           n = seq_k, k = dim);
//   pv:     C (m, n) dtype = A·B, A (m, k) f32 row-stochastic weights with a quarter exactly 0 (skip-zero
//           set), B stored (k, n) in dtype and read transposed through its strides (O = P·V: m = seq_q,
//           n = dim_v, k = seq_k);
//   linear: C (m, n) dtype = A·Bᵀ + bias, all dtype (a projection y = x·Wᵀ + b: m = tokens, n = out
//           features, k = in features).
//
// Prints one line: the kernel the plan picked and its tile, the first dispatch's milliseconds
// (pipeline build, and on lavapipe the JIT, which happens at the first dispatch; host wall clock, and
// the process's CPU time, which on a busy machine is the steadier measure of the JIT's work), the
// median and minimum of the timed runs (GPU timestamps), GFLOP/s = 2·m·n·k·batch / median (and / min),
// the operands gemm_subgroup.comp reads or writes by vec4 (GEMM_SG_VEC_* bits: 1 B along k, 2 B
// along n, 4 C), the process's CPU time per timed run (all threads: on a CPU device the driver's
// workers run the shaders, and on a shared machine CPU time is steadier than wall time) with GFLOP
// per CPU-second, and the largest error against a double-precision product of the same rounded
// inputs (sampled rows), relative to max|C|; then the device and driver.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attention_record.hpp"
#include "command_list.hpp"
#include "context_impl.hpp"
#include "gemm.hpp"
#include "vk_check.hpp"
#include "vkattn/vkattn.hpp"

namespace {

using namespace vkattn;

struct Options {
  std::string device, op = "scores";
  int64_t m = 1024, n = 1024, k = 64, batch = 1;
  DType dtype = DType::f32;
  int warmup = 3, iters = 10;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "vkattn_gemm_bench: %s\nusage: vkattn_gemm_bench [--device NAME] [--op scores|pv|linear] [--m M] [--n N] "
               "[--k K] [--dtype f32|f16|bf16] [--batch B] [--warmup W] [--iters I]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const std::string v = argv[i + 1];
    const auto count = [&](int64_t lo) {
      char* end = nullptr;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      if (*end != '\0' || x < lo) usage((a + ": expected an integer >= " + std::to_string(lo)).c_str());
      return int64_t(x);
    };
    if (a == "--device") o.device = v;
    else if (a == "--op") o.op = v;
    else if (a == "--m") o.m = count(1);
    else if (a == "--n") o.n = count(1);
    else if (a == "--k") o.k = count(1);
    else if (a == "--batch") o.batch = count(1);
    else if (a == "--warmup") o.warmup = int(count(0));
    else if (a == "--iters") o.iters = int(count(1));
    else if (a == "--dtype") o.dtype = parse_dtype(v);
    else usage(("unknown option " + a).c_str());
  }
  if (o.op != "scores" && o.op != "pv" && o.op != "linear") usage("--op: scores, pv or linear");
  return o;
}

// Random values rounded to `dtype` (what the device sees), encoded into bytes.
std::vector<float> random_values(std::mt19937& rng, std::size_t count, DType dtype) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = round_to(dtype, dist(rng));
  return v;
}

// CPU seconds this process has used (every thread: on a CPU device, the driver's workers run the
// shaders). On a shared machine it is steadier than the wall clock: other jobs stretch the time a
// dispatch takes, much less the CPU time it needs.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

Buffer upload(Context& ctx, const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  Buffer b = Buffer::allocate(ctx, std::max<uint64_t>(bytes.size(), 4));
  b.upload(bytes.data(), bytes.size());
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    ContextOptions options;
    options.device = o.device;
    Context ctx(options);
    detail::ContextImpl& c = detail::impl_of(ctx);
    if (!c.info.timestamps) throw Error(c.info.name + " has no timestamp queries");
    const bool pv = o.op == "pv", linear = o.op == "linear";
    const DType ta = pv ? DType::f32 : o.dtype, tb = o.dtype, tc = o.op == "scores" ? DType::f32 : o.dtype;
    const int64_t m = o.m, n = o.n, k = o.k, nb = o.batch;

    std::mt19937 rng(1);
    std::vector<float> a = random_values(rng, std::size_t(nb * m * k), ta);
    if (pv)  // weights: a quarter exactly 0 (masked keys), the rest positive
      for (float& x : a) x = (rng() % 4 == 0) ? 0.0f : std::abs(x) / float(k);
    const std::vector<float> b = random_values(rng, std::size_t(nb * n * k), tb);
    const std::vector<float> bias = random_values(rng, std::size_t(n), tb);
    Buffer ab = upload(ctx, a, ta), bb = upload(ctx, b, tb), biasb = upload(ctx, bias, tb);
    Buffer cb = Buffer::allocate(ctx, uint64_t(nb * m * n) * dtype_size(tc));

    detail::GemmCall call;
    call.m = m, call.n = n, call.k = k, call.batch = nb;
    call.a.slot = 1, call.a.dtype = ta, call.a.end = nb * m * k, call.a.stride_batch = m * k, call.a.stride_row = k;
    call.b.slot = 2, call.b.dtype = tb, call.b.end = nb * n * k, call.b.stride_batch = n * k;
    if (pv) call.b.stride_row = 1, call.b.stride_col = n;  // stored (k, n): B's rows are its columns
    else call.b.stride_row = k;
    call.c.slot = 3, call.c.dtype = tc, call.c.end = nb * m * n, call.c.stride_batch = m * n, call.c.stride_row = n;
    call.alpha = o.op == "scores" ? float(1.0 / std::sqrt(double(k))) : 1.0f;
    call.skip_zero_a = pv;
    if (linear) call.has_bias = true, call.bias_slot = 4;
    const detail::GemmChoice choice = detail::choose_gemm(c.info);
    detail::check_gemm_shape(c.info, "gemm", m, n, k);
    detail::CommandList list(std::max<uint64_t>(c.info.min_storage_buffer_offset_alignment, 16));
    detail::emit_gemm(c, list, call, choice);
    const std::vector<detail::SlotBase> slots = {{}, detail::slot_of(ab), detail::slot_of(bb), detail::slot_of(cb), detail::slot_of(biasb)};

    VkQueryPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    pool_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    pool_info.queryCount = 2;
    VkQueryPool pool;
    VK_TRY(vkCreateQueryPool(c.device, &pool_info, nullptr, &pool));
    double first_ms = 0, first_cpu_ms = 0, cpu_start = 0;
    std::vector<double> times;
    for (int it = 0; it < 1 + o.warmup + o.iters; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      const double cpu0 = it == 0 ? cpu_seconds() : 0.0;
      c.submit_and_wait([&](VkCommandBuffer cmd) {
        vkCmdResetQueryPool(cmd, pool, 0, 2);
        detail::barrier_before_attention(cmd);
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool, 0);
        list.replay(c, cmd, slots);
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, 1);
        detail::barrier_after_attention(cmd);
      });
      if (it == 0) {
        first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        first_cpu_ms = (cpu_seconds() - cpu0) * 1e3;
      }
      if (it == o.warmup) cpu_start = cpu_seconds();
      if (it < 1 + o.warmup) continue;
      uint64_t ticks[2];
      VK_TRY(vkGetQueryPoolResults(c.device, pool, 0, 2, sizeof(ticks), ticks, sizeof(uint64_t),
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
      times.push_back(double(ticks[1] - ticks[0]) * c.info.timestamp_period_ns * 1e-6);
    }
    const double cpu_ms = (cpu_seconds() - cpu_start) * 1e3 / o.iters;
    vkDestroyQueryPool(c.device, pool, nullptr);
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2], best = times.front();

    // The error on up to 64 rows of every matrix, against double sums of the same inputs.
    std::vector<uint8_t> out_bytes(std::size_t(nb * m * n) * dtype_size(tc));
    cb.download(out_bytes.data(), out_bytes.size());
    std::vector<float> out(std::size_t(nb * m * n));
    decode(tc, out_bytes.data(), out.data(), out.size());
    double err = 0, cmax = 0;
    for (int64_t z = 0; z < nb; ++z)
      for (int64_t i = 0; i < m; i += std::max<int64_t>(1, m / 64))
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t kk = 0; kk < k; ++kk) {
            const double av = a[std::size_t((z * m + i) * k + kk)];
            const double bv = pv ? b[std::size_t((z * k + kk) * n + j)] : b[std::size_t((z * n + j) * k + kk)];
            if (!(pv && av == 0)) s += av * bv;
          }
          s = s * call.alpha + (linear ? bias[std::size_t(j)] : 0.0);
          err = std::max(err, std::abs(s - double(out[std::size_t((z * m + i) * n + j)])));
          cmax = std::max(cmax, std::abs(s));
        }
    const double flops = 2.0 * double(m) * double(n) * double(k) * double(nb);
    std::printf("op %s m %lld n %lld k %lld batch %lld dtype %s kernel %s first_ms %.1f (cpu %.1f) median_ms %.3f min_ms %.3f "
                "GFLOP/s %.2f (best %.2f) vec %u cpu_ms %.3f GFLOP/cpu-s %.2f err/max_C %.2e; %s; %s\n",
                o.op.c_str(), (long long)m, (long long)n, (long long)k, (long long)nb, to_string(o.dtype),
                detail::gemm_description(choice, call).c_str(), first_ms, first_cpu_ms, median, best, flops / median * 1e-6, flops / best * 1e-6, detail::gemm_vec_bits(choice, call), cpu_ms,
                flops / cpu_ms * 1e-6, cmax > 0 ? err / cmax : err, c.info.name.c_str(), c.info.driver_info.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkattn_gemm_bench: %s\n", e.what());
    return 1;
  }
}
