// Attention over a paged KV cache (PreparedPagedAttention) against the fp64 reference: the
// conformance catalog's paged cases on the shared Context's kernel (ctest runs this suite once per
// fused kernel), the long case on lavapipe's loop limit, and the refusals that need a device.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "conform/catalog.hpp"
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
