// The GEMM of the three-stage path and of the layer (runtime/gemm.hpp) run alone, on both its kernels —
// gemm.comp (GPUs) and gemm_subgroup.comp (CPU devices, what lavapipe runs) — against a
// double-precision reference of the same rounded inputs, read through the same operand description
// (offsets, batch/head/row/column strides, column blocks, the GQA head of B). Covered: odd sizes (m,
// n, k multiples of nothing), the library's layouts (scores; P·V with V read transposed and
// skip-zero; projections with bias, heads split on store and merged on load; GQA heads; batches
// beyond one dispatch; a paged KV cache read through a block table, shuffled pages and entries out
// of range), the vec4 paths and their all-scalar twins (picked at replay from the
// bindings' element offsets), skip-zero against NaN/Inf, overflowing sums saturating (the subgroup
// kernel's second pass) and NaN/Inf propagating, and long reductions within lavapipe's loop limit.
// C is poisoned (NaN) before each run and followed by guard bytes; elements of C's buffer outside
// the matrix must keep the poison.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attention_record.hpp"
#include "command_list.hpp"
#include "conform/device_profiles.hpp"
#include "context_impl.hpp"
#include "gemm.hpp"
#include "guarded_buffer.hpp"
#include "llvmpipe_limits.hpp"
#include "support.hpp"
#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"

using namespace vkattn;
using namespace vkattn::test;
using detail::GemmCall;
using detail::GemmChoice;
using detail::GemmKernel;
using detail::GemmOperand;
using detail::GemmPagedB;

