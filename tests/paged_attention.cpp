// Attention over a paged KV cache (PreparedPagedAttention) against the fp64 reference: the
// conformance catalog's paged cases on the shared Context's kernel (ctest runs this suite once per
// fused kernel), the long case on lavapipe's loop limit, and the refusals that need a device.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "attention_plan.hpp"
#include "command_buffer.hpp"
#include "conform/catalog.hpp"
#include "shader_abi.hpp"
#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

// The paged cases run on the fused kernels only: the --path=unfused runs of a suite skip them.
void run_all(const std::vector<conform::PagedCase>& cases) {
  if (attention_path() == AttentionPath::unfused) return;
  for (const conform::PagedCase& c : cases) {
    if (!device_supports(c.dtype)) continue;
    INFO(conform::describe(c));
    const conform::PagedResult r = conform::run_paged_case(context(), c);
    INFO(r.plan);
    CHECK_MESSAGE(r.ok, r.text);
    expect_no_validation_messages();
  }
}

// v with its 32 bits in reverse order.
uint32_t reversed_bits(uint32_t v) {
  uint32_t r = 0;
  for (int k = 0; k < 32; ++k, v >>= 1) r = (r << 1) | (v & 1u);
  return r;
}

}  // namespace

TEST_SUITE("paged") {
  TEST_CASE("paged KV cache: page sizes, shared pages, appends, modifiers, every dtype") {
    run_all(conform::catalog_section("paged", base_seed()).paged_cases);
  }

  TEST_CASE("paged KV cache: q8_0 caches are sized in blocks, and their dims are whole blocks") {
    PagedAttentionLayouts l;
    l.q = TensorLayout::bhsd(DType::f16, 1, 2, 1, 32);
    l.k_cache = PagedKvLayout::dense(DType::f16, 4, 16, 1, 32, KvQuant::q8_0);  // 64 blocks: 2176 bytes
    l.v_cache = l.k_cache;
    l.max_pages = 4;
    l.out = l.q;
    const PreparedPagedAttention prepared(context(), l);
    Buffer q = Buffer::allocate(context(), 2 * 32 * 2), out = Buffer::allocate(context(), 2 * 32 * 2);
    Buffer cache = Buffer::allocate(context(), 2176), as_f16 = Buffer::allocate(context(), 2048);
    Buffer table = Buffer::allocate(context(), 16), lens = Buffer::allocate(context(), 4);
    PagedAttentionBuffers b;
    b.q = &q, b.k_cache = &cache, b.v_cache = &cache, b.out = &out;
    b.block_table = {&table, 0}, b.cache_lens = {&lens, 0};
    b.k_cache = &as_f16;  // large enough for 2048 f16 values, not for their blocks
    CHECK(contains(error_message([&] { prepared.run(b); }), "k_cache: needs 2176 bytes"));
    l.k_cache = l.v_cache = PagedKvLayout::dense(DType::f16, 4, 16, 1, 48, KvQuant::q8_0);
    l.q = l.out = TensorLayout::bhsd(DType::f16, 1, 2, 1, 48);
    CHECK(contains(error_message([&] { PreparedPagedAttention(context(), l); }), "must be a multiple of 32 for q8_0"));
    expect_no_validation_messages();
  }

  TEST_CASE("paged KV cache: an append to a q8_0 cache writes the bytes quantize_q8_0 writes") {
    // Rows whose rounding the random cases almost never reach: ties of x / d (d = 1 exactly: ggml
    // rounds them away from zero), a scale whose division and f16 rounding sit near a tie, a subnormal
    // f16 scale, all zeros (d = 0), and a row of the largest f16 values. Written between untouched
    // neighbours (a block shares a 32-bit word with the next at one end).
    constexpr int64_t kDim = 64, kRows = 5;
    std::vector<float> rows(kRows * kDim);
    for (int64_t i = 0; i < kDim; ++i) {
      const float t = static_cast<float>(i);
      rows[std::size_t(0 * kDim + i)] = i % 32 == 0 ? 127.0f : (i % 2 ? 1.0f : -1.0f) * (t / 2.0f - std::floor(t / 2.0f) + 0.5f + float(i % 7));
      rows[std::size_t(1 * kDim + i)] = (i % 32 == 0 ? 1.0f : 0.0f) + 0.00787401572f * t * (i % 2 ? 1.0f : -1.0f) / 3.0f;
      rows[std::size_t(2 * kDim + i)] = 1e-6f * (t - 31.5f);
      rows[std::size_t(3 * kDim + i)] = 0.0f;
      rows[std::size_t(4 * kDim + i)] = (i % 3 ? 65504.0f : -0.5f * 65504.0f) / float(1 + i % 5);
    }
    PagedAttentionLayouts l;
    l.q = TensorLayout::bhsd(DType::f32, 1, 1, 1, kDim);
    l.k_cache = l.v_cache = PagedKvLayout::dense(DType::f32, 2, 8, 1, kDim, KvQuant::q8_0);
    l.max_pages = 2;
    l.k_new = l.v_new = TensorLayout::bhsd(DType::f32, 1, 1, kRows, kDim);
    l.out = l.q;
    const PreparedPagedAttention prepared(context(), l);
    const std::size_t cache_bytes = std::size_t(l.k_cache.required_bytes());
    std::vector<uint8_t> before(cache_bytes);
    for (std::size_t i = 0; i < before.size(); ++i) before[i] = static_cast<uint8_t>(i * 37 + 11);
    Buffer q = Buffer::allocate(context(), kDim * 4), out = Buffer::allocate(context(), kDim * 4);
    Buffer k_cache = Buffer::allocate(context(), cache_bytes), v_cache = Buffer::allocate(context(), cache_bytes);
    Buffer k_new = Buffer::allocate(context(), rows.size() * 4), table = Buffer::allocate(context(), 8),
           lens = Buffer::allocate(context(), 4);
    const std::vector<float> q_values(kDim, 0.0f);
    const int32_t table_values[2] = {1, 0}, len = 6;  // tokens 6..10: across the page edge at 8
    q.upload(q_values.data(), kDim * 4);
    k_cache.upload(before.data(), cache_bytes);
    v_cache.upload(before.data(), cache_bytes);
    k_new.upload(rows.data(), rows.size() * 4);
    table.upload(table_values, 8);
    lens.upload(&len, 4);
    PagedAttentionBuffers b;
    b.q = &q, b.k_cache = &k_cache, b.v_cache = &v_cache, b.out = &out, b.k_new = &k_new, b.v_new = &k_new;
    b.block_table = {&table, 0}, b.cache_lens = {&lens, 0};
    prepared.run(b);
    std::vector<uint8_t> after(cache_bytes);
    k_cache.download(after.data(), cache_bytes);
    std::vector<uint8_t> want = before;
    const std::vector<uint8_t> blocks = quantize_q8_0(rows, kDim);
    const std::size_t row_bytes = std::size_t(q8_0_bytes(kDim));
    for (int64_t t = 0; t < kRows; ++t) {
      const int64_t token = len + t, page = table_values[token / 8], slot = token % 8;
      std::copy_n(blocks.begin() + std::ptrdiff_t(t) * std::ptrdiff_t(row_bytes), row_bytes,
                  want.begin() + std::ptrdiff_t((page * 8 + slot) * int64_t(row_bytes)));
    }
    for (std::size_t i = 0; i < cache_bytes; ++i) {
      INFO("byte " << i << " of the K cache (row " << i / row_bytes << ")");
      REQUIRE(int(after[i]) == int(want[i]));
    }
    expect_no_validation_messages();
  }

  TEST_CASE("paged KV cache: the splits follow each sequence's own keys (the work list built on the device)") {
    // The work list the call builds from cache_lens, read back from its workspace: the keys per item
    // by the documented rule (shader_abi.h, "Work lists"), each sequence's items just covering its
    // keys (appended tokens included, clamped to the table), none for an empty one, and the split
    // dispatch's grid the item count.
    if (attention_path() == AttentionPath::unfused) return;
    Context& ctx = context();
    constexpr int64_t kPage = 16, kMaxPages = 320, kCapacity = kPage * kMaxPages, kNew = 3;
    // One plan, three steps: keys per item from the target (mixed lengths), at the least (short
    // sequences) and at the most (every sequence full).
    const std::vector<std::vector<int32_t>> steps = {
        {300, 0, 3000, 17, 1024, -3, 1600, 1}, {2, 0, 40, 17, 5, 0, 1, 0}, std::vector<int32_t>(8, kCapacity)};
    const int64_t batch = 8;
    PagedAttentionLayouts l;
    l.q = TensorLayout::bhsd(DType::f32, batch, 2, 1, 32);
    l.k_cache = l.v_cache = PagedKvLayout::dense(DType::f32, 8, kPage, 1, 32);
    l.max_pages = kMaxPages;
    l.k_new = l.v_new = TensorLayout::bhsd(DType::f32, batch, 1, kNew, 32);
    l.out = l.q;
    const detail::PagedCall call = detail::plan_paged(ctx.device_info(), kernel_variant(), l);
    const PreparedPagedAttention prepared(ctx, l);
    REQUIRE(prepared.plan().splits == call.plan.splits);
    REQUIRE(prepared.workspace_bytes() == call.plan.workspace_bytes);
    REQUIRE_MESSAGE(call.plan.work_list.has_value(), "a paged call of " << call.plan.splits << " splits without a work list");
    const detail::WorkListPlan& w = *call.plan.work_list;
    CHECK(w.max_items == uint32_t(batch) * call.plan.splits);

    Buffer q = Buffer::allocate(ctx, uint64_t(l.q.required_elements()) * 4), out = Buffer::allocate(ctx, q.size());
    Buffer k_cache = Buffer::allocate(ctx, uint64_t(l.k_cache.required_bytes())), v_cache = Buffer::allocate(ctx, k_cache.size());
    Buffer fresh = Buffer::allocate(ctx, uint64_t(l.k_new->required_elements()) * 4);
    Buffer table = Buffer::allocate(ctx, uint64_t(batch * kMaxPages) * 4), lengths = Buffer::allocate(ctx, uint64_t(batch) * 4);
    Buffer workspace = Buffer::allocate(ctx, prepared.workspace_bytes());
    for (Buffer* b : {&q, &k_cache, &v_cache, &fresh}) b->fill(0);
    std::vector<int32_t> entries(std::size_t(batch * kMaxPages));
    for (std::size_t i = 0; i < entries.size(); ++i) entries[i] = int32_t(i % 8);
    table.upload(entries.data(), entries.size() * 4);
    std::vector<uint64_t> chunks;
    for (const std::vector<int32_t>& lens : steps) {
    workspace.fill(0xff);
    lengths.upload(lens.data(), lens.size() * 4);
    PagedAttentionBuffers b;
    b.q = &q, b.k_cache = &k_cache, b.v_cache = &v_cache, b.out = &out, b.k_new = &fresh, b.v_new = &fresh;
    b.block_table = {&table, 0}, b.cache_lens = {&lengths, 0};
    TestCommandBuffer cb(ctx);
    prepared.record(cb.cmd(), b, {&workspace, 0});
    cb.submit_and_wait();
    std::vector<uint32_t> words(w.words);
    workspace.download(words.data(), w.words * 4, w.offset);

    std::vector<uint64_t> keys;
    uint64_t total = 0;
    for (const int32_t n : lens) total += keys.emplace_back(uint64_t(std::clamp<int64_t>(n + kNew, 0, kCapacity)));
    const uint64_t granule = call.plan.config.keys_per_tile, most = call.plan.keys_per_split;
    uint64_t chunk = std::min<uint64_t>((total + w.target_items - 1) / w.target_items, most);
    chunk = std::clamp<uint64_t>((chunk + granule - 1) / granule * granule, w.min_keys, most);
    INFO("total keys " << total << ", target " << w.target_items << " items, min " << w.min_keys << ", max " << most);
    REQUIRE(words[WORK_LIST_CHUNK] == chunk);
    const uint32_t offsets = WORK_LIST_ITEMS + w.max_items;
    std::vector<uint32_t> items;  // in list order
    for (int64_t s = 0; s < batch; ++s) {
      INFO("sequence " << s << ": " << keys[std::size_t(s)] << " keys");
      const uint32_t n = uint32_t((keys[std::size_t(s)] + chunk - 1) / chunk);
      REQUIRE(words[offsets + uint32_t(s)] == items.size());
      for (uint32_t k = 0; k < n; ++k) items.push_back((uint32_t(s) << 16) | k);
    }
    const uint32_t item = uint32_t(items.size());
    CHECK(item <= w.max_items);
    CHECK(words[offsets + uint32_t(batch)] == item);
    CHECK(words[WORK_LIST_OFFSETS] == offsets);
    // The grid runs the items in bit-reversed order of their index: sorted by it, here.
    std::vector<uint32_t> order(items.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [](uint32_t a, uint32_t b) { return reversed_bits(a) < reversed_bits(b); });
    for (uint32_t z = 0; z < item; ++z) CHECK(words[WORK_LIST_ITEMS + z] == items[order[z]]);
    const uint32_t groups_y = 1;  // (one KV head, its GQA group packed or in one workgroup's heads)
    for (const uint32_t args : {WORK_LIST_ARGS, WORK_LIST_LAST_ARGS}) {
      CHECK(words[args + 2] == item);
      CHECK(words[args + 1] == groups_y * uint32_t(2) / std::max<uint32_t>(call.plan.config.heads_per_workgroup(2), 1));
    }
    chunks.push_back(chunk);
    }
    // (The three steps reach the three cases of the rule.)
    CHECK(chunks[0] > w.min_keys);
    CHECK(chunks[0] < call.plan.keys_per_split);
    CHECK(chunks[1] == w.min_keys);
    CHECK(chunks[2] == call.plan.keys_per_split);
    expect_no_validation_messages();
  }

  TEST_CASE("paged KV cache: buffers that do not fit are refused, naming them") {
    PagedAttentionLayouts l;
    l.q = TensorLayout::bhsd(DType::f32, 2, 2, 1, 32);
    l.k_cache = PagedKvLayout::dense(DType::f32, 4, 16, 1, 32);
    l.v_cache = l.k_cache;
    l.max_pages = 2;
    l.out = l.q;
    const PreparedPagedAttention prepared(context(), l);
    Buffer q = Buffer::allocate(context(), 2 * 2 * 32 * 4), out = Buffer::allocate(context(), 2 * 2 * 32 * 4);
    Buffer cache = Buffer::allocate(context(), 4 * 16 * 32 * 4), small = Buffer::allocate(context(), 16);
    Buffer table = Buffer::allocate(context(), 16), lens = Buffer::allocate(context(), 8);
    PagedAttentionBuffers b;
    b.q = &q, b.k_cache = &cache, b.v_cache = &cache, b.out = &out;
    b.block_table = {&table, 0}, b.cache_lens = {&lens, 0};
    CHECK_NOTHROW(prepared.run(b));  // the caches may share a buffer: they are only read
    b.v_cache = &small;
    CHECK(contains(error_message([&] { prepared.run(b); }), "v_cache: needs 8192 bytes"));
    b.v_cache = &cache;
    b.block_table = {&lens, 0};
    CHECK(contains(error_message([&] { prepared.run(b); }), "block_table: needs 16 bytes"));
    b.block_table = {&table, 0};
    b.out = &cache;
    CHECK(contains(error_message([&] { prepared.run(b); }), "out overlaps k_cache"));
    b.out = &out;
    b.lse = {&small, 0};
    CHECK(contains(error_message([&] { prepared.run(b); }), "lse: given, but the call was prepared without it"));
    expect_no_validation_messages();
  }
}

TEST_SUITE("long") {
  TEST_CASE("paged KV cache: 65,536 keys in pages of 16, with an append") { run_all(conform::catalog_section("long-paged", base_seed()).paged_cases); }
}
