// How much of the host time of recording attention is vkattn's own work. A runtime records the same
// call thousands of times a second; `vkattn bench --host-time` reports the microseconds per record,
// which include the driver's command recording (lavapipe allocates and copies every command). This
// program times the same recordings twice, alternating: with the driver, and with the driver's
// command-recording entry points replaced by empty functions (vkCmdBindPipeline, vkCmdPushConstants,
// vkCmdDispatch, vkCmdPipelineBarrier and the push-descriptor entry point), so that what remains is
// vkattn's checks, planning and bookkeeping. It links the runtime's internals (runtime/) for that one
// swap: it measures, it is not an example.
//
//   vkattn_host_overhead [--device NAME]
//
// Built with -DVKATTN_HOST_OVERHEAD_BEFORE against commit 5de1111 (the library before plans were
// executable: record_attention planned every call, looked pipelines up by module-name string and
// pushed descriptors with vkCmdPushDescriptorSetKHR), it measures record_attention and forward() as
// they were, for the before/after figures in the benchmark notebook (docs/performance.md).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "context_impl.hpp"
#include "host_time.hpp"
#include "vkattn/vkattn.hpp"

namespace {

bool g_null_driver = false;

template <typename F>
F next_symbol(F& cached, const char* name) {
  if (!cached) cached = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
  return cached;
}

}  // namespace

// The loader's entry points, taken over: the runtime's calls land here (this program's definitions
// win over libvulkan's) and go on to the loader unless the driver is switched off.
extern "C" {
VKAPI_ATTR void VKAPI_CALL vkCmdBindPipeline(VkCommandBuffer cmd, VkPipelineBindPoint point, VkPipeline pipeline) {
  static PFN_vkCmdBindPipeline real = nullptr;
  if (!g_null_driver) next_symbol(real, "vkCmdBindPipeline")(cmd, point, pipeline);
}
VKAPI_ATTR void VKAPI_CALL vkCmdPushConstants(VkCommandBuffer cmd, VkPipelineLayout layout, VkShaderStageFlags stages,
                                              uint32_t offset, uint32_t size, const void* values) {
  static PFN_vkCmdPushConstants real = nullptr;
  if (!g_null_driver) next_symbol(real, "vkCmdPushConstants")(cmd, layout, stages, offset, size, values);
}
VKAPI_ATTR void VKAPI_CALL vkCmdDispatch(VkCommandBuffer cmd, uint32_t x, uint32_t y, uint32_t z) {
  static PFN_vkCmdDispatch real = nullptr;
  if (!g_null_driver) next_symbol(real, "vkCmdDispatch")(cmd, x, y, z);
}
VKAPI_ATTR void VKAPI_CALL vkCmdPipelineBarrier(VkCommandBuffer cmd, VkPipelineStageFlags src, VkPipelineStageFlags dst,
                                                VkDependencyFlags flags, uint32_t memory_count,
                                                const VkMemoryBarrier* memory, uint32_t buffer_count,
                                                const VkBufferMemoryBarrier* buffers, uint32_t image_count,
                                                const VkImageMemoryBarrier* images) {
  static PFN_vkCmdPipelineBarrier real = nullptr;
  if (!g_null_driver)
    next_symbol(real, "vkCmdPipelineBarrier")(cmd, src, dst, flags, memory_count, memory, buffer_count, buffers,
                                              image_count, images);
}
}