namespace {

constexpr float kFltMax = std::numeric_limits<float>::max();

// Element index of (batch b, head h', row r, column c) of an operand (gemm.hpp's formula).
int64_t element(const GemmOperand& o, int64_t b, int64_t h, int64_t r, int64_t c) {
  const int64_t in_block = o.col_block > 0 ? c % o.col_block : c, block = o.col_block > 0 ? c / o.col_block : 0;
  return o.offset + b * o.stride_batch + h * o.stride_head + r * o.stride_row + block * o.stride_block + in_block * o.stride_col;
}

// The largest element index an operand reaches, plus one (what its buffer must hold).
int64_t extent(const GemmOperand& o, int64_t batch, int64_t heads, int64_t rows, int64_t cols) {
  return element(o, std::max<int64_t>(batch - 1, 0), std::max<int64_t>(heads - 1, 0), std::max<int64_t>(rows - 1, 0),
                 std::max<int64_t>(cols - 1, 0)) + 1;
}

// A GEMM with its inputs, in element indices from the start of each operand's slot.
struct Problem {
  GemmCall call;
  std::vector<float> a, b, bias;  // values already rounded to their dtypes
  std::vector<int32_t> table;     // a paged B's block table (call.paged_b), bound where the bias goes
  std::vector<int32_t> lengths;   // and its cache lengths, one per batch
  std::string name;
  bool exact = false;  // integer data whose every partial sum is exact in f32: no tolerance
};

// Slot numbers of the test's command lists.
enum : uint32_t { kSlotA = 1, kSlotB, kSlotC, kSlotBias, kSlotLengths };

// Dense row-major operands of the shapes in `call`, sized from its strides; values uniform in
// [-1, 1) (the weights A of a skip-zero call: a quarter exactly 0, the rest in [0, 1)).
Problem make_problem(GemmCall call, uint64_t seed, const std::string& name) {
  Problem p;
  p.name = name;
  call.a.slot = kSlotA, call.b.slot = kSlotB, call.c.slot = kSlotC;
  const int64_t kv_heads = (call.head_base + call.heads - 1) / call.group + 1;
  call.a.end = extent(call.a, call.batch, call.heads, call.m, call.k);
  call.b.end = extent(call.b, call.batch, kv_heads, call.n, call.k);
  call.c.end = extent(call.c, call.batch, call.heads, call.m, call.n);
  if (call.has_bias) call.bias_slot = kSlotBias;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  p.a.resize(size_t(call.a.end));
  for (float& x : p.a) x = round_to(call.a.dtype, call.skip_zero_a ? (rng() % 4 == 0 ? 0.0f : std::abs(dist(rng))) : dist(rng));
  p.b.resize(size_t(call.b.end));
  for (float& x : p.b) x = round_to(call.b.dtype, dist(rng));
  p.bias.resize(size_t(call.n));
  for (float& x : p.bias) x = round_to(call.b.dtype, dist(rng));
  p.call = call;
  return p;
}

// A paged B's keys of batch b (all of them for any other B): its cache length, clamped, plus the
// appended tokens, at most the capacity (n for the scores, k for P·V).
int64_t paged_keys(const Problem& p, int64_t b) {
  const GemmCall& g = p.call;
  if (!g.paged_b) return g.k;
  const int64_t capacity = g.paged_b->keys_are_columns ? g.k : g.n;
  return std::min<int64_t>(std::max<int64_t>(p.lengths[size_t(b)], 0) + g.paged_b->appended, capacity);
}

// Element index of B(b, h', r, c): its operand's formula, or a paged B's through the table with
// entries clamped into [0, pages) (gemm.hpp, GemmPagedB).
int64_t b_element(const Problem& p, int64_t b, int64_t h, int64_t r, int64_t c) {
  const GemmCall& g = p.call;
  if (!g.paged_b) return element(g.b, b, h, r, c);
  const GemmPagedB& t = *g.paged_b;
  const int64_t key = t.keys_are_columns ? c : r, other = t.keys_are_columns ? r : c;
  const int64_t page = std::clamp<int64_t>(p.table[size_t(b * t.entries_per_batch + key / t.page_size)], 0, t.pages - 1);
  const int64_t key_stride = t.keys_are_columns ? g.b.stride_col : g.b.stride_row;
  const int64_t other_stride = t.keys_are_columns ? g.b.stride_row : g.b.stride_col;
  return g.b.offset + h * g.b.stride_head + page * t.page_elements + (key % t.page_size) * key_stride + other * other_stride;
}

Buffer upload(Context& ctx, const std::vector<float>& values, DType dtype, uint64_t lead_bytes) {
  std::vector<uint8_t> bytes(lead_bytes + values.size() * dtype_size(dtype), 0);
  encode(dtype, values.data(), bytes.data() + lead_bytes, values.size());
  Buffer buffer = Buffer::allocate(ctx, std::max<uint64_t>(bytes.size(), 16));
  buffer.upload(bytes.data(), bytes.size());
  return buffer;
}

// What C's elements must be: the reference of every element of the matrices, and which of the
// buffer's elements they are (the others must keep the poison).
struct Expected {
  std::vector<double> value;      // per element of C's buffer; NaN where NaN is expected
  std::vector<double> magnitude;  // sum of |alpha a b| (+ |bias|): the error scale
  std::vector<bool> written;
  std::vector<bool> optional;  // may be written or not (a paged B's scores past a sequence's keys)
};

Expected reference(const Problem& p) {
  const GemmCall& c = p.call;
  Expected e;
  e.value.assign(size_t(c.c.end), 0.0);
  e.magnitude.assign(size_t(c.c.end), 0.0);
  e.written.assign(size_t(c.c.end), false);
  e.optional.assign(size_t(c.c.end), false);
  for (int64_t bz = 0; bz < c.batch; ++bz)
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t keys = paged_keys(p, bz);
      const bool keys_are_rows = c.paged_b && !c.paged_b->keys_are_columns;
      const int64_t kv = (c.head_base + h) / c.group;
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          double dot = 0, mag = 0;
          if (keys_are_rows && j >= keys) {  // past the sequence: whole tiles are skipped
            e.optional[size_t(element(c.c, bz, h, i, j))] = true;
            continue;
          }
          for (int64_t k = 0; k < (c.paged_b && c.paged_b->keys_are_columns ? keys : c.k); ++k) {
            const double av = p.a[size_t(element(c.a, bz, h, i, k))], bv = p.b[size_t(b_element(p, bz, kv, j, k))];
            if (c.skip_zero_a && av == 0) continue;
            dot += av * bv;
            mag += std::abs(av * bv);
          }
          // The score rule: the exact product saturates at +-FLT_MAX; NaN/Inf inputs propagate.
          double v = dot * double(c.alpha);
          if (std::isfinite(v) && std::abs(v) > kFltMax) v = std::copysign(double(kFltMax), v);
          mag *= std::abs(double(c.alpha));
          if (c.has_bias) {
            const double bias = p.bias[size_t(j)];
            const bool finite = std::isfinite(v) && std::isfinite(bias);
            v = double(float(v)) + bias;
            if (finite && std::abs(v) > kFltMax) v = std::copysign(double(kFltMax), v);
            mag += std::abs(bias);
          }
          const size_t at = size_t(element(c.c, bz, h, i, j));
          e.value[at] = v;
          e.magnitude[at] = mag;
          e.written[at] = true;
        }
    }
  return e;
}

