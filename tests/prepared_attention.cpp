// PreparedAttention: a call planned once gives, run after run and on other buffers each time,
// exactly what attention() gives for the same arguments; and it refuses buffers that do not fit its
// plan, naming them, before anything is recorded or any output touched.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "allocation_counter.hpp"
#include "command_buffer.hpp"
#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

struct Shape {
  const char* name;
  int64_t batch, heads, kv_heads, seq_q, seq_k, dim;
  DType dtype;
  Causal causal;
  bool mask, kv_lengths, lse, weights;
};

// One set of argument buffers of `spec`'s shapes, filled with random values (inputs) and 0xFF (outputs).
struct Arguments {
  std::optional<Buffer> q, k, v, out, mask, lse, kv_lengths, weights;

  Arguments(Context& ctx, const AttentionSpec& spec, std::mt19937_64& rng) {
    const AttentionLayouts l = spec.dense_layouts();
    const auto random = [&](const TensorLayout& t) {
      std::normal_distribution<float> normal;
      std::vector<float> values(static_cast<std::size_t>(t.required_elements()));
      for (float& x : values) x = normal(rng);
      std::vector<std::byte> bytes(values.size() * dtype_size(t.dtype));
      encode(t.dtype, values.data(), bytes.data(), values.size());
      Buffer b = Buffer::allocate(ctx, bytes.size());
      b.upload(bytes.data(), bytes.size());
      return b;
    };
    q.emplace(random(l.q));
    k.emplace(random(l.k));
    v.emplace(random(l.v));
    out.emplace(Buffer::allocate(ctx, uint64_t(l.out.required_elements()) * dtype_size(l.out.dtype)));
    const uint64_t rows = uint64_t(l.q.batch * l.q.heads * l.q.seq);
    if (l.mask) {
      std::vector<uint8_t> keep(static_cast<std::size_t>(l.mask->required_elements()));
      for (uint8_t& x : keep) x = rng() % 4 != 0;
      mask.emplace(Buffer::allocate(ctx, keep.size()));
      mask->upload(keep.data(), keep.size());
    }
    if (l.has_lse) lse.emplace(Buffer::allocate(ctx, rows * 4));
    if (l.has_kv_lengths) {
      std::vector<int32_t> lengths(static_cast<std::size_t>(l.q.batch));
      for (int32_t& n : lengths) n = static_cast<int32_t>(rng() % uint64_t(l.k.seq + 1));
      kv_lengths.emplace(Buffer::allocate(ctx, lengths.size() * 4));
      kv_lengths->upload(lengths.data(), lengths.size() * 4);
    }
    if (spec.weights) weights.emplace(Buffer::allocate(ctx, rows * uint64_t(l.k.seq) * 4));
  }

  void poison() {
    for (std::optional<Buffer>* b : {&out, &lse, &weights})
      if (*b) (*b)->fill(0xFF);
  }

  AttentionBuffers buffers() const {
    AttentionBuffers b;
    b.q = &*q, b.k = &*k, b.v = &*v, b.out = &*out;
    if (mask) b.mask = &*mask;
    if (lse) b.lse = {&*lse, 0};
    if (kv_lengths) b.kv_lengths = {&*kv_lengths, 0};
    if (weights) b.weights = {&*weights, 0};
    return b;
  }

  AttentionArgs args(const AttentionSpec& spec) const {
    AttentionArgs a;
    const AttentionBuffers b = buffers();
    const AttentionLayouts l = spec.dense_layouts();
    a.q = {b.q, l.q}, a.k = {b.k, l.k}, a.v = {b.v, l.v}, a.out = {b.out, l.out};
    if (l.mask) a.mask = {b.mask, *l.mask};
    a.lse = b.lse, a.kv_lengths = b.kv_lengths, a.weights = b.weights;
    a.options = l.options;
    a.path = spec.path;
    return a;
  }

  // The outputs' bytes, in one vector.
  std::vector<uint8_t> outputs() const {
    std::vector<uint8_t> all;
    for (const std::optional<Buffer>* b : {&out, &lse, &weights})
      if (*b) {
        std::vector<uint8_t> bytes((*b)->size());
        (*b)->download(bytes.data(), bytes.size());
        all.insert(all.end(), bytes.begin(), bytes.end());
      }
    return all;
  }
};