namespace {

using namespace vkattn;

#ifdef VKATTN_HOST_OVERHEAD_BEFORE
using PushDescriptors = PFN_vkCmdPushDescriptorSetKHR;
void no_push_descriptors(VkCommandBuffer, VkPipelineBindPoint, VkPipelineLayout, uint32_t, uint32_t,
                         const VkWriteDescriptorSet*) {}
detail::ContextImpl& runtime_of(Context& context) { return context.impl(); }
PushDescriptors& push_entry(detail::ContextImpl& c) { return c.push_descriptor_set; }
#else
using PushDescriptors = PFN_vkCmdPushDescriptorSetWithTemplateKHR;
void no_push_descriptors(VkCommandBuffer, VkDescriptorUpdateTemplate, VkPipelineLayout, uint32_t, const void*) {}
detail::ContextImpl& runtime_of(Context& context) { return detail::impl_of(context); }
PushDescriptors& push_entry(detail::ContextImpl& c) { return c.push_descriptors; }
#endif

struct Shape {
  const char* name;
  int64_t heads, kv_heads, seq_q, seq_k, dim;
  DType dtype;
};

void measure(Context& context, const Shape& s) {
  AttentionLayouts l;
  l.q = TensorLayout::bhsd(s.dtype, 1, s.heads, s.seq_q, s.dim);
  l.k = TensorLayout::bhsd(s.dtype, 1, s.kv_heads, s.seq_k, s.dim);
  l.v = TensorLayout::bhsd(s.dtype, 1, s.kv_heads, s.seq_k, s.dim);
  l.out = TensorLayout::bhsd(s.dtype, 1, s.heads, s.seq_q, s.dim);
  const auto bytes = [](const TensorLayout& t) { return uint64_t(t.required_elements()) * dtype_size(t.dtype); };
  Buffer q = Buffer::allocate(context, bytes(l.q)), k = Buffer::allocate(context, bytes(l.k)),
         v = Buffer::allocate(context, bytes(l.v)), out = Buffer::allocate(context, bytes(l.out));
  for (Buffer* b : {&q, &k, &v}) b->fill(0);
  AttentionArgs args;
  args.q = {&q, l.q}, args.k = {&k, l.k}, args.v = {&v, l.v}, args.out = {&out, l.out};
  attention(context, args);  // every pipeline exists from here
  const AttentionPlan plan = plan_attention(context, args);
  std::optional<Buffer> workspace;
  if (plan.workspace_bytes > 0) workspace.emplace(Buffer::allocate(context, plan.workspace_bytes));
  const BufferSlice slice{workspace ? &*workspace : nullptr, 0};
#ifndef VKATTN_HOST_OVERHEAD_BEFORE
  const PreparedAttention prepared(context, AttentionSpec::of(args));
  const AttentionBuffers buffers = AttentionBuffers::of(args);
#endif

  detail::ContextImpl& c = runtime_of(context);
  const PushDescriptors real_push = push_entry(c);
  constexpr int kRounds = 15, kCalls = 200;
  std::vector<cli::HostTime> times[4];
  for (int round = 0; round < kRounds; ++round)
    for (int null_driver = 0; null_driver < 2; ++null_driver) {
      g_null_driver = null_driver != 0;
      push_entry(c) = g_null_driver ? no_push_descriptors : real_push;
      times[2 * null_driver].push_back(cli::time_recording(
          context, [&](VkCommandBuffer cmd) { record_attention(context, cmd, args, slice); }, 1, kCalls));
#ifndef VKATTN_HOST_OVERHEAD_BEFORE
      times[2 * null_driver + 1].push_back(
          cli::time_recording(context, [&](VkCommandBuffer cmd) { prepared.record(cmd, buffers, slice); }, 1, kCalls));
#endif
    }
  g_null_driver = false;
  push_entry(c) = real_push;

  const char* labels[4] = {"record_attention, with the driver", "PreparedAttention::record, with the driver",
                           "record_attention, vkattn's own work", "PreparedAttention::record, vkattn's own work"};
  std::printf("%s: heads %lld/%lld seq_q %lld seq_k %lld dim %lld %s; plan %s/%s, %u splits\n", s.name,
              static_cast<long long>(s.heads), static_cast<long long>(s.kv_heads), static_cast<long long>(s.seq_q),
              static_cast<long long>(s.seq_k), static_cast<long long>(s.dim), to_string(s.dtype), plan.path, plan.kernel,
              plan.splits);
  for (int i = 0; i < 4; ++i) {
    if (times[i].empty()) continue;  // PreparedAttention, built against the library before it existed
    const cli::HostTime t = cli::merge_rounds(times[i]);
    std::printf("  %-46s %8.3f us median %8.3f us min  (%d rounds x %d calls)\n", labels[i], t.us_median, t.us_min,
                t.rounds, t.calls_per_round);
  }
}

// The layer at the decode shape: forward() on host arrays (uploads, a plan and a submit per call; timed
// with the driver's recording switched off, so the device computes nothing and what remains is the
// host's part), and a pass prepared once, recorded.
void measure_layer(Context& context) {
  const int64_t E = 4096, H = 32, G = 8, Sk = 4096;
  const DType dtype = context.device_info().supports_f16() ? DType::f16 : DType::f32;
  MhaWeights w;
  w.embed_dim = E, w.num_heads = H, w.kv_heads = G;
  const int64_t kvd = G * (E / H);
  w.q_proj_weight.assign(std::size_t(E * E), 0.01f);
  w.k_proj_weight.assign(std::size_t(kvd * E), 0.01f);
  w.v_proj_weight.assign(std::size_t(kvd * E), 0.01f);
  w.in_proj_bias.assign(std::size_t(E + 2 * kvd), 0.0f);
  w.out_proj_weight.assign(std::size_t(E * E), 0.01f);
  w.out_proj_bias.assign(std::size_t(E), 0.0f);
  MultiHeadAttention layer(context, w, dtype);
  const std::vector<float> x(std::size_t(E), 0.5f), kv(std::size_t(Sk * E), 0.25f);
  MhaInputs in;
  in.batch = 1, in.seq_q = 1, in.seq_k = Sk, in.query = x, in.key = kv, in.value = kv;
  std::printf("layer: E %lld, heads %lld/%lld, seq_q 1, seq_k %lld, %s\n", static_cast<long long>(E),
              static_cast<long long>(H), static_cast<long long>(G), static_cast<long long>(Sk), to_string(dtype));

  detail::ContextImpl& c = runtime_of(context);
  const PushDescriptors real_push = push_entry(c);
  g_null_driver = true;
  push_entry(c) = no_push_descriptors;
  std::vector<double> forward_us;
  for (int i = 0; i < 4; ++i) {
    const auto start = std::chrono::steady_clock::now();
    layer.forward(in);
    forward_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  g_null_driver = false;
  push_entry(c) = real_push;
  forward_us.erase(forward_us.begin());  // the first builds the pipelines
  std::sort(forward_us.begin(), forward_us.end());
  std::printf("  %-46s %8.1f us median %8.1f us min  (%zu calls)\n", "forward() on host arrays, host part",
              forward_us[forward_us.size() / 2], forward_us.front(), forward_us.size());
#ifndef VKATTN_HOST_OVERHEAD_BEFORE
  MhaSpec spec;
  spec.batch = 1, spec.seq_q = 1, spec.seq_k = Sk;
  const PreparedMha pass = layer.prepare(spec);
  const uint64_t es = dtype_size(dtype);
  Buffer query = Buffer::allocate(context, uint64_t(E) * es), keys = Buffer::allocate(context, uint64_t(Sk * E) * es),
         out = Buffer::allocate(context, uint64_t(E) * es), workspace = Buffer::allocate(context, pass.workspace_bytes());
  MhaBuffers b;
  b.query = &query, b.key = &keys, b.value = &keys, b.out = &out;
  const BufferSlice slice{&workspace, 0};
  std::vector<cli::HostTime> times[2];
  for (int round = 0; round < 15; ++round)
    for (int null_driver = 0; null_driver < 2; ++null_driver) {
      g_null_driver = null_driver != 0;
      push_entry(c) = g_null_driver ? no_push_descriptors : real_push;
      times[null_driver].push_back(
          cli::time_recording(context, [&](VkCommandBuffer cmd) { pass.record(cmd, b, slice); }, 1, 200));
    }
  g_null_driver = false;
  push_entry(c) = real_push;
  const char* labels[2] = {"PreparedMha::record, with the driver", "PreparedMha::record, vkattn's own work"};
  for (int i = 0; i < 2; ++i) {
    const cli::HostTime t = cli::merge_rounds(times[i]);
    std::printf("  %-46s %8.3f us median %8.3f us min  (%d rounds x %d calls)\n", labels[i], t.us_median, t.us_min,
                t.rounds, t.calls_per_round);
  }
#endif
}

}  // namespace

int main(int argc, char** argv) {
  try {
    ContextOptions options;
    if (argc == 3 && std::string(argv[1]) == "--device") options.device = argv[2];
    else if (argc != 1) {
      std::fprintf(stderr, "usage: vkattn_host_overhead [--device NAME]\n");
      return 2;
    }
    Context context(options);
    std::printf("device %s | driver %s %s | vkattn %s\n", context.device_info().name.c_str(),
                context.device_info().driver_name.c_str(), context.device_info().driver_info.c_str(), version());
    const DType half = context.device_info().supports_f16() ? DType::f16 : DType::f32;
    measure(context, {"decode", 32, 8, 1, 4096, 128, half});
    measure(context, {"prefill", 8, 8, 1024, 1024, 64, DType::f32});
    measure_layer(context);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkattn_host_overhead: %s\n", e.what());
    return 1;
  }
}
