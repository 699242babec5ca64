// Attention over a paged KV cache (PreparedPagedAttention) against the fp64 reference: the
// conformance catalog's paged cases on the shared Context's kernel (ctest runs this suite once per
// fused kernel), the long case on lavapipe's loop limit, and the refusals that need a device.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "attention_record.hpp"
#include "command_buffer.hpp"
#include "conform/catalog.hpp"
#include "shader_abi.hpp"
#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

// The paged cases on the suite's path (--path=unfused: the three-stage path, but for the q8_0 and
// cascade cases, fused only).
void run_all(const std::vector<conform::ServingCase>& cases) {
  for (const conform::ServingCase& c : cases) {
    if (!device_supports(c.dtype) || !conform::why_not_on(c, attention_path()).empty()) continue;
    INFO(conform::describe(c));
    const conform::ServingResult r = conform::run_serving_case(context(), c, attention_path());
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


// The device's rule for bad values (vkattn/kv_cache.hpp, "Values outside the contract"), applied on
// the host: each cache length clamped into [0, capacity - seq_new], each table entry into
// [0, num_pages).
void clamp_paged_values(int64_t num_pages, int64_t capacity, int64_t seq_new, std::vector<int32_t>& table,
                        std::vector<int32_t>& lens) {
  for (int32_t& e : table) e = int32_t(std::clamp<int64_t>(e, 0, num_pages - 1));
  for (int32_t& n : lens) n = int32_t(std::clamp<int64_t>(n, 0, capacity - seq_new));
}

bool same_double(double want, double got) {
  if (std::isinf(want) || std::isinf(got)) return want == got;
  return std::abs(want - got) <= 1e-4 * (1.0 + std::abs(want));
}

// One paged call over bad cache lengths and table entries (issue 37), against the reference given the
// values clamped by the rule: O, LSE and, with an append, every element of both caches.
void check_bad_paged_values(const std::vector<int32_t>& table_in, const std::vector<int32_t>& lens_in, int64_t seq_new,
                            int num_splits) {
  constexpr int64_t kH = 2, kG = 1, kD = 32, kSeqQ = 2, kPage = 4, kPages = 16, kMaxPages = 3;
  const int64_t batch = int64_t(lens_in.size()), capacity = kPage * kMaxPages;
  PagedAttentionLayouts l;
  l.q = TensorLayout::bhsd(DType::f32, batch, kH, kSeqQ, kD);
  l.k_cache = l.v_cache = PagedKvLayout::dense(DType::f32, kPages, kPage, kG, kD);
  l.max_pages = kMaxPages;
  if (seq_new > 0) l.k_new = l.v_new = TensorLayout::bhsd(DType::f32, batch, kG, seq_new, kD);
  l.out = l.q;
  l.has_lse = true;
  l.options.causal = Causal::bottom_right;
  l.options.num_splits = num_splits;
  const PreparedPagedAttention prepared(context(), l);
  INFO("plan: " << std::string(prepared.plan().kernel) << " splits " << prepared.plan().splits);

  const auto values = [](int64_t n, double a, double c) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(a * double(i) + c));
    return x;
  };
  const std::vector<float> q = values(l.q.required_elements(), 0.37, 0.1);
  const std::vector<float> kc = values(l.k_cache.element_count(), 0.61, 0.3), vc = values(l.v_cache.element_count(), 0.23, 0.7);
  const std::vector<float> kn = values(batch * kG * std::max<int64_t>(seq_new, 1) * kD, 0.91, 0.5);
  const std::vector<float> vn = values(batch * kG * std::max<int64_t>(seq_new, 1) * kD, 0.53, 0.2);
  const auto upload = [](const void* data, uint64_t bytes) {
    Buffer b = Buffer::allocate(context(), bytes);
    b.upload(data, bytes);
    return b;
  };
  Buffer qb = upload(q.data(), q.size() * 4), kcb = upload(kc.data(), kc.size() * 4), vcb = upload(vc.data(), vc.size() * 4);
  Buffer knb = upload(kn.data(), kn.size() * 4), vnb = upload(vn.data(), vn.size() * 4);
  Buffer tb = upload(table_in.data(), table_in.size() * 4), lb = upload(lens_in.data(), lens_in.size() * 4);
  std::vector<float> poison(q.size(), std::numeric_limits<float>::quiet_NaN());
  Buffer ob = upload(poison.data(), poison.size() * 4), lseb = upload(poison.data(), uint64_t(batch * kH * kSeqQ) * 4);
  PagedAttentionBuffers b;
  b.q = &qb, b.k_cache = &kcb, b.v_cache = &vcb, b.out = &ob, b.lse = {&lseb, 0};
  b.block_table = {&tb, 0}, b.cache_lens = {&lb, 0};
  if (seq_new > 0) b.k_new = &knb, b.v_new = &vnb;
  prepared.run(b);
  expect_no_validation_messages();
  std::vector<float> o(q.size()), lse(std::size_t(batch * kH * kSeqQ)), k_after(kc.size()), v_after(vc.size());
  ob.download(o.data(), o.size() * 4);
  lseb.download(lse.data(), lse.size() * 4);
  kcb.download(k_after.data(), k_after.size() * 4);
  vcb.download(v_after.data(), v_after.size() * 4);

  std::vector<int32_t> table = table_in, lens = lens_in;
  clamp_paged_values(kPages, capacity, seq_new, table, lens);
  reference::PagedInputs in;
  in.q_layout = l.q, in.q = q;
  in.k_cache_layout = l.k_cache, in.v_cache_layout = l.v_cache;
  in.k_cache.values = kc, in.v_cache.values = vc;
  in.max_pages = kMaxPages;
  in.block_table = table, in.cache_lens = lens;
  if (seq_new > 0) in.k_new_layout = l.k_new, in.v_new_layout = l.v_new, in.k_new = kn, in.v_new = vn;
  in.options = l.options;
  const reference::PagedOutputs r = reference::paged_attention(in);
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t h = 0; h < kH; ++h)
      for (int64_t i = 0; i < kSeqQ; ++i) {
        INFO("sequence " << s << " (cache_lens " << lens_in[std::size_t(s)] << ") head " << h << " row " << i);
        const std::size_t row = std::size_t((s * kH + h) * kSeqQ + i);
        CHECK_MESSAGE(same_double(r.lse[row], double(lse[row])), "lse " << lse[row] << ", want " << r.lse[row]);
        for (int64_t d = 0; d < kD; ++d)
          CHECK_MESSAGE(same_double(r.at(s, h, i, d), double(o[row * kD + std::size_t(d)])),
                        "o[" << d << "] " << o[row * kD + std::size_t(d)] << ", want " << r.at(s, h, i, d));
      }
  // The caches: exactly the reference's (the appended rows where the rule puts them, nothing else).
  CHECK(std::equal(k_after.begin(), k_after.end(), r.k_cache.begin()));
  CHECK(std::equal(v_after.begin(), v_after.end(), r.v_cache.begin()));
}

}  // namespace

