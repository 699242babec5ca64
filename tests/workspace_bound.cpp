// The fused path's workspace is bounded (fused_workspace_budget, attention.hpp): split-KV partials
// are produced and merged one range of query tiles at a time, reusing one workspace, instead of for
// every query row at once (which grew as seq_q x splits, and splits grow with seq_k). The same ranges
// keep the grid's x dimension within maxComputeWorkGroupCount[0].
//
// Plans are checked without dispatching anything; the real cases are chosen so that lavapipe's plan
// has several ranges under both kernel variants (the split partials of all query tiles exceed the
// budget) while the work stays small: key padding or a causal limit leaves most splits without a
// visible key, so those workgroups return at once. dim_v 256 gives the most partial bytes per unit
// of work; one (dim_qk, dim_v) pair keeps lavapipe's JIT to a few pipelines.
#include <doctest/doctest.h>

#include <vulkan/vulkan.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "attention_case.hpp"
#include "guarded_buffer.hpp"
#include "support.hpp"
#include "vulkan_app.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

constexpr int64_t kDimQk = 8, kDimV = 256;
// The grid tests need maxComputeWorkGroupCount[0] x rows-per-tile + 1 query rows: 2 or 1 million
// on lavapipe (65535), more than is worth allocating on GPUs (2^31 - 1).
constexpr int64_t kMaxGridRows = int64_t(1) << 22;

// The bound plan_attention promises for the fused path on this device.
uint64_t workspace_bound() {
  return std::min(fused_workspace_budget, context().device_info().max_storage_buffer_range);
}

MaskType mask_type(MaskKind kind) {
  return kind == MaskKind::boolean ? MaskType::boolean : kind == MaskKind::f32 ? MaskType::f32 : MaskType::f16;
}

// Bytes of the largest tensor of `c` (q, k, v, out or mask) in bhsd / bshd layout.
uint64_t largest_tensor_bytes(const AttentionCase& c) {
  const uint64_t e = dtype_size(c.dtype);
  uint64_t bytes = std::max({uint64_t(c.batch * c.heads * c.seq_q * std::max(c.dim_qk, c.dim_v)) * e,
                             uint64_t(c.batch * c.kv_heads * c.seq_k * std::max(c.dim_qk, c.dim_v)) * e,
                             uint64_t(c.batch * c.heads * c.seq_q) * 4 + 64});
  if (c.mask != MaskKind::none)
    bytes = std::max(bytes, uint64_t(c.mask_batch * c.mask_heads * c.seq_q * c.seq_k) * mask_type_size(mask_type(c.mask)));
  return bytes;
}

// The fused-path plan of `c` on the shared Context, made against one buffer that every input shares
// and one per output (an output may not overlap another argument): plan_attention only checks extents
// against them, and nothing is dispatched.
AttentionPlan plan_of(const AttentionCase& c) {
  const auto layout = [&](int64_t heads, int64_t seq, int64_t dim) {
    return c.layout == LayoutKind::bshd ? TensorLayout::bshd(c.dtype, c.batch, seq, heads, dim)
                                        : TensorLayout::bhsd(c.dtype, c.batch, heads, seq, dim);
  };
  REQUIRE(c.layout != LayoutKind::padded);
  Buffer shared = Buffer::allocate(context(), largest_tensor_bytes(c));
  AttentionArgs a;
  a.q = {&shared, layout(c.heads, c.seq_q, c.dim_qk)};
  a.k = {&shared, layout(c.kv_heads, c.seq_k, c.dim_qk)};
  a.v = {&shared, layout(c.kv_heads, c.seq_k, c.dim_v)};
  Buffer out = Buffer::allocate(context(), largest_tensor_bytes(c));
  Buffer lse = Buffer::allocate(context(), uint64_t(c.batch * c.heads * c.seq_q) * 4);
  a.out = {&out, layout(c.heads, c.seq_q, c.dim_v)};
  if (c.lse) a.lse = {&lse};
  if (!c.kv_lengths.empty()) a.kv_lengths = {&shared};
  if (c.mask != MaskKind::none)
    a.mask = {&shared, MaskLayout::dense(mask_type(c.mask), c.mask_batch, c.mask_heads, c.seq_q, c.seq_k)};
  a.options.causal = c.causal;
  a.path = AttentionPath::fused;
  return plan_attention(context(), a);
}

