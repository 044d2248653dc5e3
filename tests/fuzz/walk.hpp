// Shared by the fuzz targets: reading every field of a verified Envelope the
// way the scheduler's actors and the node agent do (wire::str on strings,
// wire::ints on GPU lists, loops over vectors of tables), and a check that
// turns a broken invariant into a crash libFuzzer reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "messages/wire.hpp"

namespace troupe::fuzz {

// A broken invariant: libFuzzer saves the input as a crash reproducer.
inline void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

inline std::string_view text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Each `visit` returns a number derived from what it read, so that nothing is
// optimized away; the sum means nothing.
inline size_t visit(const flatbuffers::String* s) {
  return wire::str(s).size();
}
inline size_t visit(const flatbuffers::Vector<int32_t>* v) {
  return wire::ints(v).size();
}
template <class T>
std::enable_if_t<std::is_arithmetic_v<T>, size_t> visit(T x) {
  return static_cast<size_t>(x);
}

// clang-format off
#define TROUPE_FUZZ_TABLES(X)                                                            \
  X(KeyValue) X(Resources) X(JobSpec) X(SubmitRequest) X(SubmitReply) X(WorkerPlacement) \
  X(JobEvent) X(Gpu) X(WorkerRef) X(NodeRegister) X(Heartbeat) X(Launch) X(Stop)        \
  X(Checkpointed) X(Started) X(Exited) X(Propose) X(Reserve) X(Accept) X(Reject)        \
  X(Commit) X(Release) X(Forget)
// clang-format on
#define TROUPE_FUZZ_DECLARE(T) size_t visit(const wire::T* t);
TROUPE_FUZZ_TABLES(TROUPE_FUZZ_DECLARE)
#undef TROUPE_FUZZ_DECLARE

template <class T>
size_t visit(const flatbuffers::Vector<flatbuffers::Offset<T>>* v) {
  size_t n = 0;
  if (v != nullptr)
    for (const T* x : *v) n += visit(x);
  return n;
}

template <class... A>
size_t visit_all(const A&... a) {
  return (visit(a) + ... + size_t{0});
}

// An absent table counts as nothing, as the actors treat it.
#define TROUPE_FUZZ_TABLE(T, ...)                     \
  inline size_t visit(const wire::T* t) {             \
    return t == nullptr ? 0 : visit_all(__VA_ARGS__); \
  }
TROUPE_FUZZ_TABLE(KeyValue, t->key(), t->value())
TROUPE_FUZZ_TABLE(Resources, t->gpus(), t->gpu_type(), t->cpus(), t->memory_mb())
TROUPE_FUZZ_TABLE(JobSpec, t->name(), t->team(), t->kind(), t->command(), t->env(), t->image(),
                  t->resources(), t->workers(), t->priority(), t->max_runtime_s(), t->max_retries(),
                  t->idempotency_key(), t->pool())
TROUPE_FUZZ_TABLE(SubmitRequest, t->spec())
TROUPE_FUZZ_TABLE(SubmitReply, t->job_id(), t->error())
TROUPE_FUZZ_TABLE(WorkerPlacement, t->rank(), t->node(), t->gpus())
TROUPE_FUZZ_TABLE(JobEvent, t->job_id(), t->team(), t->state(), t->attempt(), t->ts_ms(),
                  t->workers(), t->exit_code(), t->reason())
TROUPE_FUZZ_TABLE(Gpu, t->index(), t->name(), t->memory_mb())
TROUPE_FUZZ_TABLE(WorkerRef, t->job_id(), t->attempt(), t->rank())
TROUPE_FUZZ_TABLE(NodeRegister, t->node(), t->host(), t->gpu_type(), t->gpus(), t->cpus(),
                  t->memory_mb(), t->simulate(), t->running(), t->pool(), t->rack(), t->ended())
TROUPE_FUZZ_TABLE(Heartbeat, t->node(), t->seq(), t->running())
TROUPE_FUZZ_TABLE(Launch, t->job_id(), t->team(), t->attempt(), t->rank(), t->world_size(),
                  t->coordinator(), t->gpus(), t->command(), t->env(), t->max_runtime_s(),
                  t->grace_s(), t->checkpoint_dir(), t->epoch())
TROUPE_FUZZ_TABLE(Stop, t->job_id(), t->attempt(), t->rank(), t->grace_s(), t->reason(),
                  t->signal(), t->kill_after_s(), t->epoch())
TROUPE_FUZZ_TABLE(Forget, t->job_id(), t->checkpoint_dir(), t->epoch())
TROUPE_FUZZ_TABLE(Checkpointed, t->node(), t->job_id(), t->attempt(), t->rank(), t->path(),
                  t->ts_ms())
TROUPE_FUZZ_TABLE(Started, t->node(), t->job_id(), t->attempt(), t->rank(), t->pid())
TROUPE_FUZZ_TABLE(Exited, t->node(), t->job_id(), t->attempt(), t->rank(), t->exit_code(),
                  t->signal(), t->reason())
TROUPE_FUZZ_TABLE(Propose, t->reservation_id(), t->job_id(), t->team(), t->resources(),
                  t->lease_ms())
TROUPE_FUZZ_TABLE(Reserve, t->reservation_id(), t->gang_id(), t->job_id(), t->team(),
                  t->resources(), t->lease_ms(), t->rank())
TROUPE_FUZZ_TABLE(Accept, t->reservation_id(), t->node(), t->gpu_indices(), t->lease_expires_ms())
TROUPE_FUZZ_TABLE(Reject, t->reservation_id(), t->node(), t->reason())
TROUPE_FUZZ_TABLE(Commit, t->reservation_id(), t->launch())
TROUPE_FUZZ_TABLE(Release, t->reservation_id(), t->reason())
#undef TROUPE_FUZZ_TABLE

// The body an Envelope carries, whichever it is (body_as_X is null for the
// others); an unknown body type (a newer sender) counts as nothing.
inline size_t visit(const wire::Envelope& e) {
  return std::string_view(wire::body_name(e.body_type())).size() +
         visit_all(e.body_as_SubmitRequest(), e.body_as_SubmitReply(), e.body_as_JobEvent(),
                   e.body_as_NodeRegister(), e.body_as_Heartbeat(), e.body_as_Launch(),
                   e.body_as_Stop(), e.body_as_Started(), e.body_as_Exited(), e.body_as_Propose(),
                   e.body_as_Reserve(), e.body_as_Accept(), e.body_as_Reject(), e.body_as_Commit(),
                   e.body_as_Release(), e.body_as_Checkpointed(), e.body_as_Forget());
}

}  // namespace troupe::fuzz