TEST_SUITE("paged") {
  TEST_CASE("paged KV cache: page sizes, shared pages, appends, modifiers, every dtype") {
    run_all(conform::catalog_section("paged", base_seed()).serving_cases);
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
    // keys (the length clamped to the table, then the appended tokens), none for an empty one, and the split
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
    REQUIRE(call.planned.fused.has_value());
    const detail::FusedPlan& plan = *call.planned.fused;
    const PreparedPagedAttention prepared(ctx, l);
    REQUIRE(prepared.plan().splits == plan.splits);
    REQUIRE(prepared.workspace_bytes() == plan.workspace_bytes);
    REQUIRE_MESSAGE(plan.work_list.has_value(), "a paged call of " << plan.splits << " splits without a work list");
    const detail::WorkListPlan& w = *plan.work_list;
    CHECK(w.max_items == uint32_t(batch) * plan.splits);

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
    // (A length is clamped into [0, capacity - seq_new] before the appended tokens are added: -3 has 3 keys.)
    for (const int32_t n : lens) total += keys.emplace_back(uint64_t(std::clamp<int64_t>(n, 0, kCapacity - kNew) + kNew));
    const uint64_t granule = plan.config.keys_per_tile, most = plan.keys_per_split;
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
      CHECK(words[args + 1] == groups_y * uint32_t(2) / std::max<uint32_t>(plan.config.heads_per_workgroup(2), 1));
    }
    chunks.push_back(chunk);
    }
    // (The three steps reach the three cases of the rule.)
    CHECK(chunks[0] > w.min_keys);
    CHECK(chunks[0] < plan.keys_per_split);
    CHECK(chunks[1] == w.min_keys);
    CHECK(chunks[2] == plan.keys_per_split);
    expect_no_validation_messages();
  }

  TEST_CASE("paged KV cache: bad cache lengths and table entries follow the clamping rule, extremes included") {
    // Issue 37: INT32_MAX + seq_new overflowed in the clamp (no keys where 100 gave the capacity), and
    // an append to a page outside the pool was skipped where attention clamped it. The rule
    // (kv_cache.hpp): lengths into [0, capacity - seq_new], entries into [0, num_pages), for reading
    // and appending alike. Capacity 12 (3 pages of 4), 16 pages: -1, INT32_MIN -> page 0; INT32_MAX,
    // 16 -> page 15.
    if (attention_path() == AttentionPath::unfused) return;
    constexpr int32_t kMin = std::numeric_limits<int32_t>::min(), kMax = std::numeric_limits<int32_t>::max();
    // Without an append: every bad entry read (pages shared, read only).
    const std::vector<int32_t> read_table = {1, 2, 3, /**/ 1, 2, 3, /**/ -1, kMin, 4, /**/ kMax, 16, 5,
                                             /**/ 6, 7, -1, /**/ 8, 16, -1};
    const std::vector<int32_t> read_lens = {-5, kMin, kMax, 13, 100, 6};
    // With an append of 2 (lengths into [0, 10]): appended rows through bad entries, each row its
    // token's alone (page 0 slots 0-1 for sequence 0, page 15 slots 2-3 for sequence 2).
    const std::vector<int32_t> append_table = {-1, -1, -1, /**/ 1, kMin, kMin, /**/ 2, 3, kMax, /**/ 4, 5, 6,
                                               /**/ 7, 8, 9, /**/ 10, 11, -1};
    const std::vector<int32_t> append_lens = {-5, kMin, kMax, 11, 100, 3};
    for (const int splits : {0, 1, 2, 3}) {
      INFO("num_splits " << splits);
      check_bad_paged_values(read_table, read_lens, 0, splits);
      check_bad_paged_values(append_table, append_lens, 2, splits);
    }
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

  TEST_CASE("paged KV cache: V as a view of K's rows takes K's Buffer when k_new comes alone") {
    PagedAttentionLayouts l;
    l.q = TensorLayout::bhsd(DType::f32, 2, 2, 1, 64);
    l.k_cache = PagedKvLayout::dense(DType::f32, 4, 16, 1, 64);
    l.v_cache = l.k_cache.prefix_view(32);
    l.max_pages = 2;
    l.k_new = TensorLayout::bhsd(DType::f32, 2, 1, 1, 64);
    l.out = TensorLayout::bhsd(DType::f32, 2, 2, 1, 32);
    const PreparedPagedAttention prepared(context(), l);
    Buffer q = Buffer::allocate(context(), 2 * 2 * 64 * 4), out = Buffer::allocate(context(), 2 * 2 * 32 * 4);
    Buffer cache = Buffer::allocate(context(), 4 * 16 * 64 * 4), other = Buffer::allocate(context(), 4 * 16 * 64 * 4);
    Buffer k_new = Buffer::allocate(context(), 2 * 64 * 4), v_new = Buffer::allocate(context(), 2 * 32 * 4);
    const std::vector<int32_t> table_values = {0, 1, 2, 3}, lens_values = {5, 20};
    Buffer table = Buffer::allocate(context(), 16), lens = Buffer::allocate(context(), 8);
    table.upload(table_values.data(), 16);
    lens.upload(lens_values.data(), 8);
    cache.fill(0), q.fill(0), k_new.fill(0);
    PagedAttentionBuffers b;
    b.q = &q, b.k_cache = &cache, b.v_cache = &cache, b.k_new = &k_new, b.out = &out;
    b.block_table = {&table, 0}, b.cache_lens = {&lens, 0};
    CHECK_NOTHROW(prepared.run(b));  // one cache, written by the append and read as K and V
    b.v_cache = &other;
    CHECK(contains(error_message([&] { prepared.run(b); }),
                   "v_cache: k_new alone was given (v_cache a view of k_cache's rows), so v_cache must be k_cache's "
                   "Buffer; it is another"));
    b.v_cache = &cache;
    b.v_new = &v_new;
    CHECK(contains(error_message([&] { prepared.run(b); }), "v_new: given, but the call was prepared without it"));
    expect_no_validation_messages();
  }
}

TEST_SUITE("long") {
  TEST_CASE("paged KV cache: 65,536 keys in pages of 16, with an append; a cascade over a 67,200-token prefix") { run_all(conform::catalog_section("long-paged", base_seed()).serving_cases); }
}