// Split-KV partial bytes (O and LSE) of every query row at once: the workspace before query-tile ranges.
uint64_t unranged_partial_bytes(const AttentionCase& c, const AttentionPlan& plan) {
  if (plan.splits <= 1) return 0;
  return uint64_t(plan.splits) * uint64_t(c.batch * c.heads * c.seq_q) * uint64_t(c.dim_v + 2) * 4;
}

// Checks that the plan of `c` stays within the bound and, on lavapipe (which splits every few
// thousand keys; a GPU splits only for parallelism, so not these cases), that it is cut into several
// ranges of query tiles. Every tensor of these cases fits one binding and the grid's y and z, so the
// plan's chunks (its attention dispatches) are its query-tile ranges.
void check_ranged_plan(const AttentionCase& c) {
  const AttentionPlan plan = plan_of(c);
  INFO("plan: " << std::string(plan.kernel) << " " << plan.rows_per_workgroup << " rows/workgroup, " << plan.splits << " splits of "
                << plan.keys_per_split << " keys, " << plan.chunks << " dispatches, workspace " << plan.workspace_bytes);
  CHECK(plan.workspace_bytes <= workspace_bound());
  if (!context().device_info().is_llvmpipe) {
    MESSAGE("not lavapipe: this case's plan has " << plan.splits << " splits and " << plan.chunks << " dispatches here");
    return;
  }
  if (std::string(plan.kernel) == "subgroup") {
    // Its key loop counts about 1.25 iterations per key against lavapipe's limit (the others 10 to
    // 50), so it splits only every 20,000 to 38,000 keys: these shapes are not ranged under it. The
    // ranges themselves are the same host code for every variant, checked by the tiled and rowwise runs.
    MESSAGE("subgroup kernel: this case's plan has " << plan.splits << " splits and " << plan.chunks << " dispatches");
    return;
  }
  if (std::string(plan.kernel) == "tiled" && unranged_partial_bytes(c, plan) <= workspace_bound()) {
    // The tiled kernel counts about 2 to 8 loop iterations per key against lavapipe's limit (scores
    // and weights are formed TPR keys per iteration): it splits these shapes little or not at all. The ranges are the
    // same host code for every variant, checked by the rowwise runs.
    MESSAGE("tiled kernel: this case's plan has " << plan.splits << " splits and " << plan.chunks << " dispatches");
    return;
  }
  REQUIRE(largest_tensor_bytes(c) + 256 < context().device_info().max_storage_buffer_range);
  CHECK(plan.splits > 1);
  CHECK(unranged_partial_bytes(c, plan) > workspace_bound());  // without ranges it would not fit
  // Each range's partials fit the bound, so there are at least this many ranges.
  const uint64_t min_ranges = (unranged_partial_bytes(c, plan) + workspace_bound() - 1) / workspace_bound();
  CHECK(plan.chunks >= std::max<uint64_t>(2, min_ranges));
}

// The real cases: each is a fused-path property, so the three-stage path's run of the suite (which
// would also materialise P, Sq x Sk floats) skips them.
bool fused_only() {
  if (attention_path() == AttentionPath::unfused) {
    MESSAGE("skipped: query-tile ranges are a fused-path plan (this run forces the unfused path)");
    return false;
  }
  return true;
}

void run_ranged(const std::vector<AttentionCase>& cases) {
  if (!fused_only()) return;
  for (const AttentionCase& c : cases) {
    INFO("case: " << describe(c));
    check_ranged_plan(c);
  }
  run_cases(context(), cases);
}

AttentionCase ranged_case(DType dtype, int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_k,
                          uint64_t n) {
  AttentionCase c;
  c.dtype = dtype;
  c.batch = batch;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.seq_q = seq_q;
  c.seq_k = seq_k;
  c.dim_qk = kDimQk;
  c.dim_v = kDimV;
  c.seed = case_seed(9600 + n);
  return c;
}

