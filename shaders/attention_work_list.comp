#version 450
// Builds a paged call's work list (shader_abi.h, "Work lists") from the cache lengths, on the device,
// right before the split dispatch that reads it: the host plans once per batch configuration and
// never sees the lengths, which change every decoding step.
//
// Split-KV by the table's capacity gives every sequence as many splits as the longest could need; a
// short sequence's are then mostly empty workgroups, launched and combined for nothing (on lavapipe
// about 5 us each: 1736 of them in issue 14's batch of one 32k and seven 512-key sequences). Here
// each sequence gets ceil(keys / chunk) items, chunk sized so that all items together are about
// target_items (the device's wanted workgroups), and the dispatch's grid is the item count.
//
// One workgroup of W invocations. Invocation t owns a contiguous block of sequences: it sums their
// keys, the workgroup adds the blocks' sums (shared memory), each invocation counts its block's items
// and writes its sequences' offsets from the prefix of the blocks before it; then all invocations
// fill the items, in the grid's bit-reversed order (shader_abi.h), item i finding its sequence by
// binary search in the offsets. Every loop is at most ceil(batches / W), W or log2(batches) + 1 steps per
// item of ceil(max_items / W) (and one per bit of its index for its position): lavapipe's limit of 65535 loop
// iterations per invocation holds for any batch the grid allows.
#include "shader_abi.h"
#include "cache_length.glsl"

layout(local_size_x = 64) in;
const uint W = 64u;
layout(push_constant) uniform WorkListPush { WORK_LIST_PUSH_MEMBERS } pc;

layout(binding = WORK_LIST_LENGTHS_BINDING) readonly buffer CacheLensBuf { int cache_lens[]; };  // (a packed batch: cu_seqlens_k)
layout(binding = WORK_LIST_WORDS_BINDING) coherent buffer WorkListBuf { uint work_list[]; };

shared uint block_keys[W];
shared uint block_longest[W];
shared uint block_items[W];

// Sequence b's keys, as the kernels' begin_sequence and workgroup_key_range count them: its cache
// length clamped to [0, capacity - seq_new] plus the appended tokens (clamped before the add: a
// length near INT32_MAX must not wrap to negative and lose every key), or its key length clamped to
// [0, capacity]; a packed sequence's cu_seqlens_k[b + 1] - cu_seqlens_k[b], each clamped into the
// packed keys and the end to at least the start, then cut to max_seqlen_k (the keys it may see).
uint sequence_keys(uint b) {
  if (pc.max_splits > 0u) {
    const int k0 = clamp(cache_lens[pc.lens_off + b], 0, int(pc.capacity));
    return min(uint(clamp(cache_lens[pc.lens_off + b + 1u], k0, int(pc.capacity)) - k0), pc.max_keys_seen);
  }
  return clamped_cache_length(cache_lens[pc.lens_off + b], pc.capacity, pc.seq_new) + pc.seq_new;
}
// Where item i runs: its rank among the count items ordered by bit-reversed index (shader_abi.h).
// The items j before i in that order agree with i on the bits below some bit k, where j has 0 and i
// has 1: j = c (mod 2^(k+1)) with c = i mod 2^k, of which (count - 1 - c) / 2^(k+1) + 1 are below
// count.
// (One step per bit of i: at most 16 for the items a grid's z can hold, max_items < 2^16.)
uint grid_position(uint i, uint count) {
  uint position = 0u;
  for (uint k = 0u; (i >> k) != 0u; ++k)
    if (((i >> k) & 1u) != 0u) {
      const uint c = i & ((1u << k) - 1u);
      if (c < count) position += ((count - 1u - c) >> (k + 1u)) + 1u;
    }
  return position;
}
uint saturating_add(uint a, uint b) { return a > 0xffffffffu - b ? 0xffffffffu : a + b; }
// (A packed sequence's partials are indexed by split: at most max_splits, which the chunk's rule keeps
// for sequences of at most the planned longest; past it, bad cu_seqlens, the rest is dropped.)
uint items_of(uint keys, uint chunk) {
  const uint n = keys == 0u ? 0u : (keys - 1u) / chunk + 1u;
  return pc.max_splits > 0u ? min(n, pc.max_splits) : n;
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint per = (pc.batches + W - 1u) / W;
  const uint b0 = min(t * per, pc.batches), b1 = min(b0 + per, pc.batches);

  uint keys = 0u, longest = 0u;
  for (uint b = b0; b < b1; ++b) {
    const uint n = sequence_keys(b);
    keys = saturating_add(keys, n);
    longest = max(longest, n);
  }
  block_keys[t] = keys;
  block_longest[t] = longest;
  barrier();
  uint total = 0u;
  for (uint i = 0u; i < W; ++i) {
    total = saturating_add(total, block_keys[i]);
    longest = max(longest, block_longest[i]);
  }

  // Keys per item: the total over the target, a multiple of the granule (max_keys is one), within
  // [min_keys, max_keys]. With c >= total / target_items, the items are at most target_items + one
  // per sequence; at max_keys at most the planned splits per sequence: max_items either way.
  uint chunk = total == 0u ? pc.min_keys : (total - 1u) / pc.target_items + 1u;
  if (pc.max_splits > 0u && longest > 0u) chunk = max(chunk, (longest - 1u) / pc.max_splits + 1u);
  chunk = min(chunk, pc.max_keys);
  chunk = (chunk + pc.granule - 1u) / pc.granule * pc.granule;
  chunk = min(max(chunk, pc.min_keys), pc.max_keys);

  uint items = 0u;
  for (uint b = b0; b < b1; ++b) items += items_of(sequence_keys(b), chunk);
  block_items[t] = items;
  barrier();
  uint first = 0u, count = 0u;
  for (uint i = 0u; i < W; ++i) {
    first += i < t ? block_items[i] : 0u;
    count += block_items[i];
  }
  // (Never past max_items by the rule above; clamped so that nothing is ever written past the list.)
  count = min(count, pc.max_items);
  const uint offsets = WORK_LIST_ITEMS + pc.max_items;
  for (uint b = b0; b < b1; ++b) {
    work_list[offsets + b] = min(first, pc.max_items);
    first += items_of(sequence_keys(b), chunk);
  }
  if (t == W - 1u) work_list[offsets + pc.batches] = count;
  if (t == 0u) {
    work_list[WORK_LIST_ARGS + 0u] = pc.tiles_full;
    work_list[WORK_LIST_ARGS + 1u] = pc.groups_y;
    work_list[WORK_LIST_ARGS + 2u] = count;
    work_list[WORK_LIST_LAST_ARGS + 0u] = pc.tiles_last;
    work_list[WORK_LIST_LAST_ARGS + 1u] = pc.groups_y;
    work_list[WORK_LIST_LAST_ARGS + 2u] = count;
    work_list[WORK_LIST_CHUNK] = chunk;
    work_list[WORK_LIST_OFFSETS] = offsets;
  }
  memoryBarrierBuffer();
  barrier();

  // Item i belongs to the last sequence whose first item is at most i (sequences without items share
  // their successor's offset and are passed over); it runs at grid_position(i).
  for (uint i = t; i < count; i += W) {
    uint lo = 0u, hi = pc.batches;  // offsets[lo] <= i < offsets[hi]
    while (hi - lo > 1u) {
      const uint mid = (lo + hi) / 2u;
      if (work_list[offsets + mid] <= i) lo = mid;
      else hi = mid;
    }
    work_list[WORK_LIST_ITEMS + grid_position(i, count)] = (lo << 16) | (i - work_list[offsets + lo]);
  }
}
