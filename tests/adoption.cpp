// Adoption (docs/embedding.md): the application owns instance, device, queue, command buffer and buffers;
// vkattn borrows them (Context::adopt, Buffer::wrap), records into the application's command buffer
// with no submit of its own, and the application submits, waits and reads back.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "compare.hpp"
#include "support.hpp"
#include "temp_dir.hpp"
#include "vulkan_app.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

struct AdoptCase {
  DType dtype = DType::f32;
  int64_t batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, dim = 64;
  Causal causal = Causal::none;
  uint64_t seed = 0;
};

std::vector<float> random_values(std::mt19937_64& rng, int64_t n, DType dtype) {
  std::uniform_real_distribution<float> dist(-1.5f, 1.5f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& e : x) e = round_to(dtype, dist(rng));
  return x;
}

// Copies `values` into the application's mapped buffer in `dtype` storage.
void write(const AppBuffer& b, const std::vector<float>& values, DType dtype) {
  encode(dtype, values.data(), b.mapped, values.size());
}

// The options of the adopted Contexts of these tests: the run's kernel variant (--kernel).
ContextOptions adopt_options() {
  ContextOptions options;
  options.kernel = kernel_variant();
  return options;
}

void run_adopted(VulkanApp& app, const AdoptCase& c, bool expect_split) {
  const std::size_t esize = dtype_size(c.dtype);
  std::mt19937_64 rng(c.seed);
  const TensorLayout q_layout = TensorLayout::bhsd(c.dtype, c.batch, c.heads, c.seq_q, c.dim);
  const TensorLayout k_layout = TensorLayout::bshd(c.dtype, c.batch, c.seq_k, c.kv_heads, c.dim);
  const TensorLayout v_layout = TensorLayout::bshd(c.dtype, c.batch, c.seq_k, c.kv_heads, c.dim);
  const TensorLayout out_layout = TensorLayout::bhsd(c.dtype, c.batch, c.heads, c.seq_q, c.dim);
  const std::vector<float> q = random_values(rng, q_layout.required_elements(), c.dtype);
  const std::vector<float> k = random_values(rng, k_layout.required_elements(), c.dtype);
  const std::vector<float> v = random_values(rng, v_layout.required_elements(), c.dtype);
  const uint64_t out_bytes = static_cast<uint64_t>(out_layout.required_elements()) * esize;
  const uint64_t lse_bytes = static_cast<uint64_t>(c.batch * c.heads * c.seq_q) * 4;

  const AppBuffer q_app = app.create_buffer(q.size() * esize);
  const AppBuffer k_app = app.create_buffer(k.size() * esize);
  const AppBuffer v_app = app.create_buffer(v.size() * esize);
  // `out` lives at an aligned offset inside a larger buffer, with guard bytes on both sides.
  const VkDeviceSize out_offset = std::max<VkDeviceSize>(app.storage_alignment(), 256);
  const AppBuffer out_app = app.create_buffer(out_offset + out_bytes + 256);
  const AppBuffer lse_app = app.create_buffer(lse_bytes);
  write(q_app, q, c.dtype);
  write(k_app, k, c.dtype);
  write(v_app, v, c.dtype);

  reference::Inputs in;
  in.q_layout = q_layout;
  in.k_layout = k_layout;
  in.v_layout = v_layout;
  in.q = q;
  in.k = k;
  in.v = v;
  in.options.causal = c.causal;
  const reference::Outputs ref = reference::attention(in);
  double v_scale = 1e-30;
  for (const float x : v) v_scale = std::max(v_scale, static_cast<double>(std::abs(x)));

  {
    // vkattn's objects go before the application's: they hold pipelines and views of its buffers.
    Context ctx = Context::adopt(app.adopted(), adopt_options());
    Buffer q_buf = Buffer::wrap(ctx, q_app.buffer, 0, q_app.size);
    Buffer k_buf = Buffer::wrap(ctx, k_app.buffer, 0, k_app.size);
    Buffer v_buf = Buffer::wrap(ctx, v_app.buffer, 0, v_app.size);
    Buffer out_buf = Buffer::wrap(ctx, out_app.buffer, out_offset, out_bytes);
    Buffer lse_buf = Buffer::wrap(ctx, lse_app.buffer, 0, lse_app.size);
    AttentionArgs args;
    args.q = {&q_buf, q_layout};
    args.k = {&k_buf, k_layout};
    args.v = {&v_buf, v_layout};
    args.out = {&out_buf, out_layout};
    args.lse = {&lse_buf, 0};
    args.options.causal = c.causal;

    const AttentionPlan plan = plan_attention(ctx, args);
    MESSAGE("adopted plan: path " << std::string(plan.path) << ", splits " << plan.splits << ", workspace "
                                  << plan.workspace_bytes << " bytes");
    if (expect_split) CHECK_MESSAGE(plan.splits > 1, "this case is meant to exercise the workspace");
    std::optional<Buffer> ws_buf;
    BufferSlice workspace;
    if (plan.workspace_bytes > 0) {
      const AppBuffer ws_app = app.create_buffer(plan.workspace_bytes);
      ws_buf.emplace(Buffer::wrap(ctx, ws_app.buffer, 0, ws_app.size));
      workspace = {&*ws_buf, 0};
    }

    // Four runs: recorded into the application's command buffer, the convenience call on the adopted
    // device's queue, and the same two through a call prepared once.
    const PreparedAttention prepared(ctx, AttentionSpec::of(args));
    CHECK(prepared.workspace_bytes() == plan.workspace_bytes);
    for (const char* how : {"record_attention", "attention", "PreparedAttention::record", "PreparedAttention::run"}) {
      CAPTURE(how);
      const std::string mode = how;
      std::memset(out_app.mapped, 0xFF, out_app.size);
      std::memset(lse_app.mapped, 0xFF, lse_app.size);
      if (mode == "record_attention" || mode == "PreparedAttention::record") {
        auto begin = vk_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
        begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
        REQUIRE(vkBeginCommandBuffer(app.cmd(), &begin) == VK_SUCCESS);
        if (mode == "record_attention")
          record_attention(ctx, app.cmd(), args, workspace);
        else
          prepared.record(app.cmd(), AttentionBuffers::of(args), workspace);
        // The application's side of the contract: order vkattn's writes before its host reads.
        auto barrier = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
        barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
        barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
        vkCmdPipelineBarrier(app.cmd(), VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                             &barrier, 0, nullptr, 0, nullptr);
        REQUIRE(vkEndCommandBuffer(app.cmd()) == VK_SUCCESS);
        app.submit_and_wait();
      } else if (mode == "attention") {
        attention(ctx, args);
      } else {
        prepared.run(AttentionBuffers::of(args));
      }

      const auto* bytes = static_cast<const uint8_t*>(out_app.mapped);
      std::size_t guard_changed = 0;
      for (VkDeviceSize i = 0; i < out_app.size; ++i) {
        if ((i < out_offset || i >= out_offset + out_bytes) && bytes[i] != 0xFF) ++guard_changed;
      }
      CHECK_MESSAGE(guard_changed == 0, guard_changed << " bytes around the wrapped out range were written");
      std::vector<float> out(static_cast<std::size_t>(out_layout.element_count()));
      decode(c.dtype, bytes + out_offset, out.data(), out.size());
      std::vector<float> lse(static_cast<std::size_t>(lse_bytes / 4));
      std::memcpy(lse.data(), lse_app.mapped, lse_bytes);
      compare_with_reference(ref, out, lse, v_scale, c.dtype);
      app.expect_no_messages();
    }
  }
  app.expect_no_messages();
}

}  // namespace

