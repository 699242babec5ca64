// An output that shares memory with another argument gives wrong answers without a word (out over k:
// keys overwritten while other workgroups still read them; lse inside out: one clobbers the other),
// and a Buffer of another Context is a VkBuffer of another VkDevice: undefined behaviour that can
// crash the driver or the validation layer. Both are refused here, on every path, before anything
// is recorded.
#include "call_buffers.hpp"

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

namespace {

// An optional argument is given exactly when the call was prepared with it.
void check_given(const char* name, bool given, bool planned) {
  if (given && !planned)
    throw Error(std::string(name) + ": a buffer is given, but the call was prepared without " + name +
                " (AttentionSpec)");
  if (!given && planned)
    throw Error(std::string(name) + ": the call was prepared with " + name + " (AttentionSpec), but no buffer is given");
}

// Strided layouts get their whole span, first to last element: conservative (gaps between rows count
// too), and what the bounds check already requires the buffer to hold. Each bound is within the
// buffer (checked first) and a Buffer's offset + size does not wrap.
BufferExtent tensor_extent(const char* name, const Buffer* buffer, int64_t first, int64_t end, uint64_t element_size,
                     bool output) {
  return {name, buffer, buffer->offset() + uint64_t(first) * element_size, buffer->offset() + uint64_t(end) * element_size,
          output};
}

BufferExtent slice_extent(const char* name, const BufferSlice& slice, uint64_t bytes, bool output) {
  const uint64_t begin = slice.buffer->offset() + slice.offset;
  return {name, slice.buffer, begin, begin + bytes, output};
}

}  // namespace

void check_call_buffers(const ContextImpl& context, const AttentionProblem& p, const AttentionSpec& spec,
                        const AttentionBuffers& b, const BufferSlice* workspace, uint64_t workspace_bytes,
                        const char* workspace_use) {
  const AttentionLayouts& l = spec.layouts;
  const uint64_t esize = dtype_size(p.dtype), rows = uint64_t(p.batch) * p.heads * p.seq_q;
  check_binding("q", b.q, 0, esize, l.q.required_elements());
  check_binding("k", b.k, 0, esize, l.k.required_elements());
  check_binding("v", b.v, 0, esize, l.v.required_elements());
  check_binding("out", b.out, 0, esize, l.out.required_elements());
  check_given("lse", b.lse.buffer != nullptr, l.has_lse);
  if (l.has_lse) check_binding("lse", b.lse.buffer, b.lse.offset, 4, rows);
  check_given("kv_lengths", b.kv_lengths.buffer != nullptr, l.has_kv_lengths);
  if (l.has_kv_lengths) check_binding("kv_lengths", b.kv_lengths.buffer, b.kv_lengths.offset, 4, uint64_t(p.batch));
  check_given("mask", b.mask != nullptr, l.mask.has_value());
  if (l.mask) check_binding("mask", b.mask, 0, mask_type_size(l.mask->type), l.mask->required_elements());
  check_given("weights", b.weights.buffer != nullptr, spec.weights);
  if (spec.weights) {
    if (!b.weights.buffer->valid()) throw Error("weights: buffer is null");
    const uint64_t need = rows * uint64_t(p.seq_k) * 4;
    if ((b.weights.buffer->offset() + b.weights.offset) % 4 != 0)
      throw Error("weights: byte offset " + str(b.weights.offset) + " is not a multiple of 4 (f32)");
    if (b.weights.offset > b.weights.buffer->size() || need > b.weights.buffer->size() - b.weights.offset)
      throw Error("weights: P (" + str(p.batch) + ", " + str(p.heads) + ", " + str(p.seq_q) + ", " + str(p.seq_k) +
                  ") f32 needs " + str(need) + " bytes from offset " + str(b.weights.offset) +
                  " but the buffer holds " + str(b.weights.buffer->size()) + " bytes");
  }

  if (workspace && workspace_bytes > 0) {
    if (!workspace->buffer || !workspace->buffer->valid())
      throw Error(std::string("workspace: this call (") + workspace_use + ") needs a workspace of " + str(workspace_bytes) +
                  " bytes (plan_attention().workspace_bytes)");
    if (workspace->offset > workspace->buffer->size() || workspace->buffer->size() - workspace->offset < workspace_bytes)
      throw Error("workspace: needs " + str(workspace_bytes) + " bytes, the slice holds " +
                  str(workspace->buffer->size() - std::min(workspace->offset, workspace->buffer->size())));
  }

  std::array<BufferExtent, 9> extents;
  std::size_t count = 0;
  extents[count++] = tensor_extent("q", b.q, l.q.offset, l.q.required_elements(), esize, false);
  extents[count++] = tensor_extent("k", b.k, l.k.offset, l.k.required_elements(), esize, false);
  extents[count++] = tensor_extent("v", b.v, l.v.offset, l.v.required_elements(), esize, false);
  extents[count++] = tensor_extent("out", b.out, l.out.offset, l.out.required_elements(), esize, true);
  if (l.mask)
    extents[count++] =
        tensor_extent("mask", b.mask, l.mask->offset, l.mask->required_elements(), mask_type_size(l.mask->type), false);
  if (l.has_kv_lengths) extents[count++] = slice_extent("kv_lengths", b.kv_lengths, uint64_t(p.batch) * 4, false);
  if (l.has_lse) extents[count++] = slice_extent("lse", b.lse, rows * 4, true);
  if (spec.weights) extents[count++] = slice_extent("weights", b.weights, rows * uint64_t(p.seq_k) * 4, true);
  if (workspace && workspace_bytes > 0) extents[count++] = slice_extent("workspace", *workspace, workspace_bytes, true);

  check_extents(context, std::span(extents.data(), count));
}

}  // namespace vkattn::detail
