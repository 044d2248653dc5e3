// The JSON the CLI sends to and reads from the scheduler (docs/contract.md):
// request bodies, `{"error"}` detection, protobuf views, log chunks. Pure.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::gateway {

// `{"job_id":"..."}` for status and cancel.
std::string job_request(const std::string& job_id);
// `{"job_id","rank","offset","max_bytes"}` for logs.
std::string logs_request(const std::string& job_id, int rank, int64_t offset, int max_bytes);

// `{"limit","after","state"}` for troupe.<team>.jobs and troupe.sys.jobs
// (limit 0 and empty fields are left out: the scheduler's defaults).
std::string jobs_request(int64_t limit, const std::string& after, const std::string& state);

// `{"error":"...","code":"..."}`: the code is stable (docs/api.md: not_found,
// bad_request, no_rank, unknown_node, unavailable), the text is for a person.
// `code` is "" when the reply has none (older schedulers, agents).
struct ReplyError {
  std::string code;
  std::string text;
};
std::optional<ReplyError> reply_error_of(std::string_view body);

// The error of `{"error":"..."}` when `body` is such a reply, as
// "<code>: <text>" when it carries a code; nullopt otherwise (also for bodies
// that are not JSON: the caller's parser reports those).
std::optional<std::string> reply_error(std::string_view body);

// Parses a reply into a protobuf view (JobView, JobList, NodeList, JobEvent),
// ignoring fields this CLI does not know yet. Returns "" or what is wrong,
// including the server's own `{"error"}` text.
std::string parse_view(std::string_view body, google::protobuf::Message& m);

// The "next" of a jobs page ("" on the last page, or when the reply is not
// JSON).
std::string parse_jobs_next(std::string_view body);

// A troupe.<team>.history reply: the job's stored events (each a JSON
// object's text, as stored), in stream order; `truncated` when the scheduler
// left out the oldest. Returns "" or what is wrong (the server's error too).
std::string parse_history_reply(std::string_view body, std::vector<std::string>* events,
                                bool* truncated);

// `{"job_id":"..."}` from a submit reply.
struct SubmitReply {
  std::string job_id;
  std::string error;
};
SubmitReply parse_submit_reply(std::string_view body);

// `{"job_id","state"}` from a cancel reply.
struct CancelReply {
  std::string job_id;
  std::string state;
  std::string error;
};
CancelReply parse_cancel_reply(std::string_view body);

// One page of a job's log. `next_offset` is where the next request starts.
// The contract's reply `offset` is read as the end of this page when it lies
// past the requested offset, else as its start (then start + bytes is next).
struct LogChunk {
  std::string data;
  int64_t next_offset = 0;
  bool eof = false;
  int64_t size = -1;  // total size when the server says, else -1
  std::string error;
};
LogChunk parse_log_reply(std::string_view body, int64_t requested_offset);

}  // namespace troupe::gateway