AttentionSpec spec_of(const Shape& s) {
  AttentionLayouts l;
  l.q = TensorLayout::bhsd(s.dtype, s.batch, s.heads, s.seq_q, s.dim);
  l.k = TensorLayout::bhsd(s.dtype, s.batch, s.kv_heads, s.seq_k, s.dim);
  l.v = TensorLayout::bhsd(s.dtype, s.batch, s.kv_heads, s.seq_k, s.dim);
  l.out = TensorLayout::bhsd(s.dtype, s.batch, s.heads, s.seq_q, s.dim);
  if (s.mask) l.mask = MaskLayout::dense(MaskType::boolean, 1, 1, s.seq_q, s.seq_k);
  l.has_lse = s.lse;
  l.has_kv_lengths = s.kv_lengths;
  l.options.causal = s.causal;
  return AttentionSpec::dense(l, s.weights);
}

// `from`'s bytes in a Buffer that starts 2 bytes into a larger one, which `store` keeps alive (the view
// holds its handle, which a move of the owner keeps): a tensor off the 16-byte chunk grid.
Buffer shifted_copy(Context& ctx, const Buffer& from, std::vector<Buffer>& store) {
  std::vector<uint8_t> bytes(from.size());
  from.download(bytes.data(), bytes.size());
  store.push_back(Buffer::allocate(ctx, bytes.size() + 16));
  Buffer view = Buffer::wrap(ctx, store.back().handle(), store.back().offset() + 2, bytes.size());
  view.upload(bytes.data(), bytes.size());
  return view;
}

const Shape kShapes[] = {
    // Decode with GQA and split-KV (the combine pass and the workspace), per-batch key lengths.
    {"decode", 2, 4, 1, 1, 3000, 64, DType::f16, Causal::none, false, true, true, false},
    // Prefill, odd sizes, causal bottom-right with a boolean mask.
    {"prefill", 1, 4, 4, 37, 53, 40, DType::f32, Causal::bottom_right, true, false, true, false},
    // The three-stage path, returning P.
    {"weights", 1, 2, 1, 9, 17, 16, DType::bf16, Causal::top_left, true, true, true, true},
};

}  // namespace

