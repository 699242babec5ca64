// The one call model: an AttentionSpec whose keys and values come from a dense, paged or packed
// KvSource, planned and run by one PreparedAttention. What a source does not take is refused with a
// message naming it, before anything is dispatched; the family entry points (PreparedPagedAttention,
// PreparedVarlenAttention) are wrappers that give the same bytes.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "support.hpp"
#include "vkattn/paged_attention.hpp"
#include "vkattn/varlen_attention.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

PagedAttentionLayouts paged_layouts() {
  PagedAttentionLayouts l;
  l.q = TensorLayout::bhsd(DType::f32, 2, 4, 3, 32);
  l.k_cache = PagedKvLayout::dense(DType::f32, 6, 16, 2, 32);
  l.v_cache = l.k_cache;
  l.max_pages = 3;
  l.out = l.q;
  l.has_lse = true;
  l.options.causal = Causal::bottom_right;
  return l;
}

VarlenAttentionLayouts packed_layouts() {
  VarlenAttentionLayouts l;
  l.q = packed_layout(DType::f32, 9, 4, 32);
  l.k = packed_layout(DType::f32, 40, 2, 32);
  l.v = l.k;
  l.out = l.q;
  l.batch = 3;
  l.has_lse = true;
  l.options.causal = Causal::bottom_right;
  return l;
}

Buffer random_buffer(Context& ctx, int64_t floats, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> data(static_cast<std::size_t>(floats));
  for (float& x : data) x = value(rng);
  Buffer b = Buffer::allocate(ctx, data.size() * 4);
  b.upload(data.data(), data.size() * 4);
  return b;
}

Buffer int_buffer(Context& ctx, const std::vector<int32_t>& values) {
  Buffer b = Buffer::allocate(ctx, values.size() * 4);
  b.upload(values.data(), values.size() * 4);
  return b;
}

std::vector<uint8_t> bytes_of(const Buffer& b) {
  std::vector<uint8_t> bytes(b.size());
  b.download(bytes.data(), bytes.size());
  return bytes;
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("an AttentionSpec is its source's family layouts, and refuses what its source does not take") {
    const AttentionSpec paged = AttentionSpec::paged(paged_layouts());
    CHECK(std::string(to_string(paged.kv)) == "paged");
    const PagedAttentionLayouts back = paged.paged_layouts();
    CHECK(back.max_pages == 3);
    CHECK(back.k_cache.num_pages == 6);
    CHECK(back.has_lse);
    CHECK(back.options.causal == Causal::bottom_right);
    CHECK(contains(error_message([&] { (void)paged.dense_layouts(); }), "kv: the spec's source is paged, not dense"));

    AttentionSpec bad = paged;
    bad.mask = MaskLayout::dense(MaskType::boolean, 1, 1, 3, 48);
    CHECK(contains(error_message([&] { (void)bad.paged_layouts(); }), "mask: a paged call takes none"));
    bad = paged;
    bad.kv_lengths = true;
    CHECK(contains(error_message([&] { (void)bad.paged_layouts(); }), "kv_lengths: a paged call takes none"));
    bad = paged;
    bad.weights = true;
    CHECK(contains(error_message([&] { (void)bad.paged_layouts(); }), "weights: a paged call takes none"));
    AttentionSpec unfused = paged;  // the three-stage path reads the caches through the table
    unfused.path = AttentionPath::unfused;
    CHECK(unfused.paged_layouts().path == AttentionPath::unfused);
    CHECK(AttentionSpec::paged(unfused.paged_layouts()).path == AttentionPath::unfused);
    bad = paged;
    bad.kv_quant = KvQuant::q8_0;
    CHECK(contains(error_message([&] { (void)bad.paged_layouts(); }), "kv_quant (q8_0) must equal k_cache.quant (none)"));

    const AttentionSpec packed = AttentionSpec::packed(packed_layouts());
    CHECK(std::string(to_string(packed.kv)) == "packed");
    CHECK(packed.packed_layouts().batch == 3);
    bad = packed;
    bad.kv_lengths = true;
    CHECK(contains(error_message([&] { (void)bad.packed_layouts(); }), "kv_lengths: a packed call takes none"));
    CHECK(contains(error_message([&] { (void)packed.paged_layouts(); }), "kv: the spec's source is packed, not paged"));

    AttentionLayouts dense;
    dense.q = dense.out = TensorLayout::bhsd(DType::f16, 1, 2, 5, 8);
    dense.k = dense.v = TensorLayout::bhsd(DType::f16, 1, 1, 7, 8);
    dense.has_kv_lengths = true;
    const AttentionSpec d = AttentionSpec::dense(dense, true, AttentionPath::unfused);
    CHECK(std::string(to_string(d.kv)) == "dense");
    CHECK(d.weights);
    CHECK(d.kv_lengths);
    CHECK(d.dense_layouts().k.seq == 7);
  }
}