// Runs `list` (made by emit_gemm for p.call) with every slot starting `shift` elements into its
// buffer, and checks C. Returns the number of elements checked.
int64_t run_and_check(const detail::CommandList& list, const Problem& p, int64_t shift, const std::string& what) {
  Context& ctx = context();
  detail::ContextImpl& c = detail::impl_of(ctx);
  const GemmCall& call = p.call;
  const uint64_t sa = uint64_t(shift) * dtype_size(call.a.dtype), sb = uint64_t(shift) * dtype_size(call.b.dtype),
                 sc = uint64_t(shift) * dtype_size(call.c.dtype);
  Buffer a = upload(ctx, p.a, call.a.dtype, sa), b = upload(ctx, p.b, call.b.dtype, sb),
         bias = upload(ctx, p.bias, call.b.dtype, sb);
  Buffer lengths = Buffer::allocate(ctx, std::max<uint64_t>(p.lengths.size() * 4, 16));
  if (call.paged_b) {  // the table where the bias goes (paged calls run unshifted: word offsets)
    REQUIRE(shift == 0);
    bias = Buffer::allocate(ctx, std::max<uint64_t>(p.table.size() * 4, 16));
    bias.upload(p.table.data(), p.table.size() * 4);
    lengths.upload(p.lengths.data(), p.lengths.size() * 4);
  }
  GuardedBuffer out(ctx, sc + uint64_t(call.c.end) * dtype_size(call.c.dtype));
  const std::vector<detail::SlotBase> slots = {{}, detail::slot_of(a, sa), detail::slot_of(b, sb),
                                               detail::slot_of(out.buffer(), sc), detail::slot_of(bias, sb),
                                               detail::slot_of(lengths)};
  c.submit_and_wait([&](VkCommandBuffer cmd) {
    detail::barrier_before_attention(cmd);
    list.replay(c, cmd, slots);
    detail::barrier_after_attention(cmd);
  });
  expect_no_validation_messages();
  const std::vector<uint8_t> bytes = out.download_checked(what + ": C");
  for (uint64_t i = 0; i < sc; ++i)
    if (bytes[i] != GuardedBuffer::kPoison) {
      FAIL_CHECK(what << ": a byte before C's slot was written");
      break;
    }
  std::vector<float> got(size_t(call.c.end));
  decode(call.c.dtype, bytes.data() + sc, got.data(), got.size());

  const Expected e = reference(p);
  // f32 accumulation over blocks (the kernels' partial sums) against the error scale, then the
  // rounding of C's dtype.
  const double tol = 2e-6 * std::sqrt(double(std::max<int64_t>(call.k, 1))) + 1e-6;
  const double rounding = call.c.dtype == DType::f32 ? 0.0 : call.c.dtype == DType::f16 ? 1.0 / 1024 : 1.0 / 128;
  int64_t bad = 0, checked = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i];
    bool ok;
    if (e.optional[i]) {
      ok = true;  // computed from the clamped pages past the sequence, or skipped with its tile
    } else if (!e.written[i]) {
      ok = std::isnan(g);  // the poison, untouched
    } else {
      ++checked;
      const double r = double(round_to(call.c.dtype, float(e.value[i])));
      if (std::isnan(e.value[i])) ok = std::isnan(g);
      else if (std::isinf(r)) ok = g == r;
      else if (p.exact) ok = g == r;
      else ok = std::isfinite(g) && std::abs(g - r) <= tol * e.magnitude[i] + rounding * std::abs(r) + 1e-30;
    }
    if (!ok && bad++ == 0)
      first << "element " << i << (e.written[i] ? "" : " (outside the matrix)") << ": got " << g << ", expected "
            << (e.written[i] ? e.value[i] : std::nan(""));
  }
  if (bad) FAIL_CHECK(what << ": " << bad << " wrong elements of " << got.size() << "; first: " << first.str());
  return checked;
}

GemmChoice subgroup_choice() { return detail::choose_gemm(detail::impl_of(context()).info); }
bool has_subgroup_kernel() { return subgroup_choice().kernel == GemmKernel::subgroup; }

// The kernels to run: gemm.comp, and gemm_subgroup.comp where this device picks it.
std::vector<GemmChoice> kernels() {
  std::vector<GemmChoice> k{GemmChoice{}};
  if (has_subgroup_kernel()) k.push_back(subgroup_choice());
  else MESSAGE("this device does not pick the subgroup GEMM: only gemm.comp runs");
  return k;
}

