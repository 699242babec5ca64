// CommandList::hazards, the barrier check every call the tests record runs
// (ContextOptions::check_barriers): on hand-made lists, each kind of hazard is found where Vulkan needs a barrier
// and the list has none or the wrong one, and nothing is found where the barrier is right, the bytes
// do not overlap, or only the placeholder is shared.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "command_list.hpp"
#include "pipelines.hpp"

using namespace vkattn::detail;

namespace {

// A kernel of three bindings: 0 read, 1 read and written, 2 written only.
KernelLayout kernel() {
  KernelLayout k;
  k.bindings = 3;
  k.reads = 0b011;
  k.writes = 0b110;
  return k;
}

// A dispatch binding `bytes` bytes at `offset` of slot `slot` at `index`, the placeholder elsewhere.
Dispatch touching(uint32_t index, uint32_t slot, uint64_t offset, uint64_t bytes) {
  Dispatch d;
  d.use(kernel());
  d.bind(index, Binding{slot, offset, 4, bytes / 4});
  return d;
}

constexpr VkAccessFlags kRead = VK_ACCESS_SHADER_READ_BIT, kWrite = VK_ACCESS_SHADER_WRITE_BIT;

bool has(const std::vector<std::string>& found, const std::string& kind) {
  for (const std::string& f : found)
    if (f.rfind(kind, 0) == 0) return true;
  return false;
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("barrier check: a read after a write needs the write made visible to reads") {
    CommandList none;
    none.dispatch(touching(2, 1, 0, 64));  // writes slot 1 [0, 64)
    none.dispatch(touching(0, 1, 32, 64));  // reads [32, 96)
    const std::vector<std::string> found = none.hazards();
    REQUIRE(found.size() == 1);
    CHECK(has(found, "read after write"));
    CHECK(found[0].find("bytes [32, 64) of slot 1") != std::string::npos);

    CommandList wrong;  // orders the write before later writes only
    wrong.dispatch(touching(2, 1, 0, 64));
    wrong.compute_barrier(kWrite, kWrite);
    wrong.dispatch(touching(0, 1, 0, 64));
    CHECK(has(wrong.hazards(), "read after write"));

    CommandList right;
    right.dispatch(touching(2, 1, 0, 64));
    right.compute_barrier(kWrite, kRead);
    right.dispatch(touching(0, 1, 0, 64));
    CHECK(right.hazards().empty());
  }

  TEST_CASE("barrier check: writes after writes and after reads need a barrier") {
    CommandList waw;
    waw.dispatch(touching(2, 1, 0, 64));
    waw.dispatch(touching(2, 1, 60, 4));
    CHECK(has(waw.hazards(), "write after write"));

    CommandList war;
    war.dispatch(touching(0, 1, 0, 64));  // reads
    war.dispatch(touching(2, 1, 0, 64));  // writes
    CHECK(has(war.hazards(), "write after read"));

    CommandList ordered;  // any barrier orders a read before a later write
    ordered.dispatch(touching(0, 1, 0, 64));
    ordered.compute_barrier(kRead, kWrite);
    ordered.dispatch(touching(2, 1, 0, 64));
    CHECK(ordered.hazards().empty());

    CommandList read_write;  // binding 1 reads and writes: the second dispatch reads what the first wrote
    read_write.dispatch(touching(1, 1, 0, 16));
    read_write.compute_barrier(kWrite, kWrite);
    read_write.dispatch(touching(1, 1, 0, 16));
    CHECK(has(read_write.hazards(), "read after write"));
  }

  TEST_CASE("barrier check: disjoint bytes, other slots, reads after reads and the placeholder are no hazard") {
    CommandList list;
    list.dispatch(touching(2, 1, 0, 64));
    list.dispatch(touching(2, 1, 64, 64));  // the next bytes
    list.dispatch(touching(2, 2, 0, 64));   // another slot
    list.dispatch(touching(0, 3, 0, 64));
    list.dispatch(touching(0, 3, 0, 64));  // read twice
    Dispatch placeholder;                   // every binding the placeholder, written and read
    placeholder.use(kernel());
    list.dispatch(placeholder);
    list.dispatch(placeholder);
    CHECK(list.hazards().empty());
  }

  TEST_CASE("barrier check: an indirect grid needs its write made visible to indirect-command reads") {
    Dispatch writer = touching(2, 1, 0, 64);
    Dispatch indirect = touching(0, 2, 0, 16);
    indirect.indirect_slot = 1;
    indirect.indirect_offset = 16;
    CommandList shader_only;
    shader_only.dispatch(writer);
    shader_only.compute_barrier(kWrite, kRead);
    shader_only.dispatch(indirect);
    const std::vector<std::string> found = shader_only.hazards();
    REQUIRE(found.size() == 1);
    CHECK(found[0].find("indirect grid") != std::string::npos);

    CommandList right;
    right.dispatch(writer);
    right.indirect_barrier(kWrite, kRead | VK_ACCESS_INDIRECT_COMMAND_READ_BIT);
    right.dispatch(indirect);
    CHECK(right.hazards().empty());

    // Rewriting a grid after it was read needs the indirect stage in the barrier's first scope.
    CommandList rewrite;
    rewrite.dispatch(indirect);
    rewrite.compute_barrier(kRead, kWrite);
    rewrite.dispatch(writer);
    CHECK(has(rewrite.hazards(), "write after read"));
    CommandList rewrite_ordered;
    rewrite_ordered.dispatch(indirect);
    rewrite_ordered.indirect_barrier(kRead | VK_ACCESS_INDIRECT_COMMAND_READ_BIT, kWrite);
    rewrite_ordered.dispatch(writer);
    CHECK(rewrite_ordered.hazards().empty());
  }

  TEST_CASE("barrier check: the next call recorded right after must find the workspace ordered") {
    // A call that reads back, from its workspace (slot 9), what it wrote there: the next call's
    // write of the same bytes needs a barrier before it, which only the list itself can give.
    const auto call = [](bool leading_barrier) {
      CommandList list;
      list.own_slot(9);
      if (leading_barrier) list.compute_barrier(kRead | kWrite, kWrite);
      list.dispatch(touching(2, 9, 0, 64));
      list.compute_barrier(kWrite, kRead);
      list.dispatch(touching(0, 9, 0, 64));
      return list;
    };
    const std::vector<std::string> found = call(false).hazards();
    CHECK(has(found, "write after read"));
    CHECK(found.at(0).find("the next call's step 0") != std::string::npos);
    CHECK(call(true).hazards().empty());

    // The same on a slot of the caller's (not own): the caller orders its buffers between calls.
    CommandList callers;
    callers.dispatch(touching(2, 4, 0, 64));
    callers.compute_barrier(kWrite, kRead);
    callers.dispatch(touching(0, 4, 0, 64));
    CHECK(callers.hazards().empty());
  }
}