// A command buffer of the shared Context's queue family, for record_attention.
struct OneShot {
  VkDevice device = VK_NULL_HANDLE;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;

  explicit OneShot(Context& ctx) : device(ctx.vk_device()) {
    auto pool_info = vk_struct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pool_info.queueFamilyIndex = ctx.queue_family_index();
    REQUIRE(vkCreateCommandPool(device, &pool_info, nullptr, &pool) == VK_SUCCESS);
    auto alloc = vk_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    alloc.commandPool = pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    REQUIRE(vkAllocateCommandBuffers(device, &alloc, &cmd) == VK_SUCCESS);
    auto fence_info = vk_struct<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
    REQUIRE(vkCreateFence(device, &fence_info, nullptr, &fence) == VK_SUCCESS);
  }
  ~OneShot() {
    if (fence) vkDestroyFence(device, fence, nullptr);
    if (pool) vkDestroyCommandPool(device, pool, nullptr);
  }
  OneShot(const OneShot&) = delete;
  OneShot& operator=(const OneShot&) = delete;
};

}  // namespace

TEST_SUITE("long") {
  TEST_CASE("fused workspace within fused_workspace_budget at seq 8192, 16384 and 65536 (plans only)") {
    // The bench's shape (dim 64, f32) and a GQA f16 one, self-attention, cross-attention and decode;
    // tensors share one buffer (plan_attention dispatches nothing).
    struct Shape {
      DType dtype;
      int64_t heads, kv_heads, dim;
      Causal causal;
    };
    uint64_t case_number = 0;
    for (const int64_t seq : {8192, 16384, 65536}) {
      for (const Shape s : {Shape{DType::f32, 8, 8, 64, Causal::none}, Shape{DType::f16, 8, 2, 128, Causal::bottom_right}}) {
        if (!device_supports(s.dtype)) continue;
        for (const auto& [seq_q, seq_k] : {std::pair{seq, seq}, std::pair{seq, seq / 4}, std::pair{int64_t(1), seq}}) {
          AttentionCase c = ranged_case(s.dtype, 1, s.heads, s.kv_heads, seq_q, seq_k, 100 + case_number++);
          c.dim_qk = c.dim_v = s.dim;
          c.causal = s.causal;
          const AttentionPlan plan = plan_of(c);
          INFO("case: " << describe(c) << "; plan: " << std::string(plan.kernel) << ", " << plan.splits << " splits, " << plan.chunks
                        << " dispatches, workspace " << plan.workspace_bytes);
          CHECK(plan.workspace_bytes <= workspace_bound());
          // Where the partials of all rows would not fit, the query tiles are cut into ranges.
          if (unranged_partial_bytes(c, plan) > workspace_bound()) CHECK(plan.chunks > 1);
        }
      }
    }
    // On lavapipe (a split every ~1000 keys) the bound is what makes the long self-attention run:
    // 65536 rows x 8 heads x 54 splits (rowwise) x 65 floats would be about 7 GB of partials.
    if (context().device_info().is_llvmpipe) {
      const AttentionCase c = ranged_case(DType::f32, 1, 8, 8, 65536, 65536, 99);
      const AttentionPlan plan = plan_of(c);
      CHECK(plan.splits > 1);
      CHECK(unranged_partial_bytes(c, plan) > 8 * workspace_bound());
    }
  }

  TEST_CASE("one query tile of one GQA group beyond the budget: the workspace holds that tile (plan only)") {
    // MQA with 16 heads: a chunk is never less than a whole GQA group (its heads share K and V), and
    // a range never less than one query tile, so on lavapipe (67 splits) this plan's workspace is one
    // tile of all 16 heads — independent of seq_q, linear in seq_k.
    AttentionCase c = ranged_case(DType::f32, 1, 16, 1, 1024, 32768, 300);
    const AttentionPlan plan = plan_of(c);
    INFO("case: " << describe(c) << "; plan: " << plan.splits << " splits, " << plan.chunks << " dispatches, workspace "
                  << plan.workspace_bytes);
    const uint64_t alignment = std::max<uint64_t>(context().device_info().min_storage_buffer_offset_alignment, 16);
    const uint64_t one_tile = uint64_t(plan.splits) * c.heads * plan.rows_per_workgroup * (c.dim_v + 2) * 4;
    CHECK(plan.workspace_bytes <= std::max(workspace_bound(), one_tile + 2 * alignment));
    if (one_tile > workspace_bound()) {
      CHECK(plan.workspace_bytes >= one_tile);
      CHECK(plan.chunks == (c.seq_q + plan.rows_per_workgroup - 1) / plan.rows_per_workgroup);  // a range per tile
    }
    c.seq_q *= 4;
    if (one_tile > workspace_bound()) {
      CHECK(plan_of(c).workspace_bytes == plan.workspace_bytes);  // the same workspace for 4x the rows
    } else {
      // Below the budget the workspace follows the output's size: at most a quarter of O in f32,
      // rounded to whole query tiles.
      const uint64_t o_f32_bytes = uint64_t(c.heads * c.seq_q * c.dim_v) * 4;
      CHECK(plan_of(c).workspace_bytes <= std::max(one_tile, o_f32_bytes / 4) + 2 * alignment);
    }
  }

  TEST_CASE("below the budget the fused workspace grows with the output, not with seq_q x seq_k (plans only)") {
    // Self-attention doubling from 8192 to 65536 (B1 H2 dim 64): on lavapipe the splits double with
    // the keys, so unranged partials would grow 4x per doubling; the workspace stays within a
    // quarter of O's size in f32 (1 MiB at 8192, above the 4x-target-workgroups floor), so it grows
    // 2x per doubling, like the tensors.
    const uint64_t alignment = std::max<uint64_t>(context().device_info().min_storage_buffer_offset_alignment, 16);
    for (int64_t seq = 8192; seq <= 65536; seq *= 2) {
      AttentionCase c = ranged_case(DType::f32, 1, 2, 2, seq, seq, 400 + uint64_t(seq));
      const AttentionPlan plan = plan_of(c);
      INFO("case: " << describe(c) << "; plan: " << plan.splits << " splits, " << plan.chunks << " dispatches, workspace "
                    << plan.workspace_bytes);
      const uint64_t o_f32_bytes = uint64_t(c.heads * c.seq_q * c.dim_v) * 4;
      CHECK(plan.workspace_bytes <= std::min(workspace_bound(), o_f32_bytes / 4 + 2 * alignment));
    }
  }

  TEST_CASE("query-tile ranges past maxComputeWorkGroupCount[0] with split-KV (plan only)") {
    // One more query tile than the grid's x dimension holds, and enough keys to split on lavapipe.
    AttentionCase c = ranged_case(DType::f16, 1, 1, 1, 1, 65536, 200);
    if (!device_supports(c.dtype)) c.dtype = DType::f32;
    c.dim_qk = 1;
    c.dim_v = 8;
    c.seq_q = 64;
    const uint32_t rows = plan_of(c).rows_per_workgroup;
    c.seq_q = int64_t(context().device_info().max_workgroup_count[0]) * rows + 1;
    if (c.seq_q > kMaxGridRows) {
      MESSAGE("skipped: maxComputeWorkGroupCount[0] x " << rows << " rows is more than this test allocates");
      return;
    }
    const AttentionPlan plan = plan_of(c);
    INFO("case: " << describe(c) << "; plan: " << plan.splits << " splits, " << plan.chunks << " dispatches");
    REQUIRE(plan.rows_per_workgroup == rows);
    CHECK(plan.chunks >= 2);
    CHECK(plan.workspace_bytes <= workspace_bound());
  }

  TEST_CASE("query-tile ranges: key padding with a fully masked batch, MQA, LSE, bshd") {
    AttentionCase c = ranged_case(DType::f32, 2, 4, 1, 600, 32768, 1);
    c.layout = LayoutKind::bshd;
    c.kv_lengths = {1000, 0};
    c.lse = true;
    run_ranged({c});
  }

  TEST_CASE("query-tile ranges: boolean, f32 and f16 masks with causal top-left, GQA, f16 and f32") {
    std::vector<AttentionCase> cases;
    for (const MaskKind kind : {MaskKind::boolean, MaskKind::f32, MaskKind::f16}) {
      AttentionCase c = ranged_case(kind == MaskKind::f32 ? DType::f32 : DType::f16, 1, 16, 2, 270, 32768,
                                    2 + static_cast<uint64_t>(kind));
      c.mask = kind;
      c.causal = Causal::top_left;  // rows see at most 270 keys: most splits have none
      c.mask_blank_rows = {3, 200};  // fully masked rows (O 0, LSE -inf) through the combine
      cases.push_back(c);
    }
    run_ranged(cases);
  }

  TEST_CASE("query-tile ranges: causal bottom-right with seq_q > seq_k, key padding") {
    // Rows below seq_q - seq_k see no key (O 0, LSE -inf): the causal alignment must use the global
    // row and the full seq_q in every range, not the range's rows.
    AttentionCase c = ranged_case(DType::f32, 1, 1, 1, 16380, 8192, 5);
    c.causal = Causal::bottom_right;
    c.kv_lengths = {300};
    run_ranged({c});
  }

  TEST_CASE("query-tile ranges without splits: more query tiles than maxComputeWorkGroupCount[0]") {
    if (!fused_only()) return;
    AttentionCase c = ranged_case(DType::f16, 1, 1, 1, 64, 3, 6);
    if (!device_supports(c.dtype)) c.dtype = DType::f32;
    c.dim_qk = 1;
    c.dim_v = 8;
    const AttentionPlan probe = plan_of(c);
    c.seq_q = int64_t(context().device_info().max_workgroup_count[0]) * probe.rows_per_workgroup + 1;
    if (c.seq_q > kMaxGridRows) {
      MESSAGE("skipped: maxComputeWorkGroupCount[0] x " << probe.rows_per_workgroup << " rows is more than this test runs");
      return;
    }
    const AttentionPlan plan = plan_of(c);
    INFO("case: " << describe(c) << "; plan: " << plan.splits << " splits, " << plan.chunks << " dispatches");
    REQUIRE(plan.splits == 1);
    CHECK(plan.chunks == 2);
    // No partials; the subgroup kernel's careful pass keeps 16 bytes per workgroup of a range.
    if (std::string(plan.kernel) == "subgroup")
      CHECK(plan.workspace_bytes <= uint64_t(context().device_info().max_workgroup_count[0]) * 16 + 3 * 256);
    else
      CHECK(plan.workspace_bytes == 0);
    // The reference is the slow part: rows around the range boundary, and the ends.
    const int64_t boundary = int64_t(context().device_info().max_workgroup_count[0]) * probe.rows_per_workgroup;
    c.reference_rows = {0, 1, boundary - 1, boundary, c.seq_q - 1};
    run_cases(context(), {c});
  }

  TEST_CASE("record_attention with a workspace of exactly plan.workspace_bytes across query-tile ranges") {
    // The caller's workspace slice starts 4 bytes into a guarded buffer and holds exactly
    // workspace_bytes: what the plan reports must cover every range's bindings (a guard byte after it
    // must survive), and the result must be attention()'s, bitwise.
    if (!fused_only()) return;
    AttentionCase c = ranged_case(DType::f32, 1, 16, 2, 270, 32768, 7);
    c.kv_lengths = {700};
    check_ranged_plan(c);
    Context& ctx = context();
    std::mt19937_64 rng(c.seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const auto random_buffer = [&](const TensorLayout& l) {
      std::vector<float> x(static_cast<std::size_t>(l.element_count()));
      for (float& e : x) e = dist(rng);
      Buffer b = Buffer::allocate(ctx, x.size() * 4);
      b.upload(x.data(), x.size() * 4);
      return b;
    };
    const TensorLayout ql = TensorLayout::bhsd(DType::f32, 1, c.heads, c.seq_q, kDimQk);
    const TensorLayout kl = TensorLayout::bhsd(DType::f32, 1, c.kv_heads, c.seq_k, kDimQk);
    const TensorLayout vl = TensorLayout::bhsd(DType::f32, 1, c.kv_heads, c.seq_k, kDimV);
    const TensorLayout ol = TensorLayout::bhsd(DType::f32, 1, c.heads, c.seq_q, kDimV);
    Buffer q = random_buffer(ql), k = random_buffer(kl), v = random_buffer(vl);
    const int32_t kv_length = c.kv_lengths[0];
    Buffer kv = Buffer::allocate(ctx, 4);
    kv.upload(&kv_length, 4);
    const uint64_t out_bytes = uint64_t(ol.element_count()) * 4, lse_bytes = uint64_t(c.heads * c.seq_q) * 4;
    GuardedBuffer out_a(ctx, out_bytes), out_b(ctx, out_bytes), lse_a(ctx, lse_bytes), lse_b(ctx, lse_bytes);
    AttentionArgs args;
    args.q = {&q, ql};
    args.k = {&k, kl};
    args.v = {&v, vl};
    args.kv_lengths = {&kv};
    args.path = AttentionPath::fused;

    args.out = {&out_a.buffer(), ol};
    args.lse = {&lse_a.buffer()};
    attention(ctx, args);

    args.out = {&out_b.buffer(), ol};
    args.lse = {&lse_b.buffer()};
    const AttentionPlan plan = plan_attention(ctx, args);
    REQUIRE(plan.workspace_bytes > 0);
    constexpr uint64_t kSliceOffset = 4;  // unaligned: the plan's alignment slack is used
    GuardedBuffer workspace(ctx, kSliceOffset + plan.workspace_bytes);
    {
      OneShot shot(ctx);
      auto begin = vk_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
      begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
      REQUIRE(vkBeginCommandBuffer(shot.cmd, &begin) == VK_SUCCESS);
      // The caller's side of record_attention's contract: order earlier transfers (the uploads and
      // poison) before the kernels, and the kernels' writes before the downloads.
      auto before = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
      before.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
      before.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
      vkCmdPipelineBarrier(shot.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &before,
                           0, nullptr, 0, nullptr);
      record_attention(ctx, shot.cmd, args, {&workspace.buffer(), kSliceOffset});
      auto after = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
      after.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
      after.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT;
      vkCmdPipelineBarrier(shot.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                           VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &after, 0, nullptr, 0,
                           nullptr);
      REQUIRE(vkEndCommandBuffer(shot.cmd) == VK_SUCCESS);
      auto submit = vk_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
      submit.commandBufferCount = 1;
      submit.pCommandBuffers = &shot.cmd;
      REQUIRE(vkQueueSubmit(ctx.vk_queue(), 1, &submit, shot.fence) == VK_SUCCESS);
      REQUIRE(vkWaitForFences(ctx.vk_device(), 1, &shot.fence, VK_TRUE, UINT64_MAX) == VK_SUCCESS);
    }
    workspace.download_checked("workspace");
    const std::vector<uint8_t> oa = out_a.download_checked("out"), ob = out_b.download_checked("out (recorded)");
    const std::vector<uint8_t> la = lse_a.download_checked("lse"), lb = lse_b.download_checked("lse (recorded)");
    CHECK(std::memcmp(oa.data(), ob.data(), oa.size()) == 0);
    CHECK(std::memcmp(la.data(), lb.data(), la.size()) == 0);
    // Every row sees keys here: no NaN (the poison) may be left.
    std::vector<float> values(oa.size() / 4);
    std::memcpy(values.data(), oa.data(), oa.size());
    CHECK(std::all_of(values.begin(), values.end(), [](float x) { return std::isfinite(x); }));
    expect_no_validation_messages();
  }
}

TEST_SUITE("representative") {
  // Several query-tile ranges sharing one workspace, for the synchronization-validation runs: the
  // next range's split dispatches overwrite partials the previous range's combine read.
  TEST_CASE("query-tile ranges sharing one workspace: key padding, MQA, f16") {
    AttentionCase c = ranged_case(DType::f16, 2, 8, 1, 270, 32768, 8);
    c.kv_lengths = {600, 0};
    run_ranged({c});
  }
}