std::string kernel_name(const GemmChoice& choice) { return choice.kernel == GemmKernel::subgroup ? "subgroup" : "tiled"; }

void run(const GemmChoice& choice, const Problem& p, int64_t shift = 0) {
  detail::ContextImpl& c = detail::impl_of(context());
  detail::check_gemm_shape(c.info, choice, p.name, p.call.m, p.call.n, p.call.k);
  detail::CommandList list(std::max<uint64_t>(c.info.min_storage_buffer_offset_alignment, 16));
  detail::emit_gemm(c, list, p.call, choice);
  const std::string what = p.name + " (" + kernel_name(choice) + ", " + detail::gemm_description(choice, p.call) +
                           ", shift " + std::to_string(shift) + ")";
  INFO(what);
  const std::vector<bool> written = reference(p).written;  // every element of the matrices, but a paged B's past its keys
  CHECK(run_and_check(list, p, shift, what) == std::count(written.begin(), written.end(), true));
}

// The library's three layouts (attention_unfused.cpp, mha_prepared.cpp), with row strides padded by
// `pad` elements (0: dense).
GemmCall scores_call(int64_t m, int64_t n, int64_t k, DType dtype, int64_t pad) {
  GemmCall g;
  g.m = m, g.n = n, g.k = k, g.alpha = 0.125f;
  g.a.dtype = g.b.dtype = dtype, g.c.dtype = DType::f32;
  g.a.stride_row = k + pad, g.b.stride_row = k + pad, g.c.stride_row = n;
  return g;
}
GemmCall pv_call(int64_t m, int64_t n, int64_t k, DType dtype, int64_t pad) {
  GemmCall g;
  g.m = m, g.n = n, g.k = k, g.skip_zero_a = true;
  g.a.dtype = DType::f32, g.b.dtype = g.c.dtype = dtype;
  g.a.stride_row = k;
  g.b.stride_row = 1, g.b.stride_col = n + pad;  // V (k, n) read transposed
  g.c.stride_row = n + pad;
  return g;
}
GemmCall linear_call(int64_t m, int64_t n, int64_t k, DType dtype, int64_t pad) {
  GemmCall g;
  g.m = m, g.n = n, g.k = k, g.has_bias = true;
  g.a.dtype = g.b.dtype = g.c.dtype = dtype;
  g.a.stride_row = k + pad, g.b.stride_row = k, g.c.stride_row = n + pad;
  return g;
}

// A paged cache of `pages` pages of `page_size` rows of kv_heads x row elements (nhd), the scores'
// B (keys as rows, GEMM_FLAG_B_PAGED_ROWS) or P·V's (keys as columns, the first `dim` elements of a
// row: V a view of K's rows), over `batch` sequences of `keys` keys whose tables hand out the pages
// shuffled, entries past a sequence's pages and two out of range (clamped), and cache lengths (plus
// `appended` tokens) that end a sequence at its capacity, inside a page, at the appended tokens alone
// (a negative length) and past the capacity (INT32_MAX, clamped).
Problem paged_problem(bool pv, int64_t m, int64_t keys, int64_t dim, int64_t row, int64_t page_size, int64_t kv_heads,
                      int64_t batch, DType dtype, uint64_t seed, const std::string& name) {
  const int64_t entries = (keys + page_size - 1) / page_size, pages = batch * entries;
  GemmCall g = pv ? pv_call(m, dim, keys, dtype, 0) : scores_call(m, keys, dim, dtype, 0);
  g.batch = batch, g.heads = kv_heads;
  g.a.stride_batch = kv_heads * m * (pv ? keys : dim), g.a.stride_head = m * (pv ? keys : dim);
  g.c.stride_batch = kv_heads * m * (pv ? dim : keys), g.c.stride_head = m * (pv ? dim : keys);
  g.b.stride_head = row;
  (pv ? g.b.stride_col : g.b.stride_row) = kv_heads * row;
  GemmPagedB t;
  t.entries_per_batch = entries + 1;  // one more column than any sequence uses
  t.pages = pages, t.page_size = page_size, t.page_elements = page_size * kv_heads * row;
  t.keys_are_columns = pv;
  t.table_slot = kSlotBias;
  t.lengths_slot = kSlotLengths;
  t.appended = pv ? 1 : 2;
  g.paged_b = t;
  Problem p = make_problem(g, seed, name);
  p.call.b.end = pages * t.page_elements;
  std::mt19937_64 rng(seed + 1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  p.b.resize(size_t(p.call.b.end));
  for (float& x : p.b) x = round_to(dtype, dist(rng));
  std::vector<int32_t> order(static_cast<size_t>(pages));
  for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
  std::shuffle(order.begin(), order.end(), rng);
  p.table.assign(size_t(batch * t.entries_per_batch), 7777);  // past the pages: clamped, never read
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t e = 0; e < entries; ++e) p.table[size_t(b * t.entries_per_batch + e)] = order[size_t(b * entries + e)];
  p.table[0] = -3;                                  // clamped to page 0
  p.table[size_t(t.entries_per_batch)] = 1 << 30;  // clamped to the last page
  const int32_t lengths[] = {int32_t(keys - t.appended), 17, -7, std::numeric_limits<int32_t>::max()};
  for (int64_t b = 0; b < batch; ++b) p.lengths.push_back(lengths[b % 4]);
  return p;
}

}  // namespace

