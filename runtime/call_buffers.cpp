// An output that shares memory with another argument gives wrong answers without a word (out over k:
// keys overwritten while other workgroups still read them; lse inside out: one clobbers the other),
// and a Buffer of another Context is a VkBuffer of another VkDevice: undefined behaviour that can
// crash the driver or the validation layer. Both are refused here, on every path, before anything
// is recorded.
#include "call_buffers.hpp"

#include "kv_storage.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "attention_plan.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

}  // namespace

void check_binding(const char* name, const Buffer* buffer, uint64_t byte_offset, uint64_t element_size,
                   uint64_t elements) {
  if (!buffer || !buffer->valid()) throw Error(std::string(name) + ": buffer is null");
  const uint64_t start = buffer->offset() + byte_offset;
  if ((start & (element_size - 1)) != 0)  // element sizes are 1, 2 or 4
    throw Error(std::string(name) + ": byte offset " + str(start) + " is not a multiple of the element size " +
                str(element_size));
  const uint64_t need = elements * element_size;
  if (byte_offset > buffer->size() || need > buffer->size() - byte_offset)
    throw Error(std::string(name) + ": needs " + str(need) + " bytes from offset " + str(byte_offset) +
                " but the buffer holds " + str(buffer->size()) + " bytes");
  if (elements > kMaxIndex)
    throw Error(std::string(name) + ": " + str(elements) + " elements exceed the 32-bit index limit (" +
                str(kMaxIndex) + ")");
}

void check_extents(const ContextImpl& context, std::span<const BufferExtent> extents) {
  for (const BufferExtent& e : extents)
    if (context_of(*e.buffer) != &context)
      throw Error(std::string(e.name) + ": the Buffer belongs to another Context than the one the call is made with");
  // Inputs may share bytes (q, k and v in one buffer for self-attention); an output may not share
  // any with another argument, input or output.
  for (std::size_t i = 0; i < extents.size(); ++i)
    for (std::size_t j = i + 1; j < extents.size(); ++j) {
      const BufferExtent &x = extents[i], &y = extents[j];
      if (!x.output && !y.output) continue;
      if (x.buffer->handle() != y.buffer->handle() || x.end <= y.begin || y.end <= x.begin) continue;
      const BufferExtent& out = x.output ? x : y;
      const BufferExtent& other = x.output ? y : x;
      throw Error(std::string(out.name) + " overlaps " + other.name + ": bytes [" + str(out.begin) + ", " +
                  str(out.end) + ") and [" + str(other.begin) + ", " + str(other.end) + ") of the same VkBuffer");
    }
}

void BufferChecks::add(const char* name, const Buffer* buffer, uint64_t byte_offset, uint64_t element_size,
                       uint64_t first_element, uint64_t elements, bool output) {
  check_binding(name, buffer, byte_offset, element_size, elements);
  if (count_ == extents_.size()) throw Error(std::string("internal: more than ") + str(extents_.size()) + " arguments");
  const uint64_t base = buffer->offset() + byte_offset;
  extents_[count_++] = {name, buffer, base + first_element * element_size, base + elements * element_size, output};
}

void BufferChecks::tensor(const char* name, const Buffer* buffer, const TensorLayout& layout, bool output) {
  add(name, buffer, 0, element_size_, uint64_t(layout.offset), uint64_t(layout.required_elements()), output);
}

void BufferChecks::head_values(const PerHead<const Buffer*>& buffers, const PerHeadLayouts& layouts) {
  for (PerHeadTensor t : kPerHeadTensors) {
    const char* name = to_string(t);
    const std::optional<HeadValuesLayout>& layout = layouts[t];
    if (optional(name, buffers[t] != nullptr, layout.has_value()))
      add(name, buffers[t], 0, 4, uint64_t(layout->offset), uint64_t(layout->required_elements()), false);
  }
}

void BufferChecks::workspace(const BufferSlice* workspace, uint64_t bytes, const char* use) {
  if (!workspace || bytes == 0) return;
  if (!workspace->buffer)
    throw Error("workspace: the call needs " + str(bytes) + " bytes for its " + use +
                " (workspace_bytes()), but none was given");
  add("workspace", workspace->buffer, workspace->offset, 1, 0, bytes, true);
}

bool BufferChecks::optional(const char* name, bool given, bool planned) {
  if (given && !planned) throw Error(std::string(name) + ": given, but the call was prepared without it");
  if (!given && planned) throw Error(std::string(name) + ": the call was prepared with it, but none was given");
  return planned;
}

void BufferChecks::finish() const { check_extents(context_, std::span(extents_.data(), count_)); }

