// record() and run() of the prepared serving calls (PreparedPagedAttention, PreparedVarlenAttention):
// the same steps around each call's own buffer check and replay. `Impl` has `context` (the
// ContextImpl), `workspace_bytes()`, `check(buffers, const BufferSlice* workspace)` (null:
// the Context's scratch) and `replay(cmd, buffers, VkBuffer workspace, uint64_t offset)`.
#pragma once

#include <vulkan/vulkan.h>

#include "attention_record.hpp"
#include "context_impl.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/error.hpp"

namespace vkattn::detail {

// Checks, then replays into the caller's command buffer with the caller's workspace.
template <typename Impl, typename Buffers>
void record_prepared(const Impl& p, VkCommandBuffer command_buffer, const Buffers& buffers, const BufferSlice& workspace) {
  p.context->check_usable();
  if (command_buffer == VK_NULL_HANDLE) throw Error("record: command_buffer is VK_NULL_HANDLE");
  p.check(buffers, &workspace);
  if (p.workspace_bytes() == 0)
    p.replay(command_buffer, buffers, VK_NULL_HANDLE, 0);
  else
    p.replay(command_buffer, buffers, workspace.buffer->handle(), workspace.buffer->offset() + workspace.offset);
}

// Checks, then replays between the synchronous call's barriers on the Context's queue and scratch,
// and waits.
template <typename Impl, typename Buffers>
void run_prepared(const Impl& p, const Buffers& buffers) {
  p.check(buffers, nullptr);
  p.context->submit_with_scratch(p.workspace_bytes(), [&](VkCommandBuffer cmd, VkBuffer scratch) {
    barrier_before_attention(cmd);
    p.replay(cmd, buffers, scratch, 0);
    barrier_after_attention(cmd);
  });
}

}  // namespace vkattn::detail