TEST_SUITE("gemm") {
  TEST_CASE("odd sizes and the library's layouts on both kernels") {
    struct Size {
      int64_t m, n, k;
    };
    // Tiles of every kind (1, 4, 8, 16 and 32 rows; 4 and 8 columns per lane), partial in m, n and k;
    // each also with k a multiple of 4 and a half step of k past the last whole one (A read by quads).
    const std::vector<Size> sizes = {{1, 1, 1},   {7, 13, 5},  {2, 200, 64},  {4, 33, 40},   {8, 70, 3},  {33, 65, 9},
                                     {16, 37, 21}, {70, 100, 130}, {1, 50, 20}, {8, 30, 36}, {16, 20, 44}, {33, 40, 28}};
    uint64_t seed = base_seed();
    for (const GemmChoice& choice : kernels())
      for (const Size& s : sizes)
        for (const int64_t pad : {int64_t(0), int64_t(3)}) {
          const std::string shape = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " pad " +
                                    std::to_string(pad);
          run(choice, make_problem(scores_call(s.m, s.n, s.k, DType::f16, pad), ++seed, "scores f16 " + shape));
          run(choice, make_problem(pv_call(s.m, s.n, s.k, pad ? DType::bf16 : DType::f32, pad), ++seed, "P·V " + shape));
          run(choice, make_problem(linear_call(s.m, s.n, s.k, pad ? DType::f32 : DType::f16, pad), ++seed, "linear " + shape));
        }
  }

  TEST_CASE("vec4 operands, and the all-scalar twin where an element offset is not a multiple of 4") {
    if (!has_subgroup_kernel()) return;
    const GemmChoice choice = subgroup_choice();
    detail::ContextImpl& c = detail::impl_of(context());
    struct Layout {
      Problem p;
      uint32_t vec;
    };
    std::vector<Layout> layouts;
    layouts.push_back({make_problem(scores_call(64, 96, 64, DType::f32, 0), base_seed() + 1, "scores f32 64x96x64"),
                       GEMM_SG_VEC_A_K | GEMM_SG_VEC_B_K | GEMM_SG_VEC_C});
    layouts.push_back({make_problem(pv_call(40, 64, 100, DType::f16, 0), base_seed() + 2, "P·V f16 40x64x100"),
                       GEMM_SG_VEC_A_K | GEMM_SG_VEC_B_N | GEMM_SG_VEC_C});
    layouts.push_back({make_problem(linear_call(33, 48, 36, DType::bf16, 4), base_seed() + 3, "linear bf16 33x48x36"),
                       GEMM_SG_VEC_A_K | GEMM_SG_VEC_B_K | GEMM_SG_VEC_C});
    // Scores into f32 rows of 1 + 4k elements: B by vec4, C element by element.
    GemmCall odd_c = scores_call(20, 40, 12, DType::f16, 0);
    odd_c.c.stride_row = 41;
    layouts.push_back({make_problem(odd_c, base_seed() + 4, "scores f16, C rows of 41"), GEMM_SG_VEC_A_K | GEMM_SG_VEC_B_K});
    // Q in rows of 1 + 4k elements: A element by element, B by quads.
    GemmCall odd_a = scores_call(20, 40, 12, DType::f32, 0);
    odd_a.a.stride_row = 13;
    layouts.push_back({make_problem(odd_a, base_seed() + 6, "scores f32, Q rows of 13"), GEMM_SG_VEC_B_K | GEMM_SG_VEC_C});
    for (const Layout& l : layouts) {
      INFO(l.p.name);
      CHECK(detail::gemm_vec_bits(choice, l.p.call) == l.vec);
      detail::CommandList list(std::max<uint64_t>(c.info.min_storage_buffer_offset_alignment, 16));
      detail::emit_gemm(c, list, l.p.call, choice);
      // One list, replayed with its slots 0 to 3 elements into their buffers: the vec4 pipeline, then its twin.
      for (int64_t shift = 0; shift < 4; ++shift)
        CHECK(run_and_check(list, l.p, shift, l.p.name + ", slots shifted by " + std::to_string(shift)) ==
              l.p.call.m * l.p.call.n);
    }
    // An operand that starts one element into its slot (known when planning): the twin from the start.
    Problem shifted = make_problem(
        [] {
          GemmCall g = pv_call(24, 32, 40, DType::f32, 0);
          g.b.offset = 1, g.c.offset = 3;
          return g;
        }(),
        base_seed() + 5, "P·V with V and O at element offsets 1 and 3");
    run(choice, shifted);
  }

  TEST_CASE("skip-zero: a weight of exactly 0 never multiplies NaN or Inf; a non-zero one propagates them") {
    // 19 rows: the subgroup kernel's 32-row tiles select per multiply-add; 13 and 3: its short tiles
    // add plainly and redo the sums that came out NaN/Inf with the selects (GEMM_SG_FLAG_SKIP_ZERO_BY_REDO).
    for (const GemmChoice& choice : kernels())
      for (const int64_t rows : {int64_t(19), int64_t(13), int64_t(3)})
      for (const DType dtype : {DType::f32, DType::f16}) {
        Problem p = make_problem(pv_call(rows, 20, 37, dtype, 0), base_seed() + 10,
                                 "P·V " + std::to_string(rows) + " rows " + to_string(dtype));
        const GemmCall& g = p.call;
        const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
        // Keys 3, 8 and 36 (the last, in a partial step of k): masked in every row, NaN/Inf in V.
        for (const int64_t key : {3, 8, 36}) {
          for (int64_t i = 0; i < g.m; ++i) p.a[size_t(element(g.a, 0, 0, i, key))] = 0.0f;
          for (int64_t j = 0; j < g.n; ++j) p.b[size_t(element(g.b, 0, 0, j, key))] = j % 3 == 0 ? nan : j % 3 == 1 ? inf : -inf;
        }
        // Key 5: Inf in column 2 of V, visible (non-zero weight) only in rows 1 and m - 2: those are Inf.
        for (int64_t i = 0; i < g.m; ++i) p.a[size_t(element(g.a, 0, 0, i, 5))] = (i == 1 || i == g.m - 2) ? 0.5f : 0.0f;
        p.b[size_t(element(g.b, 0, 0, 2, 5))] = inf;
        run(choice, p);
      }
  }

  TEST_CASE("overflowing sums saturate (the exact product), NaN and Inf inputs propagate") {
    for (const GemmChoice& choice : kernels())
      for (const int64_t k : {int64_t(13), int64_t(16384)}) {  // 16384: the longest k whose sums are redone
        for (const bool bias : {false, true}) {
          GemmCall g = bias ? linear_call(40, 70, k, DType::f32, 0) : scores_call(40, 70, k, DType::f32, 0);
          g.alpha = bias ? 1.0f : 1e-10f;
          Problem p = make_problem(g, base_seed() + 20 + uint64_t(k), std::string("overflow k ") + std::to_string(k) + (bias ? " + bias" : ", alpha 1e-10"));
          const GemmCall& c = p.call;
          auto a = [&](int64_t i, int64_t kk) -> float& { return p.a[size_t(element(c.a, 0, 0, i, kk))]; };
          auto b = [&](int64_t j, int64_t kk) -> float& { return p.b[size_t(element(c.b, 0, 0, j, kk))]; };
          // Row 1 x column 2: 1e20 x 1e20 products, +1e40 each: beyond f32, saturates (alpha 1: FLT_MAX;
          // alpha 1e-10: the exact 1e30s, finite, from sums that overflowed).
          for (int64_t kk = 0; kk < 4; ++kk) a(1, kk) = 1e20f, b(2, kk) = 1e20f;
          // Row 5 x column 2: a negative overflow.
          for (int64_t kk = 0; kk < 4; ++kk) a(5, kk) = -1e20f;
          // Row 6 x column 9: partial sums beyond f32 that cancel: exactly 0 plus the small rest.
          if (k >= 4) {
            a(6, 0) = 3e38f, a(6, 1) = 3e38f, a(6, 2) = -3e38f, a(6, 3) = -3e38f;
            for (int64_t kk = 0; kk < 4; ++kk) b(9, kk) = 2.0f;
          }
          // Row 30: NaN in A; column 60: +Inf in B (row 31 sees it against -1: -Inf).
          a(30, k - 1) = std::nanf("");
          b(60, 0) = std::numeric_limits<float>::infinity();
          a(31, 0) = -1.0f;
          run(choice, p);
        }
      }
  }

  TEST_CASE("heads split and merged, GQA heads, batches beyond one dispatch") {
    for (const GemmChoice& choice : kernels()) {
      // A projection whose store splits heads (C's column blocks of D = 12) over 3 batches of shared weights.
      const int64_t B = 3, S = 21, E = 36, H = 3, D = 12;
      GemmCall split = linear_call(S, E, E, DType::f32, 0);
      split.batch = B;
      split.a.stride_batch = S * E;
      split.c.stride_batch = H * S * D, split.c.stride_row = D, split.c.col_block = D, split.c.stride_block = S * D;
      run(choice, make_problem(split, base_seed() + 30, "projection, heads split"));
      // The output projection: A's columns merged from heads (A's column blocks), f16.
      GemmCall merged = linear_call(S, E, E, DType::f16, 0);
      merged.batch = B;
      merged.a.stride_batch = H * S * D, merged.a.stride_row = D, merged.a.col_block = D, merged.a.stride_block = S * D;
      merged.c.stride_batch = S * E;
      run(choice, make_problem(merged, base_seed() + 31, "output projection, heads merged"));
      // Scores of query heads 1..5 of a GQA group of 3 (kv head = (1 + h) / 3), BSHD strides.
      GemmCall gqa = scores_call(9, 11, 8, DType::f32, 0);
      gqa.heads = 5, gqa.group = 3, gqa.head_base = 1, gqa.batch = 2;
      gqa.a.stride_row = 6 * 8, gqa.a.stride_head = 8, gqa.a.stride_batch = 9 * 6 * 8;
      gqa.b.stride_row = 2 * 8, gqa.b.stride_head = 8, gqa.b.stride_batch = 11 * 2 * 8;
      gqa.c.stride_head = 9 * 11, gqa.c.stride_batch = 5 * 9 * 11;
      run(choice, make_problem(gqa, base_seed() + 32, "GQA scores, heads from 1, BSHD"));
      // More matrices than the grid's z: emit_gemm cuts the batches across dispatches.
      const int64_t many = int64_t(detail::impl_of(context()).info.max_workgroup_count[2]) + 5;
      GemmCall batches = pv_call(2, 3, 5, DType::f32, 0);
      batches.batch = many;
      batches.a.stride_batch = 2 * 5, batches.b.stride_batch = 5 * 3, batches.c.stride_batch = 2 * 3;
      run(choice, make_problem(batches, base_seed() + 33, std::to_string(many) + " batches"));
    }
  }

  TEST_CASE("a paged KV cache read through its block table: the scores' rows, P·V's columns") {
    for (const GemmChoice& choice : kernels())
      for (const DType dtype : {DType::f32, DType::f16}) {
        // Page sizes 16 and 3 (keys across page edges, a partial last page), dims multiples of 4
        // (the vec4 reads) and odd, GQA heads, 1 to 16 rows, and V a view of wider rows.
        run(choice, paged_problem(false, 16, 70, 64, 64, 16, 2, 3, dtype, base_seed() + 40, "paged scores, page 16"));
        run(choice, paged_problem(false, 1, 29, 13, 13, 3, 1, 2, dtype, base_seed() + 41, "paged scores, page 3, dim 13"));
        run(choice, paged_problem(true, 16, 70, 64, 64, 16, 2, 3, dtype, base_seed() + 42, "paged P·V, page 16"));
        run(choice, paged_problem(true, 4, 29, 12, 20, 3, 1, 2, dtype, base_seed() + 43, "paged P·V, page 3, V a view"));
        run(choice, paged_problem(true, 1, 33, 13, 13, 16, 3, 2, dtype, base_seed() + 44, "paged P·V, dim 13"));
        // Four sequences (every kind of length) over 600 keys: whole column tiles past a sequence.
        run(choice, paged_problem(false, 4, 600, 32, 32, 16, 1, 4, dtype, base_seed() + 45, "paged scores, 600 keys"));
        run(choice, paged_problem(true, 4, 600, 32, 32, 16, 1, 4, dtype, base_seed() + 46, "paged P·V, 600 keys"));
      }
  }

  TEST_CASE("long reductions stay exact within lavapipe's loop limit") {
    detail::ContextImpl& c = detail::impl_of(context());
    for (const GemmChoice& choice : kernels())
      for (const int64_t k : {int64_t(65536), int64_t(300000)}) {
        // Small integers: every partial sum is exact in f32, so any lost or repeated step shows.
        Problem p = make_problem(pv_call(3, 8, k, DType::f32, 0), base_seed() + 40, "P·V over " + std::to_string(k) + " keys");
        std::mt19937 rng{uint32_t(k)};
        for (float& x : p.a) x = float(int(rng() % 5) - 1);  // -1 .. 3, some 0
        for (float& x : p.b) x = float(int(rng() % 7) - 3);
        p.exact = true;
        run(choice, p);
        Problem s = make_problem(linear_call(2, 4, k, DType::f32, 0), base_seed() + 41, "projection over " + std::to_string(k));
        for (float& x : s.a) x = float(int(rng() % 5) - 2);
        for (float& x : s.b) x = float(int(rng() % 5) - 2);
        for (float& x : s.bias) x = 0.5f;
        s.exact = true;
        run(choice, s);
      }
    // Past the limit, the shape is refused, not run wrong.
    if (c.info.is_llvmpipe)
      for (const GemmChoice& choice : kernels())
        CHECK_THROWS_WITH_AS(detail::check_gemm_shape(c.info, choice, "P·V", 4, 64, 2000000),
                             doctest::Contains("loop limit"), Error);
  }
}

