// An output that shares memory with another argument gives wrong answers without a word (out over k:
// keys overwritten while other workgroups still read them; lse inside out: one clobbers the other),
// and a Buffer of another Context is a VkBuffer of another VkDevice: undefined behaviour that can
// crash the driver or the validation layer. Both are refused here, on every path, before anything
// is recorded.
#include "call_buffers.hpp"

#include <string>
#include <tuple>
#include <vector>

#include "vkattn/error.hpp"

namespace vkattn::detail {
namespace {

// Bytes [begin, end) of `handle` that an argument may touch. Strided layouts get their whole span,
// first to last element: conservative (gaps between rows count too), and what the bounds check
// already requires the buffer to hold.
struct Extent {
  const char* name;
  const Buffer* buffer;
  uint64_t begin, end;
  bool output;
};

std::string str(uint64_t v) { return std::to_string(v); }

// Each bound is within the buffer (check_attention_args) and a Buffer's offset + size does not wrap.
Extent tensor_extent(const char* name, const Buffer* buffer, int64_t first, int64_t end, uint64_t element_size,
                     bool output) {
  return {name, buffer, buffer->offset() + uint64_t(first) * element_size, buffer->offset() + uint64_t(end) * element_size,
          output};
}

Extent slice_extent(const char* name, const BufferSlice& slice, uint64_t bytes, bool output) {
  const uint64_t begin = slice.buffer->offset() + slice.offset;
  return {name, slice.buffer, begin, begin + bytes, output};
}

}  // namespace

void check_call_buffers(const ContextImpl& context, const AttentionArgs& args, const AttentionProblem& p,
                        const BufferSlice* workspace, uint64_t workspace_bytes) {
  const uint64_t esize = dtype_size(p.dtype), rows = uint64_t(p.batch) * p.heads * p.seq_q;
  std::vector<Extent> extents;
  for (const auto& [name, t, output] : {std::tuple{"q", &args.q, false}, std::tuple{"k", &args.k, false},
                                        std::tuple{"v", &args.v, false}, std::tuple{"out", &args.out, true}})
    extents.push_back(tensor_extent(name, t->buffer, t->layout.offset, t->layout.required_elements(), esize, output));
  if (args.mask.buffer)
    extents.push_back(tensor_extent("mask", args.mask.buffer, args.mask.layout.offset,
                                    args.mask.layout.required_elements(), mask_type_size(args.mask.layout.type), false));
  if (args.kv_lengths.buffer) extents.push_back(slice_extent("kv_lengths", args.kv_lengths, uint64_t(p.batch) * 4, false));
  if (args.lse.buffer) extents.push_back(slice_extent("lse", args.lse, rows * 4, true));
  if (args.weights.buffer) extents.push_back(slice_extent("weights", args.weights, rows * uint64_t(p.seq_k) * 4, true));
  if (workspace && workspace_bytes > 0) extents.push_back(slice_extent("workspace", *workspace, workspace_bytes, true));

  for (const Extent& e : extents)
    if (context_of(*e.buffer) != &context)
      throw Error(std::string(e.name) + ": the Buffer belongs to another Context than the one the call is made with");

  // Inputs may share bytes (q, k and v in one buffer for self-attention); an output may not share
  // any with another argument, input or output.
  for (std::size_t i = 0; i < extents.size(); ++i)
    for (std::size_t j = i + 1; j < extents.size(); ++j) {
      const Extent &a = extents[i], &b = extents[j];
      if (!a.output && !b.output) continue;
      if (a.buffer->handle() != b.buffer->handle() || a.end <= b.begin || b.end <= a.begin) continue;
      const Extent& out = a.output ? a : b;
      const Extent& other = a.output ? b : a;
      throw Error(std::string(out.name) + " overlaps " + other.name + ": bytes [" + str(out.begin) + ", " +
                  str(out.end) + ") and [" + str(other.begin) + ", " + str(other.end) + ") of the same VkBuffer");
    }
}

}  // namespace vkattn::detail
