// Request bodies and reply parsing for the CLI (see replies.hpp).
#include "gateway/replies.hpp"

#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

#include "messages/json_number.hpp"
#include "messages/json_text.hpp"

namespace troupe::gateway {

using nlohmann::json;

std::string job_request(const std::string& job_id) {
  return json{{"job_id", job_id}}.dump();
}

std::string logs_request(const std::string& job_id, int rank, int64_t offset, int max_bytes) {
  return json{{"job_id", job_id}, {"rank", rank}, {"offset", offset}, {"max_bytes", max_bytes}}
      .dump();
}

std::string jobs_request(int64_t limit, const std::string& after, const std::string& state) {
  json j = json::object();
  if (limit > 0) j["limit"] = limit;
  if (!after.empty()) j["after"] = after;
  if (!state.empty()) j["state"] = state;
  return j.dump();
}

namespace {

// Parses `body` as a JSON object; nullopt when it is not one.
std::optional<json> object(std::string_view body) {
  json j = json_text::parse<json>(body.begin(), body.end());
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

std::string short_body(std::string_view body) {
  std::string s(body.substr(0, 200));
  if (body.size() > 200) s += "...";
  return s;
}

int64_t as_int(const json& v) {
  if (v.is_number()) return json_number::whole(v).value_or(0);
  if (v.is_string()) {  // protobuf JSON prints int64 as a string
    try {
      return std::stoll(v.get<std::string>());
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

}  // namespace

std::optional<ReplyError> reply_error_of(std::string_view body) {
  auto j = object(body);
  if (!j || !j->contains("error")) return std::nullopt;
  ReplyError r;
  const json& e = (*j)["error"];
  r.text = e.is_string() ? e.get<std::string>() : e.dump();
  if (auto it = j->find("code"); it != j->end() && it->is_string()) r.code = it->get<std::string>();
  return r;
}

std::optional<std::string> reply_error(std::string_view body) {
  auto r = reply_error_of(body);
  if (!r) return std::nullopt;
  return r->code.empty() ? r->text : r->code + ": " + r->text;
}

std::string parse_jobs_next(std::string_view body) {
  auto j = object(body);
  if (!j) return {};
  if (auto it = j->find("next"); it != j->end() && it->is_string()) return it->get<std::string>();
  return {};
}

std::string parse_history_reply(std::string_view body, std::vector<std::string>* events,
                                bool* truncated) {
  if (auto err = reply_error(body)) return *err;
  // ordered_json: each event is printed back with its fields in stored order.
  auto j = json_text::parse<nlohmann::ordered_json>(body.begin(), body.end());
  if (j.is_discarded() || !j.is_object() || !j.contains("events") || !j["events"].is_array())
    return "unreadable history reply: " + short_body(body);
  for (const auto& e : j["events"]) events->push_back(e.dump());
  *truncated = j.value("truncated", false);
  return {};
}

std::string parse_view(std::string_view body, google::protobuf::Message& m) {
  if (auto err = reply_error(body)) return *err;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = true;
  auto st = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(body.data(), body.size()), &m, opts);
  if (st.ok()) return {};
  return "unreadable reply (" + std::string(st.message()) + "): " + short_body(body);
}

SubmitReply parse_submit_reply(std::string_view body) {
  SubmitReply r;
  auto j = object(body);
  if (!j) {
    r.error = "unreadable submit reply: " + short_body(body);
  } else if (j->contains("error")) {
    r.error = *reply_error(body);
  } else if (j->contains("job_id") && (*j)["job_id"].is_string() &&
             !(*j)["job_id"].get<std::string>().empty()) {
    r.job_id = (*j)["job_id"].get<std::string>();
  } else {
    r.error = "submit reply has no job_id: " + short_body(body);
  }
  return r;
}

CancelReply parse_cancel_reply(std::string_view body) {
  CancelReply r;
  auto j = object(body);
  if (!j) {
    r.error = "unreadable cancel reply: " + short_body(body);
    return r;
  }
  if (j->contains("error")) {
    r.error = *reply_error(body);
    return r;
  }
  if (auto it = j->find("job_id"); it != j->end() && it->is_string())
    r.job_id = it->get<std::string>();
  if (auto it = j->find("state"); it != j->end() && it->is_string())
    r.state = it->get<std::string>();
  if (r.state.empty()) r.error = "cancel reply has no state: " + short_body(body);
  return r;
}

LogChunk parse_log_reply(std::string_view body, int64_t requested_offset) {
  LogChunk c;
  c.next_offset = requested_offset;
  auto j = object(body);
  if (!j) {
    c.error = "unreadable logs reply: " + short_body(body);
    return c;
  }
  if (j->contains("error")) {
    c.error = *reply_error(body);
    return c;
  }
  if (auto it = j->find("data"); it != j->end() && it->is_string()) c.data = it->get<std::string>();
  if (auto it = j->find("eof"); it != j->end() && it->is_boolean()) c.eof = it->get<bool>();
  if (auto it = j->find("size"); it != j->end()) c.size = as_int(*it);
  int64_t bytes = static_cast<int64_t>(c.data.size());
  int64_t off = requested_offset;
  bool has_off = false;
  if (auto it = j->find("offset"); it != j->end()) {
    off = as_int(*it);
    has_off = true;
  }
  if (has_off && off > requested_offset)
    c.next_offset = off;  // the end of this page
  else
    c.next_offset = (has_off ? off : requested_offset) + bytes;  // off was the start
  return c;
}

}  // namespace troupe::gateway