TEST_SUITE("unit") {
  TEST_CASE("the GEMM kernel of each device class, and its loop count on lavapipe") {
    for (const conform::DeviceProfile& profile : conform::device_profiles()) {
      const GemmChoice choice = detail::choose_gemm(profile.info);
      INFO(profile.id);
      // CPU devices with one subgroup size take the subgroup kernel; GPUs keep gemm.comp.
      CHECK((choice.kernel == GemmKernel::subgroup) == (profile.id == "llvmpipe"));
      if (choice.kernel == GemmKernel::subgroup) CHECK(choice.lanes == profile.info.subgroup_size);
    }
    DeviceInfo cpu = conform::find_device_profile("llvmpipe").info;
    cpu.min_subgroup_size = 4;  // pipelines may run with smaller subgroups than reported: not one subgroup per workgroup
    CHECK(detail::choose_gemm(cpu).kernel == GemmKernel::tiled);
    cpu = conform::find_device_profile("llvmpipe").info;
    cpu.subgroup_shuffle = false;
    CHECK(detail::choose_gemm(cpu).kernel == GemmKernel::tiled);

    // On llvmpipe every accepted k loops within the budget, and the longest is accepted.
    const DeviceInfo lvp = conform::find_device_profile("llvmpipe").info;
    for (const GemmChoice& choice : {GemmChoice{}, detail::choose_gemm(lvp)})
      for (const int64_t m : {int64_t(1), int64_t(4), int64_t(8), int64_t(16), int64_t(1024)})
        for (const int64_t n : {int64_t(8), int64_t(64), int64_t(1000)}) {
          int64_t k = 1;
          while (detail::gemm_loop_iterations(choice, m, n, k * 2) <= detail::kLlvmpipeLoopBudget) k *= 2;
          CHECK_NOTHROW(detail::check_gemm_shape(lvp, choice, "gemm", m, n, k));
          CHECK(detail::gemm_loop_iterations(choice, m, n, k) <= detail::kLlvmpipeLoopBudget);
          CHECK(k >= 262144);  // P·V over 256k keys in one chunk
          CHECK_THROWS_AS(detail::check_gemm_shape(lvp, choice, "gemm", m, n, 4 * k), Error);
        }
    // A plan made for llvmpipe's 8 lanes does not run on a device of other subgroup sizes.
    DeviceInfo other = lvp;
    other.subgroup_size = other.min_subgroup_size = other.max_subgroup_size = 16;
    CHECK_THROWS_WITH_AS(detail::check_gemm_shape(other, detail::choose_gemm(lvp), "scores", 64, 64, 64),
                         doctest::Contains("subgroups of exactly 8"), Error);
  }
}