TEST_SUITE("adoption") {
  TEST_CASE("adopted device: split-KV decode with a workspace, recorded into the caller's command buffer") {
    VulkanApp app;
    if (app.validation()) {
      // The application's messenger works: an invalid call (size 0) is reported, and not passed on.
      auto info = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
      info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
      VkBuffer buffer = VK_NULL_HANDLE;
      if (vkCreateBuffer(app.device(), &info, nullptr, &buffer) == VK_SUCCESS && buffer)
        vkDestroyBuffer(app.device(), buffer, nullptr);
      CHECK_MESSAGE(!app.take_messages().empty(), "the adoption test's own messenger reports nothing");
    } else {
      MESSAGE("the validation layer is not installed or --no-validation was given: adopted device unchecked");
    }
    AdoptCase c;
    c.heads = 4;
    c.kv_heads = 2;
    c.seq_q = 1;
    c.seq_k = 8192;
    c.dim = 64;
    c.seed = case_seed(6000);
    run_adopted(app, c, true);
  }

  TEST_CASE("adopted device: a problem without splits, f16, causal bottom-right") {
    VulkanApp app;
    AdoptCase c;
    c.dtype = app.storage_16bit() ? DType::f16 : DType::f32;
    c.batch = 2;
    c.heads = 3;
    c.kv_heads = 1;
    c.seq_q = 33;
    c.seq_k = 50;
    c.dim = 40;
    c.causal = Causal::bottom_right;
    c.seed = case_seed(6001);
    run_adopted(app, c, false);
  }
}