TEST_SUITE("prepared") {
  TEST_CASE("one PreparedAttention runs a paged source as the paged wrapper does, byte for byte") {
    Context& ctx = context();
    std::mt19937 rng{static_cast<uint32_t>(base_seed())};
    const PagedAttentionLayouts l = paged_layouts();
    Buffer q = random_buffer(ctx, l.q.element_count(), rng);
    Buffer cache_k = random_buffer(ctx, l.k_cache.element_count(), rng);
    Buffer cache_v = random_buffer(ctx, l.v_cache.element_count(), rng);
    Buffer table = int_buffer(ctx, {5, 0, 2, 1, 3, 4});
    Buffer lens = int_buffer(ctx, {37, 20});
    Buffer out_a = Buffer::allocate(ctx, uint64_t(l.out.element_count()) * 4), out_b = Buffer::allocate(ctx, out_a.size());
    Buffer lse_a = Buffer::allocate(ctx, 2 * 4 * 3 * 4), lse_b = Buffer::allocate(ctx, lse_a.size());

    AttentionBuffers b;
    b.q = &q, b.k = &cache_k, b.v = &cache_v, b.out = &out_a, b.lse = {&lse_a, 0};
    b.block_table = {&table, 0}, b.cache_lens = {&lens, 0};
    const PreparedAttention one(ctx, AttentionSpec::paged(l));
    CHECK(one.plan().path == std::string("fused"));
    one.run(b);

    PagedAttentionBuffers w;
    w.q = &q, w.k_cache = &cache_k, w.v_cache = &cache_v, w.out = &out_b, w.lse = {&lse_b, 0};
    w.block_table = {&table, 0}, w.cache_lens = {&lens, 0};
    paged_attention(ctx, l, w);
    CHECK(bytes_of(out_a) == bytes_of(out_b));
    CHECK(bytes_of(lse_a) == bytes_of(lse_b));

    // A source's foreign arguments are refused, nothing written: the output keeps its poison.
    out_a.fill(0xFF);
    const std::vector<uint8_t> poisoned = bytes_of(out_a);
    AttentionBuffers foreign = b;
    foreign.cu_seqlens_q = {&lens, 0};
    CHECK(contains(error_message([&] { one.run(foreign); }), "cu_seqlens_q: given, but a paged call takes none"));
    foreign = b;
    foreign.kv_lengths = {&lens, 0};
    CHECK(contains(error_message([&] { one.run(foreign); }), "kv_lengths: given, but a paged call takes none"));
    foreign = b;
    foreign.weights = {&out_b, 0};
    CHECK(contains(error_message([&] { one.run(foreign); }), "weights: given, but a paged call takes none"));
    CHECK(bytes_of(out_a) == poisoned);
    expect_no_validation_messages();
  }

  TEST_CASE("one PreparedAttention runs a packed source as the varlen wrapper does, and a dense one as attention() does") {
    Context& ctx = context();
    std::mt19937 rng{static_cast<uint32_t>(base_seed() + 1)};
    const VarlenAttentionLayouts l = packed_layouts();
    Buffer q = random_buffer(ctx, l.q.element_count(), rng);
    Buffer k = random_buffer(ctx, l.k.element_count(), rng), v = random_buffer(ctx, l.v.element_count(), rng);
    Buffer cu_q = int_buffer(ctx, {0, 2, 2, 9}), cu_k = int_buffer(ctx, {0, 17, 21, 40});
    Buffer out_a = Buffer::allocate(ctx, uint64_t(l.out.element_count()) * 4), out_b = Buffer::allocate(ctx, out_a.size());
    Buffer lse_a = Buffer::allocate(ctx, 4 * 9 * 4), lse_b = Buffer::allocate(ctx, lse_a.size());
    out_a.fill(0xFF), out_b.fill(0xFF);

    AttentionBuffers b;
    b.q = &q, b.k = &k, b.v = &v, b.out = &out_a, b.lse = {&lse_a, 0};
    b.cu_seqlens_q = {&cu_q, 0}, b.cu_seqlens_k = {&cu_k, 0};
    attention(ctx, AttentionSpec::packed(l), b);
    VarlenAttentionBuffers w;
    w.q = &q, w.k = &k, w.v = &v, w.out = &out_b, w.lse = {&lse_b, 0};
    w.cu_seqlens_q = {&cu_q, 0}, w.cu_seqlens_k = {&cu_k, 0};
    PreparedVarlenAttention(ctx, l).run(w);
    CHECK(bytes_of(out_a) == bytes_of(out_b));
    CHECK(bytes_of(lse_a) == bytes_of(lse_b));
    AttentionBuffers foreign = b;
    foreign.block_table = {&cu_q, 0};
    CHECK(contains(error_message([&] { attention(ctx, AttentionSpec::packed(l), foreign); }),
                   "block_table: given, but a packed call takes none"));

    // Dense: the spec and buffers of a call's arguments give what the arguments give.
    AttentionArgs args;
    args.q = {&q, TensorLayout::bhsd(DType::f32, 1, 4, 9, 32)};
    args.k = {&k, TensorLayout::bhsd(DType::f32, 1, 2, 40, 32)};
    args.v = {&v, args.k.layout};
    args.out = {&out_a, args.q.layout};
    args.options.causal = Causal::top_left;
    attention(ctx, args);
    AttentionBuffers dense = AttentionBuffers::of(args);
    dense.out = &out_b;
    attention(ctx, AttentionSpec::of(args), dense);
    CHECK(bytes_of(out_a) == bytes_of(out_b));
    dense.cache_lens = {&cu_k, 0};
    CHECK(contains(error_message([&] { attention(ctx, AttentionSpec::of(args), dense); }),
                   "cache_lens: given, but a dense call takes none"));
    expect_no_validation_messages();
  }
}
