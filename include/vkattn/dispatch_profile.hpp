// Per-dispatch GPU timing of the work vkattn records on a Context: where a call's time goes, dispatch
// by dispatch. On lavapipe a pipeline JIT-compiles at its first dispatch, so a call's first run
// against a later one shows what each pipeline's compile costs (`vkattn bench` reports it so).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vkattn/context.hpp"

namespace vkattn {

// One dispatch of a profiled call.
struct DispatchTime {
  // The pipeline that ran: its shader module and, where one kernel has several roles, the role, e.g.
  // "attention_subgroup_f16 (careful pass)", "attention_combine_f16".
  std::string pipeline;
  // The pipeline's number on its Context (0, 1, ... in build order): tells apart pipelines of the same
  // label (the same shader specialised differently).
  uint32_t pipeline_id = 0;
  // Which profiled call (one recording of a call's work, counted from 0 in recording order) it is part of.
  uint32_t call = 0;
  // GPU milliseconds from the end of the call's previous dispatch (or the call's start) to the end of
  // this one: the dispatch and the barrier before it.
  double ms = 0;
};

// While a DispatchProfile lives, every call vkattn records on its Context — synchronous (attention,
// the multi-head layer, time_attention) or recorded by the application (PreparedAttention::record,
// the paged and packed calls, PreparedMha::record) — also writes a GPU timestamp at its start and
// after each of its dispatches. Meant for measuring, from one thread: one profile per Context at a
// time, and keep it alive until the work recorded under it has completed.
class DispatchProfile {
 public:
  // Room for `max_dispatches` timestamps in all (each call takes one more than its dispatches); a
  // call that would not fit is recorded unprofiled and counted by unprofiled_calls(). Throws Error
  // when the device has no compute timestamp queries, when another profile is active on the Context,
  // or when max_dispatches is 0 or above 2^20.
  explicit DispatchProfile(Context& context, uint32_t max_dispatches = 4096);
  ~DispatchProfile();
  DispatchProfile(const DispatchProfile&) = delete;
  DispatchProfile& operator=(const DispatchProfile&) = delete;

  // The dispatches of every call recorded since the profile began or since the last collect(), in
  // recording order, and starts afresh. Call it once that work has completed: a call whose
  // timestamps are not all available yet (still running, or never submitted) is left out.
  std::vector<DispatchTime> collect();
  // The pipelines the Context built since the profile began, in build order (vkattn builds a
  // call's pipelines when it is planned: PreparedAttention's constructor, or a synchronous call);
  // Context::pipeline_builds without a profile.
  std::vector<PipelineBuild> builds() const;
  // Calls recorded without timestamps because the profile was full, since it began.
  uint32_t unprofiled_calls() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace vkattn