TEST_SUITE("prepared") {
  TEST_CASE("a prepared call gives what attention() gives, run after run, on other buffers each time") {
    Context& ctx = context();
    for (const Shape& shape : kShapes) {
      const std::string name = shape.name;
      CAPTURE(name);
      if (!device_supports(shape.dtype)) continue;
      const AttentionSpec spec = spec_of(shape);
      const PreparedAttention prepared(ctx, spec);
      if (name == "decode") CHECK_MESSAGE(prepared.plan().splits > 1, "meant to exercise split-KV");
      CHECK(std::string(prepared.plan().path) == (shape.weights ? "unfused" : "fused"));
      std::mt19937_64 rng(case_seed(9100));
      for (int round = 0; round < 3; ++round) {
        CAPTURE(round);
        Arguments a(ctx, spec, rng), b(ctx, spec, rng);
        // b: the same inputs as a, through attention().
        for (auto [from, to] : {std::pair{&a.q, &b.q}, std::pair{&a.k, &b.k}, std::pair{&a.v, &b.v},
                                std::pair{&a.mask, &b.mask}, std::pair{&a.kv_lengths, &b.kv_lengths}})
          if (*from) {
            std::vector<uint8_t> bytes((*from)->size());
            (*from)->download(bytes.data(), bytes.size());
            (*to)->upload(bytes.data(), bytes.size());
          }
        a.poison();
        b.poison();
        prepared.run(a.buffers());
        attention(ctx, b.args(spec));
        const std::vector<uint8_t> got = a.outputs(), want = b.outputs();
        CHECK_MESSAGE(got == want, "the prepared call's outputs differ from attention()'s");
        std::vector<float> out(static_cast<std::size_t>(spec.out.element_count()));
        std::vector<std::byte> raw(out.size() * dtype_size(shape.dtype));
        a.out->download(raw.data(), raw.size());
        decode(shape.dtype, raw.data(), out.data(), out.size());
        std::size_t not_finite = 0;
        for (float x : out) not_finite += std::isfinite(x) ? 0 : 1;
        CHECK_MESSAGE(not_finite == 0, not_finite << " outputs still hold the poison");
      }
    }
    expect_no_validation_messages();
  }

  TEST_CASE("buffers that do not fit the plan are refused, naming them, with the outputs untouched") {
    Context& ctx = context();
    const AttentionSpec spec = spec_of(kShapes[1]);  // mask and lse, no key lengths
    const PreparedAttention prepared(ctx, spec);
    std::mt19937_64 rng(case_seed(9200));
    Arguments a(ctx, spec, rng);
    const auto refused = [&](AttentionBuffers b, const std::string& expected) {
      a.poison();
      const std::vector<uint8_t> before = a.outputs();
      const std::string message = error_message([&] { prepared.run(b); });
      CHECK_MESSAGE(contains(message, expected), "message: " << message << "; expected: " << expected);
      CHECK_MESSAGE(a.outputs() == before, "a refused run changed an output");
    };
    AttentionBuffers b = a.buffers();
    b.lse = {};
    refused(b, "lse: the call was prepared with lse");
    b = a.buffers();
    b.mask = nullptr;
    refused(b, "mask: the call was prepared with mask");
    b = a.buffers();
    b.kv_lengths = {&*a.lse, 0};
    refused(b, "kv_lengths: a buffer is given, but the call was prepared without kv_lengths");
    Buffer small = Buffer::allocate(ctx, 64);
    b = a.buffers();
    b.out = &small;
    refused(b, "out: needs");
    b = a.buffers();
    b.out = &*a.k;
    refused(b, "out overlaps k");
    b = a.buffers();
    b.q = nullptr;
    refused(b, "q: buffer is null");

    // record(): a command buffer and, when the plan needs one, a workspace.
    CHECK(contains(error_message([&] { prepared.record(VK_NULL_HANDLE, a.buffers()); }), "command_buffer is VK_NULL_HANDLE"));
    const PreparedAttention split(ctx, spec_of(kShapes[0]));
    if (split.workspace_bytes() > 0 && device_supports(kShapes[0].dtype)) {
      Arguments d(ctx, split.spec(), rng);
      TestCommandBuffer cb(ctx);
      const VkCommandBuffer cmd = cb.cmd();
      CHECK(contains(error_message([&] { split.record(cmd, d.buffers()); }), "needs a workspace of"));
      Buffer too_small = Buffer::allocate(ctx, 16);
      CHECK(contains(error_message([&] { split.record(cmd, d.buffers(), {&too_small, 0}); }), "workspace: needs"));
      cb.end();
    }
    expect_no_validation_messages();
  }

  TEST_CASE("recording a prepared call allocates nothing; record_attention, which plans, does") {
    // A Context without the validation layer, whose own bookkeeping allocates on every command.
    ContextOptions options;
    options.device = std::to_string(context().device_info().index);
    options.kernel = kernel_variant();
    Context ctx(options);
    const AttentionSpec spec = spec_of(kShapes[1]);
    const PreparedAttention prepared(ctx, spec);
    std::mt19937_64 rng(case_seed(9500));
    Arguments a(ctx, spec, rng);
    const AttentionBuffers buffers = a.buffers();
    const AttentionArgs args = a.args(spec);
    TestCommandBuffer cb(ctx);
    const VkCommandBuffer cmd = cb.cmd();
    // The plan may split the keys (it does with the tiled kernel): then it needs a workspace.
    const Buffer workspace = Buffer::allocate(ctx, std::max<uint64_t>(prepared.workspace_bytes(), 16));
    const BufferSlice slice = prepared.workspace_bytes() > 0 ? BufferSlice{&workspace, 0} : BufferSlice{};
    record_attention(ctx, cmd, args, slice);  // every pipeline exists from here
    std::size_t prepared_allocations = 0, planned_allocations = 0;
    {
      const ScopedAllocationCount count;
      for (int i = 0; i < 10; ++i) prepared.record(cmd, buffers, slice);
      prepared_allocations = count.count();
    }
    {
      const ScopedAllocationCount count;
      record_attention(ctx, cmd, args, slice);
      planned_allocations = count.count();
    }
    CHECK(prepared_allocations == 0);
    CHECK_MESSAGE(planned_allocations > 0, "the counter must see record_attention's plan being built");
    cb.end();
  }

  TEST_CASE("a decode call planned for 16-byte chunks reads element by element where a tensor starts off them") {
    // The subgroup kernel's decode form reads Q, K and V and writes O in 16-byte chunks where the
    // dims and strides allow it (planned); whether each tensor starts on a chunk is known only at
    // replay, which then binds the element-wise pipeline. Each tensor moved one f16 element off the
    // chunk grid must give exactly the aligned call's outputs (the two pipelines add in the same
    // order); a chunked read or write of it would start at the wrong element. O is written by the
    // kernel only when the call is not split (else by the combine): on lavapipe the first shape's 16
    // workgroups are enough and it runs in one piece, the second's 3000 keys in several splits.
    Context& ctx = context();
    if (!device_supports(DType::f16)) return;
    for (const auto& [batch, heads, kv_heads, seq_k] :
         {std::array<int64_t, 4>{4, 16, 4, 64}, std::array<int64_t, 4>{1, 8, 2, 3000}}) {
      CAPTURE(seq_k);
      const AttentionSpec spec = spec_of(
          {"decode chunks", batch, heads, kv_heads, 1, seq_k, 64, DType::f16, Causal::none, false, false, true, false});
      const PreparedAttention prepared(ctx, spec);
      if (std::string(prepared.plan().kernel) != "subgroup-decode") {
        MESSAGE("the device plans " << prepared.plan().kernel << ", not the subgroup kernel's decode form: skipped");
        return;
      }
      MESSAGE("seq_k " << seq_k << ": " << prepared.plan().splits << " splits");
      std::mt19937_64 rng(case_seed(9600));
      Arguments a(ctx, spec, rng);
      a.poison();
      prepared.run(a.buffers());
      const std::vector<uint8_t> aligned = a.outputs();
      std::vector<Buffer> store;
      const Buffer q = shifted_copy(ctx, *a.q, store), k = shifted_copy(ctx, *a.k, store),
                   v = shifted_copy(ctx, *a.v, store);
      Buffer o = shifted_copy(ctx, *a.out, store);
      for (const char* moved : {"q", "k", "v", "o", "q, k, v and o"}) {
        const std::string name = moved;
        CAPTURE(name);
        AttentionBuffers b = a.buffers();
        if (name == "q" || name.size() > 1) b.q = &q;
        if (name == "k" || name.size() > 1) b.k = &k;
        if (name == "v" || name.size() > 1) b.v = &v;
        if (name == "o" || name.size() > 1) b.out = &o;
        a.poison();
        o.fill(0xFF);
        prepared.run(b);
        std::vector<uint8_t> got = a.outputs();
        if (b.out == &o) {  // O's bytes from the moved buffer (a.outputs() starts with a.out's)
          std::vector<uint8_t> moved_o(o.size());
          o.download(moved_o.data(), moved_o.size());
          std::copy(moved_o.begin(), moved_o.end(), got.begin());
        }
        CHECK_MESSAGE(got == aligned, "outputs differ from the aligned call's");
      }
    }
    expect_no_validation_messages();
  }

  TEST_CASE("a prefill call on the subgroup kernel reads K and V element by element where they start off 16-byte chunks") {
    // The subgroup kernel's fast pass reads K and V in 16-byte chunks where the dims and strides are
    // whole chunks (planned); replay binds its element-wise pipeline where K or V starts off the
    // chunk grid. That pipeline pairs the dims in another order, so its outputs match the aligned
    // call's to rounding, not bit for bit; a chunked read from such a start would read other elements.
    Context& ctx = context();
    if (!device_supports(DType::f16)) return;
    const AttentionSpec spec =
        spec_of({"prefill chunks", 1, 4, 2, 40, 70, 64, DType::f16, Causal::none, false, false, true, false});
    const PreparedAttention prepared(ctx, spec);
    if (std::string(prepared.plan().kernel) != "subgroup") {
      MESSAGE("the device plans " << prepared.plan().kernel << ", not the subgroup kernel: skipped");
      return;
    }
    std::mt19937_64 rng(case_seed(9700));
    Arguments a(ctx, spec, rng);
    const auto out_values = [&](const Buffer& out) {
      std::vector<std::byte> raw(static_cast<std::size_t>(spec.out.element_count()) * 2);
      out.download(raw.data(), raw.size());
      std::vector<float> values(raw.size() / 2);
      decode(DType::f16, raw.data(), values.data(), values.size());
      return values;
    };
    a.poison();
    prepared.run(a.buffers());
    const std::vector<float> aligned = out_values(*a.out);
    std::vector<Buffer> store;
    const Buffer k = shifted_copy(ctx, *a.k, store), v = shifted_copy(ctx, *a.v, store);
    for (const char* moved : {"k", "v", "k and v"}) {
      const std::string name = moved;
      CAPTURE(name);
      AttentionBuffers b = a.buffers();
      if (name != "v") b.k = &k;
      if (name != "k") b.v = &v;
      a.poison();
      prepared.run(b);
      const std::vector<float> got = out_values(*a.out);
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, double(std::fabs(got[i] - aligned[i])) / (1e-3 + std::fabs(aligned[i])));
      CHECK_MESSAGE(worst < 4e-3, "outputs differ from the aligned call's by " << worst << " (relative)");
    }
    expect_no_validation_messages();
  }

  TEST_CASE("a moved-from PreparedAttention: every use is an Error") {
    Context& ctx = context();
    PreparedAttention moved(ctx, spec_of(kShapes[1]));
    const PreparedAttention taker(std::move(moved));
    CHECK(taker.plan().splits >= 1);
    CHECK(contains(error_message([&] { (void)moved.plan(); }), "moved-from PreparedAttention"));
    CHECK(contains(error_message([&] { moved.run({}); }), "moved-from PreparedAttention"));
  }
}