namespace {

// An optional argument is given exactly when the call was prepared with it.
void check_given(const char* name, bool given, bool planned) {
  if (given && !planned)
    throw Error(std::string(name) + ": a buffer is given, but the call was prepared without " + name +
                " (AttentionSpec)");
  if (!given && planned)
    throw Error(std::string(name) + ": the call was prepared with " + name + " (AttentionSpec), but no buffer is given");
}

const char* argument_name(int a) {
  constexpr const char* kNames[CallNeeds::per_head] = {"q", "k", "v", "out", "lse", "kv_lengths", "mask"};
  if (a < CallNeeds::per_head) return kNames[a];
  if (a < CallNeeds::weights) return to_string(kPerHeadTensors[a - CallNeeds::per_head]);
  return a == CallNeeds::weights ? "weights" : "workspace";
}

// Strided layouts get their whole span, first to last element: conservative (gaps between rows count
// too), and what the bounds check already requires the buffer to hold.
template <typename Layout>  // TensorLayout, MaskLayout or HeadValuesLayout
CallNeeds::Need tensor_need(const Layout& layout, uint64_t element_size, bool output) {
  return {true, output, element_size, uint64_t(layout.required_elements()), uint64_t(layout.offset) * element_size};
}

// K or V as stored (kv_storage.hpp): q8_0 in 16-bit units, as they are bound.
CallNeeds::Need kv_need(const TensorLayout& t, KvQuant quant) {
  const Binding b = kv_binding(0, t.dtype, quant, 0, t.required_elements());
  return {true, false, b.element_size, b.elements, kv_bytes(t.dtype, quant, t.offset)};
}

}  // namespace

CallNeeds call_needs(const AttentionProblem& p, const AttentionLayouts& l, bool weights, uint64_t workspace_bytes,
                     const char* workspace_use) {
  const uint64_t esize = dtype_size(p.dtype), rows = uint64_t(p.batch) * p.heads * p.seq_q;
  CallNeeds n;
  n.need[CallNeeds::q] = tensor_need(l.q, esize, false);
  n.need[CallNeeds::k] = kv_need(l.k, p.kv_quant);
  n.need[CallNeeds::v] = kv_need(l.v, p.kv_quant);
  n.need[CallNeeds::out] = tensor_need(l.out, esize, true);
  if (l.mask) n.need[CallNeeds::mask] = tensor_need(*l.mask, mask_type_size(l.mask->type), false);
  for (PerHeadTensor t : kPerHeadTensors)
    if (l[t]) n.need[CallNeeds::per_head_argument(t)] = tensor_need(*l[t], 4, false);
  n.need[CallNeeds::lse] = {l.has_lse, true, 4, rows, 0};
  n.need[CallNeeds::kv_lengths] = {l.has_kv_lengths, false, 4, uint64_t(p.batch), 0};
  n.need[CallNeeds::weights] = {weights, true, 4, rows * uint64_t(p.seq_k), 0};
  n.need[CallNeeds::workspace] = {workspace_bytes > 0, true, 1, workspace_bytes, 0};
  n.batch = p.batch, n.heads = p.heads, n.seq_q = p.seq_q, n.seq_k = p.seq_k;
  n.workspace_use = workspace_use;
  for (uint8_t a = 0; a < CallNeeds::count; ++a) {
    const CallNeeds::Need& x = n.need[a];
    if (!x.planned) continue;
    // An argument the 32-bit index limit refuses is left to the full check, which names it.
    if (x.elements > kMaxIndex && a != CallNeeds::weights && a != CallNeeds::workspace) n.quick = false;
    for (uint32_t i = 0; i < n.planned_count; ++i) {
      const CallNeeds::Need& y = n.need[n.planned[i]];
      if (x.output || y.output) n.pairs[n.pair_count++] = {n.planned[i], a};
    }
    n.planned[n.planned_count++] = a;
  }
  return n;
}

