// check_paged_attention, check_paged_values, check_varlen_attention, check_cu_seqlens and the
// serving references' own refusals: a valid problem, then each bad argument's message, which names
// the argument and its values.
#include <doctest/doctest.h>

#include <limits>
#include <vector>

#include "support.hpp"

using namespace vkattn;
using vkattn::test::contains;
using vkattn::test::error_message;

namespace {

// B 2, H 8 over 2 KV heads, Sq 3, D 64, Dv 32, 10 pages of 16, 4 table columns (capacity 64): every
// size distinct, so a message that quotes the wrong field shows.
PagedAttentionLayouts valid_paged() {
  PagedAttentionLayouts l;
  l.q = TensorLayout::bhsd(DType::f32, 2, 8, 3, 64);
  l.k_cache = PagedKvLayout::dense(DType::f32, 10, 16, 2, 64);
  l.v_cache = PagedKvLayout::dense(DType::f32, 10, 16, 2, 32);
  l.max_pages = 4;
  l.out = TensorLayout::bhsd(DType::f32, 2, 8, 3, 32);
  return l;
}

std::string paged_message(const PagedAttentionLayouts& l) {
  return error_message([&] { check_paged_attention(l); });
}

VarlenAttentionLayouts valid_varlen() {
  VarlenAttentionLayouts l;
  l.q = packed_layout(DType::f32, 10, 8, 64);
  l.k = packed_layout(DType::f32, 12, 2, 64);
  l.v = packed_layout(DType::f32, 12, 2, 32);
  l.out = packed_layout(DType::f32, 10, 8, 32);
  l.batch = 3;
  return l;
}

std::string varlen_message(const VarlenAttentionLayouts& l) {
  return error_message([&] { check_varlen_attention(l); });
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("check_paged_attention: a valid problem") {
    PagedAttentionLayouts l = valid_paged();
    l.options.causal = Causal::bottom_right;
    l.k_new = TensorLayout::bhsd(DType::f32, 2, 2, 5, 64);
    l.v_new = TensorLayout::bhsd(DType::f32, 2, 2, 5, 32);
    const PagedProblem p = check_paged_attention(l);
    CHECK(p.attention.batch == 2);
    CHECK(p.attention.group_size() == 4);
    CHECK(p.attention.dim_v == 32);
    CHECK(p.capacity() == 64);
    CHECK(p.attention.seq_k == 64);
    CHECK(p.seq_new == 5);
    CHECK(p.has_append());
    CHECK(p.sequence(20).diagonal_offset() == 17);  // bottom-right: 20 keys - 3 queries
    CHECK(p.quant == KvQuant::none);
    l.k_cache.quant = l.v_cache.quant = KvQuant::q8_0;
    CHECK(check_paged_attention(l).quant == KvQuant::q8_0);
    CHECK(l.k_cache.required_bytes() == 10 * 16 * 2 * 64 / 32 * 34);
    CHECK(l.k_cache.describe() == "q8_0 (10, 16, 2, 64)");
    // Page size 1, and one page larger than any sequence.
    l = valid_paged();
    l.k_cache.page_size = l.v_cache.page_size = 1;
    CHECK_NOTHROW(check_paged_attention(l));
    l.k_cache.page_size = l.v_cache.page_size = 4096;
    l.max_pages = 1;
    CHECK_NOTHROW(check_paged_attention(l));
  }

  TEST_CASE("check_paged_attention: each bad layout names the argument and its values") {
    PagedAttentionLayouts l = valid_paged();
    l.q.dim = 0;
    CHECK(contains(paged_message(l), "q.dim (0) must be at least 1"));
    l = valid_paged();
    l.k_cache.page_size = 0;
    CHECK(contains(paged_message(l), "k_cache.page_size (0) must be at least 1"));
    l = valid_paged();
    l.v_cache.num_pages = -1;
    CHECK(contains(paged_message(l), "v_cache.num_pages (-1) must be at least 1"));
    l = valid_paged();
    l.v_cache.num_pages = 9;
    CHECK(contains(paged_message(l), "v_cache.num_pages (9) must equal k_cache.num_pages (10)"));
    l = valid_paged();
    l.v_cache.page_size = 8;
    CHECK(contains(paged_message(l), "v_cache.page_size (8) must equal k_cache.page_size (16)"));
    l = valid_paged();
    l.v_cache.kv_heads = 4;
    CHECK(contains(paged_message(l), "v_cache.kv_heads (4) must equal k_cache.kv_heads (2)"));
    l = valid_paged();
    l.k_cache.dim = 32;
    CHECK(contains(paged_message(l), "k_cache.dim (32) must equal q.dim (64)"));
    l = valid_paged();
    l.k_cache.kv_heads = l.v_cache.kv_heads = 3;
    CHECK(contains(paged_message(l), "k_cache.kv_heads (3) must divide q.heads (8) (GQA requires heads % kv_heads == 0)"));
    l = valid_paged();
    l.v_cache.dim = 600;
    CHECK(contains(paged_message(l), "v_cache.dim (600) exceeds the maximum head dim 576"));
    l = valid_paged();
    l.k_cache.dtype = DType::f16;
    CHECK(contains(paged_message(l), "k_cache.dtype (f16) must equal q.dtype (f32)"));
    l = valid_paged();
    l.k_cache.quant = static_cast<KvQuant>(7);
    CHECK(contains(paged_message(l), "k_cache.quant: invalid value 7"));
    l = valid_paged();
    l.k_cache.quant = KvQuant::q8_0;
    CHECK(contains(paged_message(l), "v_cache.quant (none) must equal k_cache.quant (q8_0)"));
    l = valid_paged();
    l.k_cache.order = PageOrder::hnd;
    CHECK(contains(paged_message(l), "v_cache.order (nhd) must equal k_cache.order (hnd)"));
    l.v_cache.order = static_cast<PageOrder>(5);
    CHECK(contains(paged_message(l), "v_cache.order: invalid value 5"));
    l.v_cache.order = PageOrder::hnd;
    CHECK_NOTHROW(check_paged_attention(l));
    l = valid_paged();
    l.v_cache.quant = KvQuant::q8_0;
    l.v_cache.dim = 48;
    l.out.dim = 48;
    CHECK(contains(paged_message(l), "v_cache.dim (48) must be a multiple of 32 for q8_0"));
    l = valid_paged();
    l.max_pages = 0;
    CHECK(contains(paged_message(l), "max_pages (0) must be at least 1"));
    l = valid_paged();  // a batch whose table entries pass 2^31 (once batch * max_pages overflowed int64)
    l.q.batch = l.out.batch = int64_t{1} << 62;
    l.q.stride_batch = l.out.stride_batch = 0;
    l.max_pages = 7;
    CHECK(contains(paged_message(l), "the block table's entries batch * max_pages (4611686018427387904 * 7) exceed 2^31 - 1"));
    l = valid_paged();
    l.max_pages = int64_t{1} << 28;
    CHECK(contains(paged_message(l), "the block table's capacity max_pages * page_size (268435456 * 16) exceeds 2^31 - 1"));
    l = valid_paged();
    l.out.dim = 64;
    CHECK(contains(paged_message(l), "out.dim (64) must equal v.dim (32)"));
    l = valid_paged();
    l.options.window = Window{-2, 0};
    CHECK(contains(paged_message(l), "window: (-2, 0) sides must be >= 0, or -1 for unbounded"));
    l = valid_paged();
    l.alibi = HeadValuesLayout{3, 8, 0};
    CHECK(contains(paged_message(l), "alibi: shape (3, 8) must be (heads) = (8) or (batch, heads) = (2, 8)"));
  }

  TEST_CASE("check_paged_attention: appended keys and values") {
    PagedAttentionLayouts l = valid_paged();
    l.k_new = TensorLayout::bhsd(DType::f32, 2, 2, 5, 64);
    CHECK(contains(paged_message(l), "k_new alone was given, but v_cache (f32 (10, 16, 2, 32)) is not a view of "
                                     "k_cache's rows (f32 (10, 16, 2, 64)): give v_new too, or describe v_cache as "
                                     "k_cache.prefix_view(dim_v)"));
    l.k_new.reset();
    l.v_new = TensorLayout::bhsd(DType::f32, 2, 2, 5, 32);
    CHECK(contains(paged_message(l), "v_new alone was given"));
    l.k_new = TensorLayout::bhsd(DType::f32, 2, 2, 5, 64);
    l.v_new = TensorLayout::bhsd(DType::f32, 2, 2, 4, 32);
    CHECK(contains(paged_message(l), "v_new.seq (4) must equal k_new.seq (5)"));
    l.v_new = TensorLayout::bhsd(DType::f32, 2, 2, 5, 64);
    CHECK(contains(paged_message(l), "v_new.dim (64) must equal v_cache.dim (32)"));
    l.v_new = TensorLayout::bhsd(DType::f32, 2, 4, 5, 32);
    CHECK(contains(paged_message(l), "v_new.heads (4) must equal v_cache.kv_heads (2)"));
    l.v_new = TensorLayout::bhsd(DType::f32, 1, 2, 5, 32);
    CHECK(contains(paged_message(l), "v_new.batch (1) must equal q.batch (2)"));
    l.v_new = TensorLayout::bhsd(DType::f16, 2, 2, 5, 32);
    CHECK(contains(paged_message(l), "v_new.dtype (f16) must equal q.dtype (f32)"));
    l.v_new = TensorLayout::bhsd(DType::f32, 2, 2, 5, 32);
    l.k_new->stride_seq = -1;
    CHECK(contains(paged_message(l), "k_new.stride_seq (-1) must be >= 0"));
    l.k_new = TensorLayout::bhsd(DType::f32, 2, 2, 65, 64);
    l.v_new = TensorLayout::bhsd(DType::f32, 2, 2, 65, 32);
    CHECK(contains(paged_message(l),
                   "k_new.seq (65) exceeds the block table's capacity max_pages * page_size = 4 * 16 = 64"));
  }

  TEST_CASE("check_paged_attention: V as a view of K's rows (row_stride, prefix_view)") {
    PagedAttentionLayouts l = valid_paged();
    l.v_cache = l.k_cache.prefix_view(32);
    CHECK(l.v_cache.row_elements() == 64);
    CHECK(l.v_cache.index(1, 2, 1, 5) == l.k_cache.index(1, 2, 1, 5));  // the same element of the same row
    CHECK(l.v_cache.element_count() == l.k_cache.element_count());
    CHECK(l.v_cache.describe() == "f32 (10, 16, 2, 32) of rows 64");
    CHECK(l.v_views_k());
    l.k_new = TensorLayout::bhsd(DType::f32, 2, 2, 5, 64);  // k_new alone: V reads the rows it writes
    const PagedProblem p = check_paged_attention(l);
    CHECK(p.has_append());
    CHECK(!p.appends_v);
    l.v_new = TensorLayout::bhsd(DType::f32, 2, 2, 5, 32);  // both still allowed (a view that is written twice)
    CHECK(check_paged_attention(l).appends_v);
    l.v_new.reset();

    l.v_cache.row_stride = 16;
    CHECK(contains(paged_message(l), "v_cache.row_stride (16) must be 0 (rows of dim elements) or at least v_cache.dim (32)"));
    l.v_cache.row_stride = -64;
    CHECK(contains(paged_message(l), "v_cache.row_stride (-64) must be 0"));
    l.v_cache.row_stride = 96;  // wider rows than K's: not K's rows
    CHECK(contains(paged_message(l), "is not a view of k_cache's rows"));
    l.v_cache = l.k_cache.prefix_view(32);
    l.k_cache.quant = l.v_cache.quant = KvQuant::q8_0;
    l.k_cache.row_stride = l.v_cache.row_stride = 80;
    CHECK(contains(paged_message(l), "k_cache.row_stride (80) must be a multiple of 32 for q8_0 (rows of whole blocks)"));
  }

  TEST_CASE("check_paged_attention and check_paged_values: cascade (shared_prefix_pages)") {
    PagedAttentionLayouts l = valid_paged();  // B 2, H 8 / KV 2, Sq 3, 4 columns of pages of 16
    l.shared_prefix_pages = 2;
    CHECK(check_paged_attention(l).prefix_tokens() == 32);
    l.options.causal = Causal::bottom_right;
    CHECK(contains(paged_message(l), "shared_prefix_pages (2): bottom-right causal with seq_q (3) > seq_new + 1 (1) hides "
                                     "prefix keys from the first rows"));
    l.k_new = TensorLayout::bhsd(DType::f32, 2, 2, 2, 64);
    l.v_new = TensorLayout::bhsd(DType::f32, 2, 2, 2, 32);
    CHECK_NOTHROW(check_paged_attention(l));  // seq_q 3 <= seq_new 2 + 1
    l.options.causal = Causal::top_left;
    CHECK(contains(paged_message(l), "top-left causal hides prefix keys"));
    l.options.causal = Causal::none;
    l.options.window = Window{8, 0};
    CHECK(contains(paged_message(l), "shared_prefix_pages (2): a sliding window"));
    l.options.window.reset();
    l.alibi = HeadValuesLayout{1, 8, 0};
    CHECK(contains(paged_message(l), "shared_prefix_pages (2): ALiBi"));
    l.alibi.reset();
    l.q.stride_head = 3 * 64 + 7;
    l.q.stride_batch = 8 * l.q.stride_head;
    CHECK(contains(paged_message(l), "q.stride_head (199) must equal seq_q * q.stride_seq (3 * 64)"));
    l.q = TensorLayout::bhsd(DType::f32, 2, 8, 3, 64);
    l.shared_prefix_pages = 4;
    CHECK(contains(paged_message(l), "shared_prefix_pages (4) must be below max_pages (4)"));
    l.shared_prefix_pages = -1;
    CHECK(contains(paged_message(l), "shared_prefix_pages (-1) must be >= 0"));

    l.shared_prefix_pages = 2;
    const PagedProblem p = check_paged_attention(l);
    std::vector<int32_t> table = {5, 6, 7, -1, 5, 6, 8, 9};
    std::vector<int32_t> lens = {32, 40};
    CHECK_NOTHROW(check_paged_values(p, table, lens));
    lens[0] = 31;
    CHECK(contains(error_message([&] { check_paged_values(p, table, lens); }),
                   "cache_lens[0] (31) is shorter than the shared prefix: shared_prefix_pages * page_size = 2 * 16 = 32"));
    lens[0] = 32;
    table[5] = 3;
    CHECK(contains(error_message([&] { check_paged_values(p, table, lens); }),
                   "block_table[1][1] (3) differs from block_table[0][1] (6)"));

    // What a host's table shares: the leading entries every sequence has equal and wholly inside its length.
    table[5] = 6;
    CHECK(shared_prefix_pages(table, std::vector<int32_t>{32, 40}, 4, 16) == 2);
    CHECK(shared_prefix_pages(table, std::vector<int32_t>{31, 40}, 4, 16) == 1);
    CHECK(shared_prefix_pages(table, std::vector<int32_t>{48, 64}, 4, 16) == 2);  // entry 2 differs (7, 8)
    CHECK(shared_prefix_pages(std::vector<int32_t>{5, 6, 7, 8}, std::vector<int32_t>{64}, 4, 16) == 0);  // one sequence
    table[4] = 1;
    CHECK(shared_prefix_pages(table, std::vector<int32_t>{32, 40}, 4, 16) == 0);
  }

  TEST_CASE("check_paged_values: the block table and cache lengths") {
    PagedAttentionLayouts l = valid_paged();
    PagedProblem p = check_paged_attention(l);
    std::vector<int32_t> table = {0, 1, -1, -1, /**/ 2, 3, 4, 5};
    std::vector<int32_t> lens = {17, 64};
    CHECK_NOTHROW(check_paged_values(p, table, lens));
    lens = {0, 64};  // an empty sequence uses no entry
    CHECK_NOTHROW(check_paged_values(p, table, lens));
    lens = {33, 64};
    CHECK(contains(error_message([&] { check_paged_values(p, table, lens); }),
                   "block_table[0][2] (-1) is not a page: must be in [0, 10) (k_cache.num_pages); sequence 0 uses "
                   "its first 3 entries"));
    table[7] = 10;
    lens = {16, 64};
    CHECK(contains(error_message([&] { check_paged_values(p, table, lens); }), "block_table[1][3] (10) is not a page"));
    table[7] = 5;
    lens = {16, 65};
    CHECK(contains(error_message([&] { check_paged_values(p, table, lens); }),
                   "cache_lens[1] (65) exceeds the block table's capacity max_pages * page_size = 4 * 16 = 64"));
    lens = {-1, 2};
    CHECK(contains(error_message([&] { check_paged_values(p, table, lens); }), "cache_lens[0] (-1) must be >= 0"));
    lens = {1};
    CHECK(contains(error_message([&] { check_paged_values(p, table, lens); }),
                   "cache_lens: expected 2 values (2), given 1 (one per sequence)"));
    lens = {1, 1};
    table.pop_back();
    CHECK(contains(error_message([&] { check_paged_values(p, table, lens); }),
                   "block_table: expected 8 values (2, 4), given 7 (batch, max_pages)"));

    // With an append of 5: the sum must fit, and each appended row must be its token's alone.
    l.k_new = TensorLayout::bhsd(DType::f32, 2, 2, 5, 64);
    l.v_new = TensorLayout::bhsd(DType::f32, 2, 2, 5, 32);
    p = check_paged_attention(l);
    table = {0, 1, -1, -1, /**/ 2, 3, 4, 5};
    lens = {11, 60};
    CHECK(contains(error_message([&] { check_paged_values(p, table, lens); }),
                   "cache_lens[1] (60) + k_new.seq (5) = 65 exceeds the block table's capacity max_pages * page_size "
                   "= 4 * 16 = 64"));
    lens = {11, 59};
    CHECK_NOTHROW(check_paged_values(p, table, lens));  // sequence 0 appends 11..15 | nothing crosses
    // Shared page 0 (a prefix both read): fine to read, not to append into.
    table = {0, 1, -1, -1, /**/ 0, 3, 4, 5};
    lens = {20, 16};
    CHECK_NOTHROW(check_paged_values(p, table, lens));
    lens = {10, 16};
    CHECK(contains(error_message([&] { check_paged_values(p, table, lens); }),
                   "block_table: sequence 0 appends token 10 at page 0 row 10, which token 10 of sequence 1 also maps "
                   "to: an appended row must belong to its own token alone"));
    // The same page twice in one sequence's table: an appended token lands on one of its own.
    table = {0, 0, -1, -1, /**/ 2, 3, 4, 5};
    lens = {16, 16};
    CHECK(contains(error_message([&] { check_paged_values(p, table, lens); }),
                   "sequence 0 appends token 16 at page 0 row 0, which token 0 of sequence 0 also maps to"));
  }

  TEST_CASE("check_varlen_attention and check_cu_seqlens") {
    VarlenAttentionLayouts l = valid_varlen();
    const VarlenProblem p = check_varlen_attention(l);
    CHECK(p.batch == 3);
    CHECK(p.total_q() == 10);
    CHECK(p.total_k() == 12);
    CHECK(p.sequence(2, 5).diagonal_offset() == 3);

    l.q = TensorLayout::bhsd(DType::f32, 2, 8, 5, 64);
    CHECK(contains(varlen_message(l), "q.batch (2) must be 1: a packed tensor is (1, heads, total, dim)"));
    l = valid_varlen();
    l.batch = 0;
    CHECK(contains(varlen_message(l), "batch (0) must be at least 1 (cu_seqlens hold batch + 1 values)"));
    l = valid_varlen();
    l.k = l.v = packed_layout(DType::f32, 12, 3, 64);
    l.v.dim = 32;
    CHECK(contains(varlen_message(l), "k.heads (3) must divide q.heads (8)"));
    l = valid_varlen();
    l.v.dim = l.out.dim = 577;
    CHECK(contains(varlen_message(l), "v.dim (577) exceeds the maximum head dim 576"));
    l = valid_varlen();
    l.v = packed_layout(DType::f32, 11, 2, 32);
    CHECK(contains(varlen_message(l), "v.seq (11) must equal k.seq (12)"));
    l = valid_varlen();
    l.alibi = HeadValuesLayout{2, 8, 0};
    CHECK(contains(varlen_message(l), "alibi: shape (2, 8) must be (heads) = (8) or (batch, heads) = (3, 8)"));
    l.alibi = HeadValuesLayout{3, 8, 0};
    CHECK(check_varlen_attention(l).attention.alibi_per_batch);
    l = valid_varlen();
    l.kv_quant = KvQuant::q8_0;
    CHECK_NOTHROW(check_varlen_attention(l));
    l.k.stride_seq = 200;
    CHECK(contains(varlen_message(l), "k.stride_seq (200) must be a multiple of 32 for q8_0 (every row starts a block)"));
    l = valid_varlen();
    l.kv_quant = KvQuant::q8_0;
    l.v = packed_layout(DType::f32, 12, 2, 48);
    l.out = packed_layout(DType::f32, 10, 8, 48);
    CHECK(contains(varlen_message(l), "v.dim (48) must be a multiple of 32 for q8_0"));
    l = valid_varlen();
    l.kv_quant = static_cast<KvQuant>(3);
    CHECK(contains(varlen_message(l), "kv_quant: invalid value 3"));

    const auto cu_message = [](std::vector<int32_t> cu) {
      return error_message([&] { check_cu_seqlens("cu_seqlens_q", cu, 3, 10, "total_q (q.seq)"); });
    };
    CHECK(cu_message({0, 4, 4, 10}) == "<no vkattn::Error thrown>");
    CHECK(contains(cu_message({0, 4, 10}), "cu_seqlens_q: expected 4 values (4), given 3 (batch + 1)"));
    CHECK(contains(cu_message({1, 4, 4, 10}), "cu_seqlens_q[0] (1) must be 0"));
    CHECK(contains(cu_message({0, 5, 4, 10}),
                   "cu_seqlens_q[2] (4) < cu_seqlens_q[1] (5): the offsets must be non-decreasing"));
    CHECK(contains(cu_message({0, 4, 4, 9}), "cu_seqlens_q[3] (9) must equal total_q (q.seq) (10)"));

    // A batch below 1 or at INT64_MAX (found by fuzz_varlen_args): batch + 1 overflowed int64, and an
    // empty array with batch -1 passed the size check and was read at [0].
    const std::vector<int32_t> none, one = {0};
    for (const int64_t batch : {int64_t{-1}, int64_t{0}, std::numeric_limits<int64_t>::max()}) {
      CAPTURE(batch);
      const std::string expected = "cu_seqlens_k: batch (" + std::to_string(batch) + ")";
      CHECK(contains(error_message([&] { check_cu_seqlens("cu_seqlens_k", none, batch, 0, "total_k"); }), expected));
      CHECK(contains(error_message([&] { check_cu_seqlens("cu_seqlens_k", one, batch, 0, "total_k"); }), expected));
    }
  }

  TEST_CASE("check_varlen_attention and check_varlen_values: max_seqlen_q and max_seqlen_k") {
    VarlenAttentionLayouts l = valid_varlen();
    VarlenProblem p = check_varlen_attention(l);
    CHECK(p.max_seq_q == 10);  // 0: the totals
    CHECK(p.max_seq_k == 12);
    l.max_seqlen_q = 6;
    l.max_seqlen_k = 6;
    p = check_varlen_attention(l);
    CHECK(p.max_seq_q == 6);
    CHECK(p.max_seq_k == 6);
    const std::vector<int32_t> cu_q = {0, 4, 4, 10}, cu_k = {0, 6, 7, 12};
    CHECK_NOTHROW(check_varlen_values(l, cu_q, cu_k));
    l.max_seqlen_q = 5;
    CHECK(contains(error_message([&] { check_varlen_values(l, cu_q, cu_k); }),
                   "cu_seqlens_q: sequence 2 has 6 queries, more than max_seqlen_q (5)"));
    l.max_seqlen_q = 6;
    l.max_seqlen_k = 5;
    CHECK(contains(error_message([&] { check_varlen_values(l, cu_q, cu_k); }),
                   "cu_seqlens_k: sequence 0 has 6 keys, more than max_seqlen_k (5)"));
    l.max_seqlen_k = 13;
    CHECK(contains(varlen_message(l), "max_seqlen_k (13) must be in [0, total_k (12)]"));
    l.max_seqlen_k = -1;
    CHECK(contains(varlen_message(l), "max_seqlen_k (-1) must be in [0, total_k (12)]"));
    l.max_seqlen_k = 0;
    const std::vector<int32_t> bad_k = {0, 6, 7, 11};
    CHECK(contains(error_message([&] { check_varlen_values(l, cu_q, bad_k); }),
                   "cu_seqlens_k[3] (11) must equal total_k (k.seq) (12)"));
  }

  TEST_CASE("serving references: data of the wrong kind or size, bad appended values") {
    // Paged: one sequence of 1 token, dim 32, one page of 2.
    const std::vector<float> q(32, 0.0f), kv(64, 1.0f);
    const std::vector<int32_t> table = {0}, lens = {1};
    reference::PagedInputs in;
    in.q_layout = TensorLayout::bhsd(DType::f32, 1, 1, 1, 32);
    in.q = q;
    in.k_cache_layout = in.v_cache_layout = PagedKvLayout::dense(DType::f32, 1, 2, 1, 32);
    in.k_cache.values = kv;
    in.v_cache.values = kv;
    in.max_pages = 1;
    in.block_table = table;
    in.cache_lens = lens;
    CHECK_NOTHROW(reference::paged_attention(in));
    in.v_cache.values = std::span<const float>(kv).first(40);
    CHECK(contains(error_message([&] { reference::paged_attention(in); }), "v_cache: 40 values given, layout needs 64"));
    in.v_cache.values = kv;
    in.k_cache_layout.quant = in.v_cache_layout.quant = KvQuant::q8_0;
    CHECK(contains(error_message([&] { reference::paged_attention(in); }),
                   "k_cache: f32 values given, but it is q8_0: give its bytes (KvData::q8_0)"));
    const std::vector<uint8_t> bytes = quantize_q8_0(kv, 32);
    in.k_cache = {{}, bytes};
    in.v_cache = {{}, std::span<const uint8_t>(bytes).first(34)};
    CHECK(contains(error_message([&] { reference::paged_attention(in); }),
                   "v_cache: 34 q8_0 bytes given, layout needs 68 (64 values)"));
    in.v_cache = {{}, bytes};
    CHECK_NOTHROW(reference::paged_attention(in));
    // A NaN appended into a q8_0 cache: q8_0 cannot hold it.
    std::vector<float> k_new(32, 0.5f);
    k_new[3] = std::numeric_limits<float>::quiet_NaN();
    in.k_new_layout = in.v_new_layout = TensorLayout::bhsd(DType::f32, 1, 1, 1, 32);
    in.k_new = in.v_new = k_new;
    CHECK(contains(error_message([&] { reference::paged_attention(in); }),
                   "k_new row (0, 0, 0) into the q8_0 cache: quantize_q8_0: values[3] is nan"));
    in.k_cache_layout.quant = in.v_cache_layout.quant = KvQuant::none;
    CHECK(contains(error_message([&] { reference::paged_attention(in); }),
                   "k_cache: q8_0 bytes given, but it is not q8_0: give its values (KvData::values)"));
    in.k_cache = {kv, {}};
    in.v_cache = {kv, {}};
    in.k_new = std::span<const float>(k_new).first(8);
    CHECK(contains(error_message([&] { reference::paged_attention(in); }), "k_new: 8 values given, layout needs 32"));

    // Varlen: cu_seqlens checked against the totals, the batch from cu_seqlens_q.
    reference::VarlenInputs v;
    v.q_layout = packed_layout(DType::f32, 1, 1, 32);
    v.k_layout = v.v_layout = packed_layout(DType::f32, 2, 1, 32);
    v.q = q;
    v.k.values = kv;
    v.v.values = kv;
    CHECK(contains(error_message([&] { reference::varlen_attention(v); }),
                   "cu_seqlens_q: no values given; it holds batch + 1 values (at least 2)"));
    const std::vector<int32_t> cu_q = {0, 1}, cu_k = {0, 1, 2}, cu_k_short = {0, 3};
    v.cu_seqlens_q = cu_q;
    v.cu_seqlens_k = cu_k;
    CHECK(contains(error_message([&] { reference::varlen_attention(v); }),
                   "cu_seqlens_k: expected 2 values (2), given 3 (batch + 1)"));
    v.cu_seqlens_k = cu_k_short;
    CHECK(contains(error_message([&] { reference::varlen_attention(v); }),
                   "cu_seqlens_k[1] (3) must equal total_k (k.seq) (2)"));
  }
}
