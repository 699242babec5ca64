// The serving cases' catalogs (serving_case.hpp): the paged KV cache's and the packed sequences'.
// A case's seed derives from the base seed and its place in its list: a new case goes at the end.
#include "conform/attention_case.hpp"
#include "conform/case_modifiers.hpp"
#include "conform/serving_case.hpp"

namespace vkattn::conform {

std::vector<ServingCase> paged_cases(uint64_t base_seed, bool long_cases) {
  std::vector<ServingCase> cases;
  const auto add = [&](ServingCase c) {
    c.seed = case_seed(base_seed, 9000 + (long_cases ? 100 : 0) + cases.size());
    cases.push_back(std::move(c));
  };
  if (long_cases) {
    add({.name = "65,536 keys, page 16, decode with an append", .dtype = DType::f16, .heads = 8, .kv_heads = 2,
         .dim_qk = 64, .dim_v = 64, .kv = PagedSource{.page_size = 16, .cache_lens = {65535, 700}, .seq_new = 1}});
    // The cascade's prefix pass past lavapipe's loop limit: 3 sequences share 4,200 pages (67,200 tokens).
    add({.name = "cascade over a 67,200-token shared prefix, 3 sequences, GQA 4:2, append", .dtype = DType::f16,
         .heads = 4, .kv_heads = 2, .dim_qk = 64, .dim_v = 64,
         .kv = PagedSource{.page_size = 16, .cache_lens = {67205, 67300, 67200}, .seq_new = 1, .shared_pages = 4200,
                           .cascade = true}});
    return cases;
  }
  add({.name = "decode, page 16, GQA 8:2, lengths 0/1/16/37", .dtype = DType::f16, .heads = 8, .kv_heads = 2,
       .kv = PagedSource{.cache_lens = {0, 1, 16, 37}}});
  add({.name = "decode, page 1, dim_v != dim_qk", .dtype = DType::f32, .heads = 3, .kv_heads = 1, .dim_qk = 40,
       .dim_v = 24, .kv = PagedSource{.page_size = 1, .cache_lens = {5, 9, 2}}});
  add({.name = "decode, page 256, d128", .dtype = DType::bf16, .heads = 4, .kv_heads = 4, .dim_qk = 128, .dim_v = 128,
       .kv = PagedSource{.page_size = 256, .cache_lens = {300, 1}}});
  add({.name = "chunked prefill, shared prefix pages, seq_q > a sequence's keys", .dtype = DType::f32, .heads = 4,
       .kv_heads = 2, .kv = PagedSource{.seq_q = 20, .page_size = 16, .cache_lens = {40, 40, 17}, .shared_pages = 2}});
  add({.name = "append across a page edge", .dtype = DType::f16, .heads = 4, .kv_heads = 2,
       .kv = PagedSource{.seq_q = 4, .page_size = 16, .cache_lens = {14, 30, 0}, .seq_new = 4}});
  add({.name = "append one token, causal top-left", .dtype = DType::f32, .heads = 2, .kv_heads = 1, .dim_qk = 32,
       .dim_v = 32, .causal = Causal::top_left,
       .kv = PagedSource{.page_size = 16, .cache_lens = {15, 16}, .seq_new = 1}});
  add({.name = "every modifier", .dtype = DType::f32, .heads = 4, .kv_heads = 2,
       .modifiers = every_modifier(Window{64, 0}, 30.0f, 3),
       .kv = PagedSource{.seq_q = 2, .page_size = 16, .cache_lens = {100, 0, 257}}});
  add({.name = "two-sided window top-left, ALiBi (H), sinks, no causal", .dtype = DType::f16, .heads = 4,
       .kv_heads = 1, .causal = Causal::none,
       .modifiers = {.options = {.window = Window{20, 5}, .align = Align::top_left}, .alibi_batch = 1, .sinks = true},
       .kv = PagedSource{.seq_q = 3, .page_size = 8, .cache_lens = {50, 3}}});
  // q8_0 caches: the decode form (GQA packed), the element-wise kernels' reads with modifiers, and
  // prefill rows.
  add({.name = "q8_0, decode with an append, page 16, GQA 8:2", .dtype = DType::f16, .quant = KvQuant::q8_0,
       .heads = 8, .kv_heads = 2, .dim_qk = 128, .dim_v = 128,
       .kv = PagedSource{.cache_lens = {0, 1, 15, 300}, .seq_new = 1}});
  add({.name = "q8_0, page 1, every modifier", .dtype = DType::f32, .quant = KvQuant::q8_0, .heads = 3, .kv_heads = 1,
       .dim_qk = 32, .dim_v = 64, .modifiers = every_modifier(Window{30, 0}, 30.0f, 1),
       .kv = PagedSource{.seq_q = 2, .page_size = 1, .cache_lens = {45, 9}}});
  add({.name = "q8_0, prefill 40 rows, shared prefix pages, append across a page edge", .dtype = DType::bf16,
       .quant = KvQuant::q8_0, .heads = 2, .kv_heads = 1, .causal = Causal::none,
       .kv = PagedSource{.seq_q = 40, .page_size = 16, .cache_lens = {78, 70}, .seq_new = 3, .shared_pages = 2}});
  add({.name = "prefill 64 rows, no causal", .dtype = DType::bf16, .heads = 2, .kv_heads = 1, .causal = Causal::none,
       .kv = PagedSource{.seq_q = 64, .page_size = 16, .cache_lens = {100, 64}}});
  // hnd pages (each KV head's tokens of a page side by side): the decode form with an append across a
  // page edge, a page of 256 with prefill rows, modifiers, q8_0 (decode and prefill) with shared pages.
  add({.name = "hnd, decode with an append across a page edge, GQA 8:2, lengths 0/1/15/37", .dtype = DType::f16,
       .heads = 8, .kv_heads = 2,
       .kv = PagedSource{.page_size = 16, .order = PageOrder::hnd, .cache_lens = {0, 1, 15, 37}, .seq_new = 1}});
  add({.name = "hnd, page 256, d128, prefill 5 rows, shared prefix pages", .dtype = DType::bf16, .heads = 4,
       .kv_heads = 2, .dim_qk = 128, .dim_v = 128,
       .kv = PagedSource{.seq_q = 5, .page_size = 256, .order = PageOrder::hnd, .cache_lens = {600, 300}, .shared_pages = 1}});
  add({.name = "hnd, page 8, every modifier, dim_v != dim_qk", .dtype = DType::f32, .heads = 6, .kv_heads = 3,
       .dim_qk = 48, .dim_v = 24, .modifiers = every_modifier(Window{32, 0}, 20.0f, 3),
       .kv = PagedSource{.seq_q = 3, .page_size = 8, .order = PageOrder::hnd, .cache_lens = {70, 0, 9}, .seq_new = 2}});
  add({.name = "hnd, q8_0, decode with an append, GQA 8:2, page 16", .dtype = DType::f16, .quant = KvQuant::q8_0,
       .heads = 8, .kv_heads = 2, .dim_qk = 128, .dim_v = 128,
       .kv = PagedSource{.page_size = 16, .order = PageOrder::hnd, .cache_lens = {0, 17, 300}, .seq_new = 1}});
  add({.name = "hnd, q8_0, prefill 24 rows, shared prefix pages, append", .dtype = DType::f32, .quant = KvQuant::q8_0,
       .heads = 4, .kv_heads = 2, .dim_qk = 64, .dim_v = 32, .causal = Causal::none,
       .kv = PagedSource{.seq_q = 24, .page_size = 16, .order = PageOrder::hnd, .cache_lens = {50, 40}, .seq_new = 3, .shared_pages = 2}});
  // Head dims past 256: MLA's latent cache (576/512, one KV head against 16 query heads: the decode
  // form packs them), Gemma's 512 in q8_0, and a 320/288 pair with prefill rows and every modifier.
  add({.name = "MLA decode 576/512, MQA 16:1, page 64, append", .dtype = DType::f16, .heads = 16, .kv_heads = 1,
       .dim_qk = 576, .dim_v = 512, .kv = PagedSource{.page_size = 64, .cache_lens = {300, 0, 64}, .seq_new = 1}});
  add({.name = "d512, q8_0, decode, GQA 4:2, hnd pages", .dtype = DType::bf16, .quant = KvQuant::q8_0, .heads = 4,
       .kv_heads = 2, .dim_qk = 512, .dim_v = 512,
       .kv = PagedSource{.page_size = 16, .order = PageOrder::hnd, .cache_lens = {1, 70}, .seq_new = 1}});
  add({.name = "320/288, prefill 20 rows, every modifier, shared prefix pages", .dtype = DType::f32, .heads = 4,
       .kv_heads = 2, .dim_qk = 320, .dim_v = 288, .modifiers = every_modifier(Window{24, 0}, 20.0f, 2),
       .kv = PagedSource{.seq_q = 20, .page_size = 16, .cache_lens = {48, 40}, .shared_pages = 2}});
  // V as a view of K's rows (MLA's one latent cache, read once): the decode shape with an append of
  // k_new alone, a q8_0 view on hnd pages, and the modifiers over a view with rows wider than both dims' use.
  add({.name = "MLA decode 576/512, V a view of K's rows, MQA 16:1, page 64, append k_new alone", .dtype = DType::f16,
       .heads = 16, .kv_heads = 1, .dim_qk = 576, .dim_v = 512,
       .kv = PagedSource{.page_size = 64, .cache_lens = {300, 0, 64}, .seq_new = 1, .v_view = true}});
  add({.name = "V a view of K's rows, q8_0, GQA 4:2, 96/64, hnd, 3 rows, append", .dtype = DType::bf16,
       .quant = KvQuant::q8_0, .heads = 4, .kv_heads = 2, .dim_qk = 96, .dim_v = 64,
       .kv = PagedSource{.seq_q = 3, .page_size = 16, .order = PageOrder::hnd, .cache_lens = {40, 7}, .seq_new = 2,
                         .v_view = true}});
  add({.name = "V a view of K's rows, every modifier, 48/40, page 8", .dtype = DType::f32, .heads = 6, .kv_heads = 3,
       .dim_qk = 48, .dim_v = 40, .modifiers = every_modifier(Window{32, 0}, 20.0f, 3),
       .kv = PagedSource{.seq_q = 3, .page_size = 8, .cache_lens = {70, 0, 9}, .seq_new = 2, .v_view = true}});
  // Cascade: a prefix every sequence shares read once (shared_prefix_pages), the rest per sequence,
  // merged: decode with an append (GQA, a sequence that is the prefix alone), MLA's one latent cache,
  // q8_0 hnd pages with softcap and sinks over 2 rows, and 3 rows without causal.
  add({.name = "cascade decode, 5 sequences share 3 pages, GQA 8:2, append", .dtype = DType::f16, .heads = 8,
       .kv_heads = 2, .kv = PagedSource{.page_size = 16, .cache_lens = {48, 60, 100, 49, 48}, .seq_new = 1,
                                        .shared_pages = 3, .cascade = true}});
  add({.name = "cascade, MLA 576/512, V a view of K's rows, MQA 16:1, page 64, append", .dtype = DType::f16,
       .heads = 16, .kv_heads = 1, .dim_qk = 576, .dim_v = 512,
       .kv = PagedSource{.page_size = 64, .cache_lens = {130, 200, 128}, .seq_new = 1, .shared_pages = 2,
                         .v_view = true, .cascade = true}});
  add({.name = "cascade, q8_0, hnd, softcap and sinks, GQA 6:3, 2 rows, append 2", .dtype = DType::bf16,
       .quant = KvQuant::q8_0, .heads = 6, .kv_heads = 3, .dim_qk = 64, .dim_v = 32,
       .modifiers = {.options = {.softcap = 20.0f}, .sinks = true},
       .kv = PagedSource{.seq_q = 2, .page_size = 16, .order = PageOrder::hnd, .cache_lens = {40, 32, 77}, .seq_new = 2,
                         .shared_pages = 2, .cascade = true}});
  add({.name = "cascade, no causal, 3 rows, MHA, page 8", .dtype = DType::f32, .heads = 3, .kv_heads = 3,
       .causal = Causal::none,
       .kv = PagedSource{.seq_q = 3, .page_size = 8, .cache_lens = {16, 40, 17, 23}, .shared_pages = 2, .cascade = true}});
  return cases;
}

std::vector<ServingCase> packed_cases(uint64_t base_seed, bool long_cases) {
  std::vector<ServingCase> cases;
  const auto add = [&](ServingCase c) {
    c.seed = case_seed(base_seed, 9500 + (long_cases ? 100 : 0) + cases.size());
    cases.push_back(std::move(c));
  };
  if (long_cases) {
    add({.name = "decode against 70,000 keys beside short sequences", .dtype = DType::f16, .heads = 8, .kv_heads = 2,
         .kv = PackedSource{.seq_q = {1, 1, 1}, .seq_k = {70000, 300, 0}}});
    return cases;
  }
  add({.name = "decode, GQA 8:2, d128, empty sequences (no keys; no queries)", .dtype = DType::f16, .heads = 8,
       .kv_heads = 2, .dim_qk = 128, .dim_v = 128,
       .kv = PackedSource{.seq_q = {1, 1, 0, 1, 1}, .seq_k = {37, 0, 5, 1, 200}}});
  add({.name = "prefill, one long and several short, MHA, seq_q > seq_k, both empty", .dtype = DType::f32, .heads = 2,
       .kv_heads = 2, .kv = PackedSource{.seq_q = {150, 3, 0, 7, 20, 0}, .seq_k = {150, 3, 4, 2, 0, 0}}});
  add({.name = "GQA 4:1, causal top-left, padded row strides", .dtype = DType::bf16, .heads = 4, .kv_heads = 1,
       .causal = Causal::top_left, .kv = PackedSource{.seq_q = {33, 17, 64}, .seq_k = {40, 17, 64}, .row_pad = 3}});
  add({.name = "every modifier", .dtype = DType::f32, .heads = 4, .kv_heads = 2,
       .modifiers = every_modifier(Window{16, 0}, 30.0f, 3),
       .kv = PackedSource{.seq_q = {20, 1, 45}, .seq_k = {60, 0, 45}}});
  add({.name = "two-sided window top-left, ALiBi (H), no causal, d128", .dtype = DType::f16, .heads = 2, .kv_heads = 1,
       .dim_qk = 128, .dim_v = 128, .causal = Causal::none,
       .modifiers = {.options = {.window = Window{10, 4}, .align = Align::top_left}, .alibi_batch = 1},
       .kv = PackedSource{.seq_q = {12, 30}, .seq_k = {50, 9}}});
  add({.name = "forced split-KV: few queries, long keys, loose max_seqlen, sinks", .dtype = DType::f32, .heads = 2,
       .kv_heads = 2, .causal = Causal::none, .modifiers = {.sinks = true},
       .kv = PackedSource{.seq_q = {1, 2, 1}, .seq_k = {300, 7, 120}, .loose_max = true, .min_splits = 2}});
  add({.name = "prefill, GQA 8:2, d128, no causal", .dtype = DType::f16, .heads = 8, .kv_heads = 2, .dim_qk = 128,
       .dim_v = 128, .causal = Causal::none, .kv = PackedSource{.seq_q = {40, 8}, .seq_k = {40, 8}}});
  // q8_0 K and V: the decode form (GQA packed, split keys), and prefill rows with padded row strides
  // (gaps of whole blocks) and the modifiers.
  add({.name = "q8_0, decode, GQA 8:2, d128, empty sequences", .dtype = DType::f16, .quant = KvQuant::q8_0, .heads = 8,
       .kv_heads = 2, .dim_qk = 128, .dim_v = 128,
       .kv = PackedSource{.seq_q = {1, 1, 0, 1}, .seq_k = {1500, 0, 5, 31}}});
  add({.name = "q8_0, prefill, padded rows, every modifier", .dtype = DType::bf16, .quant = KvQuant::q8_0, .heads = 4,
       .kv_heads = 2, .dim_qk = 32, .dim_v = 64, .modifiers = every_modifier(Window{16, 0}, 30.0f, 3),
       .kv = PackedSource{.seq_q = {20, 1, 33}, .seq_k = {60, 0, 33}, .row_pad = 32}});
  // Head dims past 256: MLA's decode shape (MQA 576/512) with sinks, and 512 prefill rows in q8_0.
  add({.name = "MLA decode 576/512, MQA 8:1, sinks, an empty sequence", .dtype = DType::f16, .heads = 8, .kv_heads = 1,
       .dim_qk = 576, .dim_v = 512, .modifiers = {.sinks = true},
       .kv = PackedSource{.seq_q = {1, 1, 1}, .seq_k = {90, 0, 33}}});
  add({.name = "d512, q8_0, prefill, GQA 2:1", .dtype = DType::f32, .quant = KvQuant::q8_0, .heads = 2, .kv_heads = 1,
       .dim_qk = 512, .dim_v = 512, .kv = PackedSource{.seq_q = {17, 3}, .seq_k = {40, 3}}});
  return cases;
}

}  // namespace vkattn::conform