namespace {

// Whether every planned argument is given, valid, of `context`, big enough, element-aligned and
// clear of the outputs: the common case, decided with no Error built. Any doubt (a refusal, an
// argument given that was not planned) answers false, and the full check below finds the reason.
// `scratch`: the workspace is vkattn's own, which no argument can share.
bool all_fit(const ContextImpl& context, const CallNeeds& needs, const std::array<BufferSlice, CallNeeds::count>& given,
             bool scratch) {
  if (!needs.quick) return false;
  for (int a = CallNeeds::lse; a <= CallNeeds::weights; ++a)
    if ((given[a].buffer != nullptr) != needs.need[a].planned) return false;
  std::array<uint64_t, CallNeeds::count> begin, end;
  std::array<VkBuffer, CallNeeds::count> handle;
  for (uint32_t i = 0; i < needs.planned_count; ++i) {
    const uint8_t a = needs.planned[i];
    const CallNeeds::Need& n = needs.need[a];
    const BufferSlice& g = given[a];
    if (a == CallNeeds::workspace && scratch) continue;
    if (!g.buffer) return false;
    const Buffer& b = *g.buffer;
    const uint64_t start = b.offset() + g.offset, bytes = n.elements * n.element_size;
    if (!b.valid() || (start & (n.element_size - 1)) != 0 || g.offset > b.size() || bytes > b.size() - g.offset ||
        context_of(b) != &context)
      return false;
    begin[a] = start + n.first_byte;
    end[a] = start + bytes;
    handle[a] = b.handle();
  }
  for (uint32_t i = 0; i < needs.pair_count; ++i) {
    const uint8_t x = needs.pairs[i][0], y = needs.pairs[i][1];
    if (scratch && (x == CallNeeds::workspace || y == CallNeeds::workspace)) continue;
    if (handle[x] == handle[y] && begin[x] < end[y] && begin[y] < end[x]) return false;
  }
  return true;
}

// The extents in the order overlaps are looked for (and so which pair an Error names first): the
// inputs, the per-head tensors, then the outputs and the workspace.
constexpr std::array<CallNeeds::Argument, CallNeeds::count> kOverlapOrder = [] {
  std::array<CallNeeds::Argument, CallNeeds::count> order{};
  std::size_t n = 0;
  for (const CallNeeds::Argument a :
       {CallNeeds::q, CallNeeds::k, CallNeeds::v, CallNeeds::out, CallNeeds::mask, CallNeeds::kv_lengths})
    order[n++] = a;
  for (int a = CallNeeds::per_head; a < CallNeeds::weights; ++a) order[n++] = CallNeeds::Argument(a);
  for (const CallNeeds::Argument a : {CallNeeds::lse, CallNeeds::weights, CallNeeds::workspace}) order[n++] = a;
  return order;
}();

}  // namespace

void check_call_buffers(const ContextImpl& context, const CallNeeds& needs, const AttentionBuffers& b,
                        const BufferSlice* workspace) {
  std::array<BufferSlice, CallNeeds::count> given{
      BufferSlice{b.q, 0}, BufferSlice{b.k, 0}, BufferSlice{b.v, 0}, BufferSlice{b.out, 0}, b.lse, b.kv_lengths,
      BufferSlice{b.mask, 0}};
  for (PerHeadTensor t : kPerHeadTensors) given[CallNeeds::per_head_argument(t)] = BufferSlice{b[t], 0};
  given[CallNeeds::weights] = b.weights;
  given[CallNeeds::workspace] = workspace ? *workspace : BufferSlice{};
  if (all_fit(context, needs, given, workspace == nullptr)) return;
  for (int a = 0; a < CallNeeds::count; ++a) {
    const CallNeeds::Need& n = needs.need[a];
    const BufferSlice& g = given[a];
    const char* name = argument_name(a);
    if (a == CallNeeds::workspace) {
      // vkattn's own scratch (no slice given) or a call that needs none: nothing to check.
      if (!workspace || !n.planned) continue;
      if (!g.buffer || !g.buffer->valid())
        throw Error(std::string("workspace: this call (") + needs.workspace_use + ") needs a workspace of " +
                    str(n.elements) + " bytes (plan_attention().workspace_bytes)");
      if (g.offset > g.buffer->size() || g.buffer->size() - g.offset < n.elements)
        throw Error("workspace: needs " + str(n.elements) + " bytes, the slice holds " +
                    str(g.buffer->size() - std::min(g.offset, g.buffer->size())));
      continue;
    }
    if (a > CallNeeds::out) check_given(name, g.buffer != nullptr, n.planned);
    if (!n.planned) continue;
    if (a == CallNeeds::weights) {
      if (!g.buffer->valid()) throw Error("weights: buffer is null");
      const uint64_t need = n.elements * 4;
      if ((g.buffer->offset() + g.offset) % 4 != 0)
        throw Error("weights: byte offset " + str(g.offset) + " is not a multiple of 4 (f32)");
      if (g.offset > g.buffer->size() || need > g.buffer->size() - g.offset)
        throw Error("weights: P (" + str(uint64_t(needs.batch)) + ", " + str(uint64_t(needs.heads)) + ", " +
                    str(uint64_t(needs.seq_q)) + ", " + str(uint64_t(needs.seq_k)) + ") f32 needs " + str(need) +
                    " bytes from offset " + str(g.offset) + " but the buffer holds " + str(g.buffer->size()) + " bytes");
      continue;
    }
    check_binding(name, g.buffer, g.offset, n.element_size, n.elements);
  }

  std::array<BufferExtent, CallNeeds::count> extents;
  std::size_t count = 0;
  for (const CallNeeds::Argument a : kOverlapOrder) {
    const CallNeeds::Need& n = needs.need[a];
    const BufferSlice& g = given[a];
    if (!n.planned || !g.buffer) continue;  // (only the scratch workspace is planned but not given)
    const uint64_t start = g.buffer->offset() + g.offset;
    extents[count++] = {argument_name(a), g.buffer, start + n.first_byte, start + n.elements * n.element_size, n.output};
  }
  check_extents(context, std::span(extents.data(), count));
  throw Error("internal: the quick check of the call's buffers refused what the full check accepts");
}

}  // namespace vkattn::detail
