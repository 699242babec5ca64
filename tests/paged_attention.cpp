// Attention over a paged KV cache (PreparedPagedAttention) against the fp64 reference: the
// conformance catalog's paged cases on the shared Context's kernel (ctest runs this suite once per
// fused kernel), the long case on lavapipe's loop limit, and the refusals that need a device.
#include <doctest/doctest.h>

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

  TEST_CASE("paged KV cache: q8_0 caches are refused until a kernel reads them") {
    PagedAttentionLayouts l;
    l.q = TensorLayout::bhsd(DType::f32, 1, 2, 1, 32);
    l.k_cache = PagedKvLayout::dense(DType::f32, 4, 16, 1, 32, KvQuant::q8_0);
    l.v_cache = l.k_cache;
    l.max_pages = 4;
    l.out = l.q;
    const ThrownError e = thrown_error([&] { PreparedPagedAttention(context(), l); });
    CHECK(e.code == code_name(ErrorCode::unsupported));
    CHECK(contains(e.message, "q8_0"));
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