TEST_SUITE("adoption") {
  TEST_CASE("adopted device without 16-bit storage: f16 is refused by name, f32 still runs") {
    VulkanApp app;
    AdoptedDevice lent = app.adopted();
    lent.storage_16bit_enabled = false;  // vkattn must use only what the application says it enabled
    Context ctx = Context::adopt(lent, adopt_options());
    CHECK_FALSE(ctx.device_info().supports_f16());
    // Subgroup size control was not marked enabled (AdoptedDevice::subgroup_size_control_enabled):
    // no pipeline may require a size, whatever the device offers.
    CHECK_FALSE(ctx.device_info().required_subgroup_size);
    lent.shader_int64_enabled = false;
    CHECK_FALSE(Context::adopt(lent, adopt_options()).device_info().shader_int64);
    Buffer buffer = Buffer::allocate(ctx, 4096);
    AttentionArgs args;
    args.q = {&buffer, TensorLayout::bhsd(DType::f16, 1, 1, 4, 16)};
    args.k = {&buffer, TensorLayout::bhsd(DType::f16, 1, 1, 4, 16)};
    args.v = {&buffer, TensorLayout::bhsd(DType::f16, 1, 1, 4, 16)};
    Buffer out = Buffer::allocate(ctx, 4096);
    args.out = {&out, TensorLayout::bhsd(DType::f16, 1, 1, 4, 16)};
    // Refused for what the device (as the application set it up) offers, not for the arguments.
    const ThrownError e = thrown_error([&] { attention(ctx, args); });
    INFO("message: " << e.message);
    CHECK(contains(e.message, "dtype"));
    CHECK(contains(e.message, "f16"));
    CHECK(e.code == code_name(ErrorCode::unsupported));
    const ThrownError layer = thrown_error([&] { MultiHeadAttention l(ctx, constant_mha_weights(), DType::f16); });
    INFO("layer: " << layer.message);
    CHECK(contains(layer.message, "storageBuffer16BitAccess"));
    CHECK(layer.code == code_name(ErrorCode::unsupported));

    for (TensorRef* t : {&args.q, &args.k, &args.v, &args.out}) t->layout.dtype = DType::f32;
    buffer.fill(0);
    CHECK_NOTHROW(attention(ctx, args));
    std::vector<float> result(64);
    out.download(result.data(), result.size() * 4);
    for (const float x : result) CHECK(x == 0.0f);  // V is all zero
    app.expect_no_messages();
  }

  TEST_CASE("adopted device: options for a device of vkattn's own are refused by name; kernel and cache file apply") {
    VulkanApp app;
    const std::vector<std::pair<std::string, std::function<void(ContextOptions&)>>> not_for_adopted = {
        {"ContextOptions::device", [](ContextOptions& o) { o.device.push_back('0'); }},
        {"ContextOptions::validation", [](ContextOptions& o) { o.validation = true; }},
        {"ContextOptions::synchronization_validation", [](ContextOptions& o) { o.synchronization_validation = true; }},
        {"ContextOptions::on_validation_message",
         [](ContextOptions& o) { o.on_validation_message = [](const std::string&) {}; }}};
    for (const auto& [field, set] : not_for_adopted) {
      ContextOptions options = adopt_options();
      set(options);
      const ThrownError e = thrown_error([&] { Context ctx = Context::adopt(app.adopted(), options); });
      INFO(field << ": " << e.message);
      CHECK(contains(e.message, field));
      CHECK(e.code == code_name(ErrorCode::invalid_argument));
    }

    TempDir dir;
    ContextOptions options;
    options.kernel = kernel_variant() == KernelVariant::tiled ? KernelVariant::rowwise : KernelVariant::tiled;
    options.pipeline_cache_file = dir.file("adopted.cache");
    {
      Context ctx = Context::adopt(app.adopted(), options);
      CHECK(ctx.kernel_variant() == options.kernel);
      CHECK_FALSE(ctx.pipeline_cache_loaded());
      CHECK(contains(ctx.pipeline_cache_note(), "no pipeline cache file"));
      ctx.save_pipeline_cache(options.pipeline_cache_file);
    }
    Context again = Context::adopt(app.adopted(), options);
    CHECK_MESSAGE(again.pipeline_cache_loaded(), again.pipeline_cache_note());
    CHECK(contains(again.pipeline_cache_note(), "loaded"));
    app.expect_no_messages();
  }
}
