#include "bus/nats.hpp"

#include <nats/nats.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bus/serial_queue.hpp"
#include "bus/subjects.hpp"

namespace troupe::bus {

namespace {

std::string status_text(natsStatus s) {
  const char* last = nats_GetLastError(nullptr);
  std::string out = natsStatus_GetText(s);
  if (last != nullptr && *last != '\0' && out != last) {
    out += ": ";
    out += last;
  }
  return out;
}

void on_message(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
  auto* handler = static_cast<Handler*>(closure);
  Inbound in;
  in.subject = natsMsg_GetSubject(msg);
  if (const char* r = natsMsg_GetReply(msg)) in.reply = r;
  const auto* d = reinterpret_cast<const uint8_t*>(natsMsg_GetData(msg));
  in.data.assign(d, d + natsMsg_GetDataLength(msg));
  in.no_responders = natsMsg_IsNoResponders(msg);
  natsMsg_Destroy(msg);
  (*handler)(std::move(in));
}

// The last call of a closed subscription's handler has returned: the handler
// (handed to the library by Subscription's destructor) can go.
void on_complete(void* closure) {
  std::unique_ptr<Handler> owned(static_cast<Handler*>(closure));
}

void on_reconnected(natsConnection*, void* closure) {
  auto* opts = static_cast<ConnectOptions*>(closure);
  if (opts->on_reconnected) opts->on_reconnected();
}

// base64url (no padding) -> bytes; "" when malformed.
std::string base64url_decode(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char ch : in) {
    int v;
    if (ch >= 'A' && ch <= 'Z')
      v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z')
      v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9')
      v = ch - '0' + 52;
    else if (ch == '-' || ch == '+')
      v = 62;
    else if (ch == '_' || ch == '/')
      v = 63;
    else if (ch == '=')
      break;
    else
      return {};
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

}  // namespace

// What the server reported asynchronously (libnats' error handler).
struct Connection::Errors {
  mutable std::mutex mu;
  std::condition_variable cv;
  std::string last;
  std::vector<std::string> unseen;  // for wait_async_error (bounded)
  std::function<void(const std::string&)> sink;
  static void on_error(natsConnection*, natsSubscription* sub, natsStatus s, void* closure) {
    auto* self = static_cast<Errors*>(closure);
    const char* last = nats_GetLastError(nullptr);
    std::string text = (last != nullptr && *last != '\0') ? last : natsStatus_GetText(s);
    if (sub != nullptr) {
      if (const char* subj = natsSubscription_GetSubject(sub))
        text += std::string(" (subscription ") + subj + ")";
    }
    {
      std::lock_guard<std::mutex> lock(self->mu);
      self->last = text;
      if (self->unseen.size() < 1000) self->unseen.push_back(text);
    }
    self->cv.notify_all();
    if (self->sink)
      self->sink(text);
    else
      std::fprintf(stderr, "nats: %s\n", text.c_str());
  }
};

std::string redact_url(const std::string& url) {
  std::string out;
  size_t start = 0;
  while (start <= url.size()) {
    size_t comma = url.find(',', start);
    std::string one =
        url.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t scheme = one.find("://");
    size_t from = scheme == std::string::npos ? 0 : scheme + 3;
    size_t at = one.find('@', from);
    if (at != std::string::npos) one = one.substr(0, from) + "***" + one.substr(at);
    out += one;
    if (comma == std::string::npos) break;
    out += ',';
    start = comma + 1;
  }
  return out;
}

std::string creds_identity(const std::string& creds_file, std::string* error) {
  auto fail = [&](const std::string& why) {
    if (error != nullptr) *error = creds_file + ": " + why;
    return std::string();
  };
  FILE* f = std::fopen(creds_file.c_str(), "rb");
  if (f == nullptr) return fail(std::strerror(errno));
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() < (1u << 20))
    text.append(buf, n);
  std::fclose(f);
  const std::string begin = "-----BEGIN NATS USER JWT-----";
  auto b = text.find(begin);
  if (b == std::string::npos) return fail("no NATS USER JWT in the file");
  b = text.find_first_not_of("\r\n", b + begin.size());
  auto e = b == std::string::npos ? b : text.find_first_of("\r\n", b);
  if (e == std::string::npos) return fail("unterminated JWT");
  std::string jwt = text.substr(b, e - b);
  auto d1 = jwt.find('.');
  auto d2 = d1 == std::string::npos ? d1 : jwt.find('.', d1 + 1);
  if (d2 == std::string::npos) return fail("the JWT is malformed");
  std::string claims = base64url_decode(std::string_view(jwt).substr(d1 + 1, d2 - d1 - 1));
  // {"...","name":"team-nlp",...}: the claims are JSON made by our signer or
  // by nsc; the name is a plain string (identities are subject tokens).
  auto k = claims.find("\"name\":\"");
  if (k == std::string::npos) return fail("the JWT has no name");
  k += 8;
  auto q = claims.find('"', k);
  if (q == std::string::npos) return fail("the JWT's name is malformed");
  return claims.substr(k, q - k);
}

Library::Library() {
  nats_Open(-1);
}
Library::~Library() {
  // Waits for the library's threads: a connection's last reference (and its
  // TLS context) is freed on one of them, and if that runs while exit()
  // cleans up OpenSSL the process dies with SIGSEGV (seen in `troupe` CLI
  // runs about one in 200). Not called from a NATS thread, so it cannot
  // deadlock; a thread stuck past the bound is left to exit().
  nats_CloseAndWait(5000);
  // libnats 3.4's exit handler frees OpenSSL's list of compression methods
  // (the cleanup of OpenSSL 1.0's API), and OpenSSL 3 frees the same list in
  // its own exit handler after it: a double free that crashed some exits
  // (seen under valgrind; in a process that also loads cpp-httplib, every
  // time). Taken out of OpenSSL's hands here, neither finds a list to free.
  STACK_OF(SSL_COMP)* methods = SSL_COMP_set0_compression_methods(nullptr);
  sk_SSL_COMP_free(methods);
}

Subscription::~Subscription() {
  if (sub_ == nullptr) return;
  // A delivery thread may be in the handler right now, or call it once
  // more: the library frees the handler once its last call has returned
  // (on_complete). Should the library refuse that (a subscription already
  // closed with its connection), the handler is left allocated rather than
  // freed under a running call.
  if (natsSubscription_SetOnCompleteCB(sub_, on_complete, handler_.get()) == NATS_OK ||
      !natsSubscription_IsValid(sub_))
    (void)handler_.release();
  natsSubscription_Unsubscribe(sub_);
  natsSubscription_Destroy(sub_);
}

int64_t Subscription::dropped() const {
  int64_t n = 0;
  if (sub_ != nullptr) natsSubscription_GetDropped(sub_, &n);
  return n;
}

std::unique_ptr<Connection> Connection::open(const ConnectOptions& o, std::string* error) {
  std::unique_ptr<Connection> c(new Connection());
  c->opts_ = std::make_unique<ConnectOptions>(o);
  c->errors_ = std::make_unique<Errors>();
  c->errors_->sink = o.on_error;
  if (!o.creds_file.empty() && c->opts_->inbox_prefix.empty()) {
    std::string err;
    std::string identity = creds_identity(o.creds_file, &err);
    if (identity.empty()) {
      if (error != nullptr) *error = "cannot use the credentials " + err;
      return nullptr;
    }
    c->opts_->inbox_prefix = subjects::inbox_prefix(identity);
  }
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) {
    if (o.url.find(',') == std::string::npos) {
      s = natsOptions_SetURL(opts, o.url.c_str());
    } else {
      std::vector<std::string> urls;
      for (size_t start = 0;;) {
        size_t comma = o.url.find(',', start);
        urls.push_back(o.url.substr(start, comma == std::string::npos ? comma : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      std::vector<const char*> ptrs;
      for (const auto& u : urls) ptrs.push_back(u.c_str());
      s = natsOptions_SetServers(opts, ptrs.data(), static_cast<int>(ptrs.size()));
    }
  }
  if (s == NATS_OK && !o.creds_file.empty())
    s = natsOptions_SetUserCredentialsFromFiles(opts, o.creds_file.c_str(), nullptr);
  if (s == NATS_OK && !c->opts_->inbox_prefix.empty())
    s = natsOptions_SetCustomInboxPrefix(opts, c->opts_->inbox_prefix.c_str());
  if (s == NATS_OK && !o.tls_ca.empty()) {
    s = natsOptions_SetSecure(opts, true);
    if (s == NATS_OK) s = natsOptions_LoadCATrustedCertificates(opts, o.tls_ca.c_str());
  }
  if (s == NATS_OK) s = natsOptions_SetErrorHandler(opts, &Errors::on_error, c->errors_.get());
  if (s == NATS_OK && o.shared_delivery) s = natsOptions_UseGlobalMessageDelivery(opts, true);
  if (s == NATS_OK) s = natsOptions_SetName(opts, o.name.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, o.timeout_ms);
  if (s == NATS_OK) s = natsOptions_SetSendAsap(opts, o.send_asap);
  if (s == NATS_OK) s = natsOptions_SetAllowReconnect(opts, true);
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, o.max_reconnect);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, o.reconnect_wait_ms);
  if (s == NATS_OK) s = natsOptions_SetReconnectBufSize(opts, 64 * 1024 * 1024);
  if (s == NATS_OK) s = natsOptions_SetMaxPendingMsgs(opts, 1 << 20);
  if (s == NATS_OK) s = natsOptions_SetReconnectedCB(opts, on_reconnected, c->opts_.get());
  if (s == NATS_OK) s = natsConnection_Connect(&c->nc_, opts);
  // nats-server 2.9.10 with libnats 3.4.1 refuses about one creds connection
  // in a few hundred with "authentication error" and takes the same file at
  // once on the next try (seen with freshly signed identities; the cause is
  // not in the file). A real refusal fails every try.
  for (int retry = 0; s == NATS_CONNECTION_AUTH_FAILED && !o.creds_file.empty() && retry < 3;
       ++retry) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    c->nc_ = nullptr;
    s = natsConnection_Connect(&c->nc_, opts);
  }
  natsOptions_Destroy(opts);
  if (s != NATS_OK) {
    if (error != nullptr) {
      *error = "cannot connect to " + redact_url(o.url) + ": " + status_text(s);
      if (o.creds_file.empty() && s == NATS_CONNECTION_AUTH_FAILED)
        *error += " (the server requires an identity: pass --creds FILE or set TROUPE_NATS_CREDS)";
      else if (o.tls_ca.empty() &&
               (s == NATS_SECURE_CONNECTION_REQUIRED || error->find("SSL") != std::string::npos))
        *error += " (the server requires TLS: pass --tls-ca FILE or set TROUPE_NATS_CA)";
    }
    c->nc_ = nullptr;
    return nullptr;
  }
  return c;
}

Connection::~Connection() {
  if (nc_ != nullptr) {
    natsConnection_FlushTimeout(nc_, 1000);
    natsConnection_Close(nc_);
    natsConnection_Destroy(nc_);
  }
}

bool Connection::publish(const std::string& subject, const void* data, size_t size,
                         const std::string& reply) {
  natsStatus s;
  if (reply.empty())
    s = natsConnection_Publish(nc_, subject.c_str(), data, static_cast<int>(size));
  else
    s = natsConnection_PublishRequest(nc_, subject.c_str(), reply.c_str(), data,
                                      static_cast<int>(size));
  return s == NATS_OK;
}

constexpr std::chrono::milliseconds kNoRespondersPause{100};

std::string request_failure(const std::string& subject, bool no_responders,
                            const std::string& last_async) {
  if (no_responders) return "no responders on " + subject;
  std::string e = "request on " + subject + " timed out";
  if (last_async.find("ermission") != std::string::npos) e += " (" + last_async + ")";
  return e;
}

// Why a request on `subject` got no answer, as a user reads it (see
// request_failure).
std::string request_error(const std::string& subject, natsStatus s, const std::string& last_async) {
  if (s == NATS_NO_RESPONDERS || s == NATS_TIMEOUT)
    return request_failure(subject, s == NATS_NO_RESPONDERS, last_async);
  std::string e = "request on " + subject + ": " + status_text(s);
  if (s == NATS_NOT_PERMITTED && last_async.find("ermission") != std::string::npos)
    e += " (" + last_async + ")";
  return e;
}

bool Connection::in_cluster() const {
  char** servers = nullptr;
  int count = 0;
  if (natsConnection_GetServers(nc_, &servers, &count) != NATS_OK) return false;
  for (int i = 0; i < count; ++i) std::free(servers[i]);
  std::free(static_cast<void*>(servers));
  return count > 1;
}

std::optional<std::vector<uint8_t>> Connection::request(const std::string& subject,
                                                        const void* data, size_t size,
                                                        int timeout_ms, std::string* error) {
  natsMsg* reply = nullptr;
  const auto start = std::chrono::steady_clock::now();
  natsStatus s = natsConnection_Request(&reply, nc_, subject.c_str(), data, static_cast<int>(size),
                                        timeout_ms);
  // In a NATS cluster "no responders" can be a moment's: the responder's
  // connection is moving to another server, or its interest has not reached
  // this one yet. Asked again (nothing was delivered) within the request's
  // time, 5 s at most; with one server it is the answer at once.
  if (s == NATS_NO_RESPONDERS && in_cluster()) {
    const auto until = start + std::chrono::milliseconds(std::min(timeout_ms, 5000));
    while (s == NATS_NO_RESPONDERS &&
           std::chrono::steady_clock::now() + kNoRespondersPause < until) {
      std::this_thread::sleep_for(kNoRespondersPause);
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          start + std::chrono::milliseconds(timeout_ms) - std::chrono::steady_clock::now());
      s = natsConnection_Request(&reply, nc_, subject.c_str(), data, static_cast<int>(size),
                                 std::max<int64_t>(1, left.count()));
    }
  }
  if (s != NATS_OK) {
    if (error != nullptr) {
      *error = request_error(subject, s, last_async_error());
      if (s == NATS_NO_RESPONDERS) *error += " (is troupe-scheduler running?)";
    }
    return std::nullopt;
  }
  const auto* d = reinterpret_cast<const uint8_t*>(natsMsg_GetData(reply));
  std::vector<uint8_t> out(d, d + natsMsg_GetDataLength(reply));
  natsMsg_Destroy(reply);
  return out;
}

SubscriptionPtr Connection::subscribe(const std::string& subject, Handler handler,
                                      const std::string& queue) {
  SubscriptionPtr sub(new Subscription());
  sub->handler_ = std::make_unique<Handler>(std::move(handler));
  natsStatus s;
  if (queue.empty())
    s = natsConnection_Subscribe(&sub->sub_, nc_, subject.c_str(), on_message, sub->handler_.get());
  else
    s = natsConnection_QueueSubscribe(&sub->sub_, nc_, subject.c_str(), queue.c_str(), on_message,
                                      sub->handler_.get());
  if (s != NATS_OK) {
    sub->sub_ = nullptr;
    return nullptr;
  }
  natsSubscription_SetPendingLimits(sub->sub_, 1 << 20, 1 << 30);
  return sub;
}

bool Connection::flush(int timeout_ms) {
  return natsConnection_FlushTimeout(nc_, timeout_ms) == NATS_OK;
}

std::string Connection::new_inbox() {
  natsInbox* inbox = nullptr;
  natsInbox_Create(&inbox);
  std::string out(inbox);
  natsInbox_Destroy(inbox);
  // natsInbox_Create ignores the custom prefix: "_INBOX.<nuid>".
  if (!opts_->inbox_prefix.empty() && out.rfind("_INBOX.", 0) == 0)
    out = opts_->inbox_prefix + out.substr(6);
  return out;
}

std::string Connection::last_async_error() const {
  std::lock_guard<std::mutex> lock(errors_->mu);
  return errors_->last;
}

bool Connection::wait_async_error(const std::string& needle, int timeout_ms) {
  std::unique_lock<std::mutex> lock(errors_->mu);
  auto& u = errors_->unseen;
  auto found = [&] {
    for (auto it = u.begin(); it != u.end(); ++it)
      if (it->find(needle) != std::string::npos) {
        u.erase(u.begin(), it + 1);
        return true;
      }
    return false;
  };
  return errors_->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), found);
}

bool Connection::connected() const {
  return natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED;
}

// --- JetStream ---------------------------------------------------------------

constexpr int64_t kAckWaitMs = 5000;

// In a NATS cluster a stream has no leader for a moment after the server
// that led it is lost (a second or two while its replicas elect another):
// a publish then gets "no responders". It is sent again every kRetryEveryMs
// until kRetryForMs after its first send, and only then fails.
constexpr int64_t kRetryEveryMs = 250;
constexpr int64_t kRetryForMs = 10000;

struct JetStream::Impl {
  using SteadyClock = std::chrono::steady_clock;
  Connection* conn = nullptr;
  jsCtx* js = nullptr;
  std::mutex mu;
  using RawFn = std::function<void(const jsPubAck*, const jsPubAckErr*)>;
  struct Pending {
    RawFn fn;
    SteadyClock::time_point first;  // the first send
  };
  std::unordered_map<natsMsg*, Pending> pending;  // keyed by the published message

  // A publish to send again (a copy of its message: nats.c set the first
  // one's reply inbox).
  struct Retry {
    std::string subject;
    std::string data;
    std::vector<std::pair<std::string, std::string>> headers;
    Pending p;
    SteadyClock::time_point due;
  };
  SerialQueue<Retry> retries{65536, [this](Retry& r) { resend(r); }};

  static void on_ack(jsCtx*, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
    auto* self = static_cast<Impl*>(closure);
    Pending p;
    {
      std::lock_guard<std::mutex> lock(self->mu);
      auto it = self->pending.find(msg);
      if (it != self->pending.end()) {
        p = std::move(it->second);
        self->pending.erase(it);
      }
    }
    const auto now = SteadyClock::now();
    // Also an ack that never came (a server lost as it took the publish),
    // when the message carries a Nats-Msg-Id: the stream drops a second copy.
    const char* msg_id = nullptr;
    const bool again =
        pae != nullptr &&
        (pae->Err == NATS_NO_RESPONDERS ||
         (pae->Err == NATS_TIMEOUT && natsMsgHeader_Get(msg, "Nats-Msg-Id", &msg_id) == NATS_OK));
    if (p.fn && pa == nullptr && again && now - p.first < std::chrono::milliseconds(kRetryForMs)) {
      Retry r{natsMsg_GetSubject(msg),
              std::string(natsMsg_GetData(msg), static_cast<size_t>(natsMsg_GetDataLength(msg))),
              headers_of(msg), std::move(p), now + std::chrono::milliseconds(kRetryEveryMs)};
      if (self->retries.post(r)) {
        natsMsg_Destroy(msg);
        return;
      }
      p = std::move(r.p);  // refused (closing, or a flood): it fails now
    }
    if (p.fn) p.fn(pa, pae);
    natsMsg_Destroy(msg);
  }

  static std::vector<std::pair<std::string, std::string>> headers_of(natsMsg* msg) {
    std::vector<std::pair<std::string, std::string>> out;
    const char** keys = nullptr;
    int n = 0;
    if (natsMsgHeader_Keys(msg, &keys, &n) != NATS_OK) return out;
    for (int i = 0; i < n; ++i) {
      const char* v = nullptr;
      if (natsMsgHeader_Get(msg, keys[i], &v) == NATS_OK && v != nullptr)
        out.emplace_back(keys[i], v);
    }
    std::free(static_cast<void*>(keys));
    return out;
  }

  void resend(Retry& r) {
    std::this_thread::sleep_until(r.due);
    natsMsg* msg = nullptr;
    natsStatus s = natsMsg_Create(&msg, r.subject.c_str(), nullptr, r.data.data(),
                                  static_cast<int>(r.data.size()));
    for (const auto& [k, v] : r.headers)
      if (s == NATS_OK) s = natsMsgHeader_Set(msg, k.c_str(), v.c_str());
    if (s != NATS_OK) {
      natsMsg_Destroy(msg);
      fail(r.p.fn, s);
      return;
    }
    send(msg, std::move(r.p));
  }

  static void fail(const RawFn& f, natsStatus s) {
    if (!f) return;
    jsPubAckErr err{};
    std::string text = status_text(s);
    err.Err = s;
    err.ErrText = text.c_str();
    f(nullptr, &err);
  }

  // The originals of duplicates (publish_unique), read one at a time on a
  // thread of their own; at most kMaxReads wait.
  struct Read {
    std::string stream, msg_id;
    uint64_t seq = 0;
    UniqueFn done;
  };
  static constexpr size_t kMaxReads = 4096;
  SerialQueue<Read> reads{kMaxReads, [this](Read& r) { r.done(fetch(r)); }};

  static Unique unread(const Read& r, const std::string& why) {
    Unique u;
    u.duplicate = true;
    u.seq = r.seq;
    u.error = "a duplicate of message " + std::to_string(r.seq) + " of stream " + r.stream +
              ", which could not be read: " + why;
    return u;
  }

  void read_original(Read r) {
    if (!reads.post(r)) r.done(unread(r, "too many reads waiting, or the context is closing"));
  }

  // The message the duplicate `r` was dropped for: stored as r.seq under r.msg_id.
  Unique fetch(const Read& r) {
    natsMsg* m = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    natsStatus s = js_GetMsg(&m, js, r.stream.c_str(), r.seq, nullptr, &jerr);
    if (s != NATS_OK) return unread(r, jerr == JSNoMessageFoundErr ? "it is gone" : status_text(s));
    const char* id = nullptr;
    Unique u;
    if (natsMsgHeader_Get(m, "Nats-Msg-Id", &id) != NATS_OK || id == nullptr || r.msg_id != id) {
      u = unread(r, "it has another message id");
    } else {
      u.ok = true;
      u.duplicate = true;
      u.seq = r.seq;
      const auto* d = reinterpret_cast<const uint8_t*>(natsMsg_GetData(m));
      u.original.assign(d, d + natsMsg_GetDataLength(m));
    }
    natsMsg_Destroy(m);
    return u;
  }

  // Stops the reader; reads still waiting end unread.
  void close_reads() {
    for (auto& r : reads.close()) r.done(unread(r, "the JetStream context is closing"));
  }

  // Publishes `msg` (owned) asynchronously; `fn` gets the server's answer.
  void send(natsMsg* msg, RawFn fn) { send(msg, Pending{std::move(fn), SteadyClock::now()}); }
  void send(natsMsg* msg, Pending p) {
    {
      std::lock_guard<std::mutex> lock(mu);
      pending.emplace(msg, std::move(p));
    }
    natsMsg* owned = msg;
    // An ack that never comes (nats-server stopped before storing it) ends
    // as an error after MaxWait, not as a publish pending forever.
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = kAckWaitMs;
    natsStatus s = js_PublishMsgAsync(js, &owned, &po);
    if (s == NATS_OK) return;
    RawFn f;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = pending.find(msg);
      if (it != pending.end()) {
        f = std::move(it->second.fn);
        pending.erase(it);
      }
    }
    if (owned != nullptr) natsMsg_Destroy(owned);
    fail(f, s);
  }
};

__jsCtx* JetStream::ctx() {
  return impl_->js;
}

std::unique_ptr<JetStream> JetStream::open(Connection& conn, std::string* error) {
  std::unique_ptr<JetStream> j(new JetStream());
  j->impl_ = std::make_unique<Impl>();
  j->impl_->conn = &conn;
  jsOptions o;
  jsOptions_Init(&o);
  o.PublishAsync.AckHandler = &Impl::on_ack;
  o.PublishAsync.AckHandlerClosure = j->impl_.get();
  o.PublishAsync.MaxPending = 65536;
  o.Wait = 5000;
  natsStatus s = natsConnection_JetStream(&j->impl_->js, conn.raw(), &o);
  if (s != NATS_OK) {
    if (error != nullptr) *error = "JetStream: " + status_text(s);
    return nullptr;
  }
  return j;
}

JetStream::~JetStream() {
  if (impl_ && impl_->js != nullptr) {
    for (auto& r : impl_->retries.close()) Impl::fail(r.p.fn, NATS_CONNECTION_CLOSED);
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 2000;
    js_PublishAsyncComplete(impl_->js, &po);
    impl_->close_reads();
    jsCtx_Destroy(impl_->js);
  }
}

bool JetStream::ensure_stream_fitting(StreamConfig& cfg, bool shrink, int64_t min_bytes,
                                      bool then_unbounded, std::string* error) {
  for (;;) {
    if (ensure_stream(cfg, error)) return true;
    if (!shrink || cfg.max_bytes == 0 || error->find("insufficient storage") == std::string::npos)
      return false;
    if (cfg.max_bytes / 2 >= min_bytes)
      cfg.max_bytes /= 2;
    else if (then_unbounded)
      cfg.max_bytes = 0;
    else
      return false;
  }
}

bool JetStream::ensure_stream(const StreamConfig& cfg, std::string* error) {
  jsStreamConfig sc;
  jsStreamConfig_Init(&sc);
  sc.Name = cfg.name.c_str();
  std::vector<const char*> subs;
  for (const auto& s : cfg.subjects) subs.push_back(s.c_str());
  sc.Subjects = subs.data();
  sc.SubjectsLen = static_cast<int>(subs.size());
  sc.Storage = cfg.memory ? js_MemoryStorage : js_FileStorage;
  sc.Duplicates = cfg.duplicate_window_ms * 1000 * 1000;  // ns
  sc.MaxAge = cfg.max_age_s * 1000LL * 1000 * 1000;
  if (cfg.max_bytes > 0) sc.MaxBytes = cfg.max_bytes;  // discard: the oldest first
  sc.Replicas = std::max(1, cfg.replicas);
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_AddStream(nullptr, impl_->js, &sc, nullptr, &jerr);
  if (s != NATS_OK && jerr == JSStreamNameExistErr)
    s = js_UpdateStream(nullptr, impl_->js, &sc, nullptr, &jerr);
  if (s != NATS_OK) {
    if (error != nullptr) {
      *error = "stream " + cfg.name + ": " + status_text(s);
      if (sc.Replicas > 1 &&
          (jerr == JSInsufficientResourcesErr || jerr == JSStreamReplicasNotSupportedErr))
        *error += " (" + std::to_string(sc.Replicas) +
                  " replicas need a NATS cluster of that many JetStream servers: lower "
                  "--replicas, or start the cluster's servers)";
    }
    return false;
  }
  return true;
}

bool JetStream::set_replicas(const std::string& stream, int replicas, std::string* error) {
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&si, impl_->js, stream.c_str(), nullptr, &jerr);
  if (s == NATS_OK && si->Config->Replicas != replicas) {
    si->Config->Replicas = replicas;
    jsStreamInfo* updated = nullptr;
    s = js_UpdateStream(&updated, impl_->js, si->Config, nullptr, &jerr);
    jsStreamInfo_Destroy(updated);
  }
  jsStreamInfo_Destroy(si);
  if (s != NATS_OK && error != nullptr)
    *error = "stream " + stream + ": " + std::to_string(replicas) + " replicas: " + status_text(s);
  return s == NATS_OK;
}

int64_t JetStream::storage_limit() {
  jsAccountInfo* ai = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  if (js_GetAccountInfo(&ai, impl_->js, nullptr, &jerr) != NATS_OK || ai == nullptr) return 0;
  int64_t limit = ai->Limits.MaxStore > 0 ? ai->Limits.MaxStore : 0;
  jsAccountInfo_Destroy(ai);
  return limit;
}

namespace {

// A message to publish with `msg_id` as its Nats-Msg-Id ("" for none); null
// and `error` when the client refused.
natsMsg* new_msg(const std::string& subject, const void* data, size_t size,
                 const std::string& msg_id, std::string* error) {
  natsMsg* msg = nullptr;
  natsStatus s = natsMsg_Create(&msg, subject.c_str(), nullptr, static_cast<const char*>(data),
                                static_cast<int>(size));
  if (s == NATS_OK && !msg_id.empty()) s = natsMsgHeader_Set(msg, "Nats-Msg-Id", msg_id.c_str());
  if (s == NATS_OK) return msg;
  natsMsg_Destroy(msg);
  *error = status_text(s);
  return nullptr;
}

const char* ack_error(const jsPubAckErr* pae) {
  return pae != nullptr && pae->ErrText != nullptr ? pae->ErrText : "publish failed";
}

}  // namespace

void JetStream::publish_async(const std::string& subject, const void* data, size_t size,
                              const std::string& msg_id, AckFn done) {
  std::string error;
  natsMsg* msg = new_msg(subject, data, size, msg_id, &error);
  if (msg == nullptr) {
    done(false, false, error);
    return;
  }
  impl_->send(msg, [done = std::move(done)](const jsPubAck* pa, const jsPubAckErr* pae) {
    if (pa != nullptr)
      done(true, pa->Duplicate, {});
    else
      done(false, false, ack_error(pae));
  });
}

void JetStream::publish_unique(const std::string& subject, const void* data, size_t size,
                               const std::string& msg_id, UniqueFn done) {
  Unique u;
  natsMsg* msg = new_msg(subject, data, size, msg_id, &u.error);
  if (msg == nullptr) {
    done(std::move(u));
    return;
  }
  // What was sent, to tell our own earlier send from another publisher's.
  std::vector<uint8_t> sent(static_cast<const uint8_t*>(data),
                            static_cast<const uint8_t*>(data) + size);
  impl_->send(msg, [impl = impl_.get(), msg_id, sent = std::move(sent), done = std::move(done)](
                       const jsPubAck* pa, const jsPubAckErr* pae) mutable {
    Unique u;
    if (pa == nullptr) {
      u.error = ack_error(pae);
    } else if (!pa->Duplicate) {
      u.ok = true;
      u.seq = pa->Sequence;
    } else {  // pa->Sequence: the original's (nats-server answers with the one it kept)
      // An original with the very bytes sent is this publish's own first
      // copy, stored though its ack was lost and the message sent again
      // (Impl::on_ack): stored, not a duplicate.
      auto own = [sent = std::move(sent), done = std::move(done)](Unique r) {
        if (r.ok && r.duplicate && r.original == sent) {
          r.duplicate = false;
          r.original.clear();
        }
        done(std::move(r));
      };
      impl->read_original(Impl::Read{pa->Stream != nullptr ? pa->Stream : "", msg_id, pa->Sequence,
                                     std::move(own)});
      return;
    }
    done(std::move(u));
  });
}

void JetStream::publish_async_seq(const std::string& subject, const std::string& data,
                                  const std::vector<std::pair<std::string, std::string>>& headers,
                                  SeqAckFn done) {
  natsMsg* msg = nullptr;
  natsStatus s =
      natsMsg_Create(&msg, subject.c_str(), nullptr, data.data(), static_cast<int>(data.size()));
  for (const auto& [k, v] : headers)
    if (s == NATS_OK) s = natsMsgHeader_Set(msg, k.c_str(), v.c_str());
  if (s != NATS_OK) {
    natsMsg_Destroy(msg);
    done(0, 0, status_text(s));
    return;
  }
  impl_->send(msg, [done = std::move(done)](const jsPubAck* pa, const jsPubAckErr* pae) {
    if (pa != nullptr)
      done(pa->Sequence, 0, {});
    else
      done(0, pae != nullptr ? static_cast<int>(pae->ErrCode) : 0, ack_error(pae));
  });
}

std::string JetStream::publish(const std::string& subject, const void* data, size_t size,
                               const std::string& msg_id) {
  jsPubOptions po;
  jsPubOptions_Init(&po);
  if (!msg_id.empty()) po.MsgId = msg_id.c_str();
  jsPubAck* pa = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s =
      js_Publish(&pa, impl_->js, subject.c_str(), data, static_cast<int>(size), &po, &jerr);
  if (pa != nullptr) jsPubAck_Destroy(pa);
  return s == NATS_OK ? std::string() : status_text(s);
}

namespace {

// Owning handles for what read_all takes from nats.c.
struct MsgFree {
  void operator()(natsMsg* m) const { natsMsg_Destroy(m); }
};
struct SubFree {
  void operator()(natsSubscription* s) const { natsSubscription_Destroy(s); }
};
using MsgHandle = std::unique_ptr<natsMsg, MsgFree>;
using SubHandle = std::unique_ptr<natsSubscription, SubFree>;

}  // namespace

std::optional<std::vector<uint8_t>> Connection::request_via(const std::string& subject,
                                                            const std::string& data,
                                                            const std::string& reply_prefix,
                                                            int timeout_ms, std::string* error) {
  const std::string inbox = new_inbox();
  const std::string reply = reply_prefix + inbox.substr(inbox.rfind('.'));
  natsSubscription* raw = nullptr;
  natsStatus s = natsConnection_SubscribeSync(&raw, nc_, reply.c_str());
  SubHandle sub(raw);
  if (s == NATS_OK) s = natsSubscription_AutoUnsubscribe(raw, 1);
  if (s == NATS_OK)
    s = natsConnection_PublishRequest(nc_, subject.c_str(), reply.c_str(), data.data(),
                                      static_cast<int>(data.size()));
  natsMsg* msg = nullptr;
  if (s == NATS_OK) s = natsSubscription_NextMsg(&msg, raw, timeout_ms);
  MsgHandle got(msg);
  if (s == NATS_OK && natsMsg_IsNoResponders(msg)) s = NATS_NO_RESPONDERS;
  if (s != NATS_OK) {
    if (error != nullptr) *error = request_error(subject, s, last_async_error());
    return std::nullopt;
  }
  const auto* d = reinterpret_cast<const uint8_t*>(natsMsg_GetData(msg));
  return std::vector<uint8_t>(d, d + natsMsg_GetDataLength(msg));
}

namespace {

// The stream sequence of a message a consumer delivered, from its reply
// subject ($JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer
// seq>.<time>.<pending>, or the longer form with a domain and an account
// hash before the stream): read here, as nats.c's metadata call allocates a
// copy of every token. 0 when the subject has neither form.
uint64_t stream_seq_of(natsMsg* msg) {
  const char* reply = natsMsg_GetReply(msg);
  if (reply == nullptr) return 0;
  std::string_view r(reply);
  constexpr std::string_view kAck = "$JS.ACK.";
  if (r.substr(0, kAck.size()) != kAck) return 0;
  r.remove_prefix(kAck.size());
  std::string_view tokens[12];
  size_t n = 0;
  while (n < 12) {
    auto dot = r.find('.');
    tokens[n++] = r.substr(0, dot);
    if (dot == std::string_view::npos) break;
    r.remove_prefix(dot + 1);
  }
  std::string_view seq;
  if (n == 7)
    seq = tokens[3];
  else if (n >= 9)
    seq = tokens[5];
  uint64_t v = 0;
  if (seq.empty() ||
      std::from_chars(seq.data(), seq.data() + seq.size(), v).ptr != seq.data() + seq.size())
    return 0;
  return v;
}

// A stored message's sequence: from its reply subject, or (another form)
// from nats.c's metadata.
uint64_t stored_seq(natsMsg* msg) {
  if (auto seq = stream_seq_of(msg); seq != 0) return seq;
  uint64_t seq = 0;
  jsMsgMetaData* meta = nullptr;
  if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
    seq = meta->Sequence.Stream;
    jsMsgMetaData_Destroy(meta);
  }
  return seq;
}

// A KV delete or purge marker: no data, and a KV-Operation header.
bool kv_marker(natsMsg* msg) {
  if (natsMsg_GetDataLength(msg) != 0) return false;
  const char* op = nullptr;
  return natsMsgHeader_Get(msg, "KV-Operation", &op) == NATS_OK && op != nullptr;
}

// The first sequence in [lo, hi) of `stream` stored at or after `since_ns`
// (server time), by binary search over stored times; `hi` when none. False
// when the stream did not answer.
bool first_since(jsCtx* js, const std::string& stream, uint64_t lo, uint64_t hi, int64_t since_ns,
                 uint64_t* out) {
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    // The stored time at `mid`, or at the next stored sequence before `hi`.
    uint64_t at = mid;
    int64_t t = -1;
    for (; at < hi; ++at) {
      natsMsg* m = nullptr;
      jsErrCode jerr = static_cast<jsErrCode>(0);
      if (js_GetMsg(&m, js, stream.c_str(), at, nullptr, &jerr) == NATS_OK) {
        t = natsMsg_GetTime(m);
        natsMsg_Destroy(m);
        break;
      }
      if (jerr != JSNoMessageFoundErr) return false;  // no answer
    }
    if (t < 0 || t >= since_ns)
      hi = mid;  // nothing stored in [mid, hi) before `since`
    else
      lo = at + 1;
  }
  *out = lo;
  return true;
}

}  // namespace

std::vector<Inbound> JetStream::read_all(const std::string& stream, const std::string& filter,
                                         int timeout_ms, int64_t since_ms, bool* complete) {
  std::vector<Inbound> out;
  bool whole = read_each(stream, filter, timeout_ms, since_ms,
                         [&](std::string_view subject, std::string_view data, uint64_t seq) {
                           Inbound in;
                           in.subject.assign(subject);
                           in.data.assign(data.begin(), data.end());
                           in.stream_seq = seq;
                           out.push_back(std::move(in));
                         });
  if (complete != nullptr) *complete = whole;
  return out;
}

bool JetStream::read_each(const std::string& stream, const std::string& filter, int timeout_ms,
                          int64_t since_ms, const StoredFn& fn) {
  bool whole = true;  // reached the newest message stored when the read began
  auto done = [&] { return whole; };
  // Where to stop: the newest message under `filter` now. (Not a consumer's
  // NumPending: nats-server 2.9 reported 0 there a few messages before the
  // end of a read from a start time, which silently dropped the newest ones.)
  natsMsg* raw_newest = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  if (js_GetLastMsg(&raw_newest, impl_->js, stream.c_str(), filter.c_str(), nullptr, &jerr) !=
      NATS_OK) {
    whole = jerr == JSNoMessageFoundErr;  // nothing stored under the filter, or no answer
    return done();
  }
  MsgHandle newest(raw_newest);
  uint64_t last = natsMsg_GetSequence(newest.get());
  if (since_ms > 0 && natsMsg_GetTime(newest.get()) < since_ms * 1000 * 1000) return done();
  // The stream's bounds and subjects (one request).
  jsStreamInfo* si = nullptr;
  if (js_GetStreamInfo(&si, impl_->js, stream.c_str(), nullptr, &jerr) != NATS_OK) {
    whole = false;
    return done();
  }
  uint64_t first = si->State.FirstSeq;
  bool filtered = !(si->Config->SubjectsLen == 1 && filter == si->Config->Subjects[0]);
  jsStreamInfo_Destroy(si);
  // From a time: from the first sequence stored since, found here (a
  // consumer that starts by time was seen in the same spin as below).
  uint64_t from = first;
  if (since_ms > 0 &&
      !first_since(impl_->js, stream, first, last + 1, since_ms * 1000 * 1000, &from)) {
    whole = false;
    return done();
  }

  // The consumer, made through the JetStream API: without a filter when
  // `filter` is the whole stream. (nats-server 2.9.10 was seen spinning at
  // full CPU, delivering nothing, in a filtered consumer's pending count
  // (filteredPendingLocked), and nats.c always sets a filter.) It acknowledges
  // nothing, and the server drops it a minute after a reader that died.
  std::string config =
      R"({"ack_policy":"none","inactive_threshold":60000000000,"deliver_policy":"by_start_sequence","opt_start_seq":)" +
      std::to_string(from);
  if (filtered) config += R"(,"filter_subject":")" + filter + "\"";
  config += "}";
  auto created = impl_->conn->request(
      "$JS.API.CONSUMER.CREATE." + stream,
      R"({"stream_name":")" + stream + R"(","config":)" + config + "}", timeout_ms);
  std::string answer = created ? std::string(created->begin(), created->end()) : std::string();
  auto at = answer.find(R"("name":")");
  if (at == std::string::npos) {
    whole = false;
    return done();
  }
  at += 8;
  std::string name = answer.substr(at, answer.find('"', at) - at);

  // Pulled in batches on an inbox of our own.
  natsConnection* nc = impl_->conn->raw();
  std::string inbox = impl_->conn->new_inbox();
  natsSubscription* raw_sub = nullptr;
  if (natsConnection_SubscribeSync(&raw_sub, nc, inbox.c_str()) != NATS_OK) whole = false;
  SubHandle sub(raw_sub);
  std::string next = "$JS.API.CONSUMER.MSG.NEXT." + stream + "." + name;
  constexpr int kBatch = 8192;
  std::string ask = R"({"batch":)" + std::to_string(kBatch) + R"(,"expires":)" +
                    std::to_string(int64_t{timeout_ms} * 1000 * 1000) + "}";
  constexpr size_t kFreeGroup = 512;
  std::vector<MsgHandle> done_with;
  done_with.reserve(kFreeGroup);
  for (uint64_t seq = 0; whole && seq < last;) {
    if (natsConnection_PublishRequest(nc, next.c_str(), inbox.c_str(), ask.data(),
                                      static_cast<int>(ask.size())) != NATS_OK) {
      whole = false;
      break;
    }
    int got = 0;
    for (bool ended = false; !ended && got < kBatch && seq < last;) {
      natsMsg* raw = nullptr;
      if (natsSubscription_NextMsg(&raw, sub.get(), timeout_ms + 1000) != NATS_OK) break;
      MsgHandle msg(raw);
      const char* status = nullptr;
      if (natsMsg_GetDataLength(msg.get()) == 0 &&
          natsMsgHeader_Get(msg.get(), "Status", &status) == NATS_OK && status != nullptr) {
        ended = true;  // the pull ended: 404 nothing left, 408 expired
        continue;
      }
      ++got;
      const uint64_t at_seq = stored_seq(msg.get());
      seq = std::max(seq, at_seq);
      const auto* d = natsMsg_GetData(msg.get());
      fn(natsMsg_GetSubject(msg.get()),
         kv_marker(msg.get())
             ? std::string_view()
             : std::string_view(d, static_cast<size_t>(natsMsg_GetDataLength(msg.get()))),
         at_seq);
      // Freed in groups: nats.c hands each freed message to its collector
      // thread and wakes it when its list was empty, a futex wake per message
      // when freed one by one (a tenth of a restore's CPU).
      done_with.push_back(std::move(msg));
      if (done_with.size() == kFreeGroup) done_with.clear();
    }
    if (got == 0) whole = false;  // nothing for a whole pull: stopped short of `last`
  }
  impl_->conn->request("$JS.API.CONSUMER.DELETE." + stream + "." + name, std::string(), timeout_ms);
  return done();
}

// --- KV ------------------------------------------------------------------------

std::unique_ptr<KeyValue> KeyValue::open(JetStream& js, const std::string& bucket,
                                         std::string* error, int replicas) {
  std::unique_ptr<KeyValue> kv(new KeyValue());
  kv->js_ = &js;
  kv->bucket_ = bucket;
  natsStatus s = js_KeyValue(&kv->kv_, js.raw(), bucket.c_str());
  if (s != NATS_OK) {
    kvConfig cfg;
    kvConfig_Init(&cfg);
    cfg.Bucket = bucket.c_str();
    cfg.History = 1;
    cfg.StorageType = js_FileStorage;
    cfg.Replicas = std::max(1, replicas);
    s = js_CreateKeyValue(&kv->kv_, js.raw(), &cfg);
  } else if (replicas > 0 && !js.set_replicas("KV_" + bucket, replicas, error)) {
    return nullptr;
  }
  if (s != NATS_OK) {
    if (error != nullptr) {
      *error = "KV bucket " + bucket + ": " + status_text(s);
      if (replicas > 1)
        *error += " (" + std::to_string(replicas) +
                  " replicas need a NATS cluster of that many JetStream servers)";
    }
    return nullptr;
  }
  return kv;
}

KeyValue::~KeyValue() {
  if (kv_ != nullptr) kvStore_Destroy(kv_);
}

uint64_t KeyValue::stored_count() {
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  if (js_GetStreamInfo(&si, js_->raw(), ("KV_" + bucket_).c_str(), nullptr, &jerr) != NATS_OK)
    return 0;
  uint64_t n = si->State.Msgs;
  jsStreamInfo_Destroy(si);
  return n;
}

uint64_t KeyValue::last_revision(const std::string& key, bool* failed) {
  natsMsg* m = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_GetLastMsg(&m, js_->raw(), ("KV_" + bucket_).c_str(),
                               ("$KV." + bucket_ + "." + key).c_str(), nullptr, &jerr);
  const bool none = s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr;
  if (failed != nullptr) *failed = s != NATS_OK && !none;
  uint64_t rev = s == NATS_OK ? natsMsg_GetSequence(m) : 0;
  natsMsg_Destroy(m);
  return rev;
}

std::optional<KvEntry> KeyValue::get(const std::string& key, bool* failed) {
  kvEntry* e = nullptr;
  natsStatus s = kvStore_Get(&e, kv_, key.c_str());
  if (failed != nullptr) *failed = s != NATS_OK && s != NATS_NOT_FOUND;
  if (s != NATS_OK || e == nullptr) return std::nullopt;
  KvEntry out;
  out.key = key;
  const auto* v = static_cast<const char*>(kvEntry_Value(e));
  out.value.assign(v != nullptr ? v : "", static_cast<size_t>(kvEntry_ValueLen(e)));
  out.revision = kvEntry_Revision(e);
  kvEntry_Destroy(e);
  return out;
}

namespace {
constexpr int kWrongLastSequence = 10071;  // JSStreamWrongLastSequenceErr
}

uint64_t KeyValue::update(const std::string& key, const std::string& value, uint64_t expected,
                          bool* conflict, std::string* error) {
  auto r = write_all({Write{key, value, expected}}, 5000);
  if (conflict != nullptr) *conflict = r.front().conflict;
  if (error != nullptr) *error = r.front().error;
  return r.front().revision;
}

std::vector<KeyValue::Result> KeyValue::write_all(const std::vector<Write>& writes,
                                                  int timeout_ms) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Result> results;
    size_t answered = 0;
  };
  auto sh = std::make_shared<Shared>();
  sh->results.resize(writes.size());
  for (size_t i = 0; i < writes.size(); ++i) {
    const auto& w = writes[i];
    std::vector<std::pair<std::string, std::string>> headers = {
        {"Nats-Expected-Last-Subject-Sequence", std::to_string(w.expected)}};
    if (w.value.empty()) {  // the KV protocol's purge: the marker replaces every value
      headers.emplace_back("KV-Operation", "PURGE");
      headers.emplace_back("Nats-Rollup", "sub");
    }
    js_->publish_async_seq("$KV." + bucket_ + "." + w.key, w.value, headers,
                           [sh, i](uint64_t seq, int code, const std::string& err) {
                             std::lock_guard<std::mutex> lock(sh->mu);
                             auto& r = sh->results[i];
                             r.revision = seq;
                             r.conflict = code == kWrongLastSequence;
                             r.error = err;
                             if (seq == 0 && r.error.empty()) r.error = "not stored";
                             ++sh->answered;
                             sh->cv.notify_all();
                           });
  }
  std::unique_lock<std::mutex> lock(sh->mu);
  sh->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                  [&] { return sh->answered >= writes.size(); });
  auto out = sh->results;
  for (auto& r : out)
    if (r.revision == 0 && r.error.empty())
      r.error = "no answer within " + std::to_string(timeout_ms) + " ms";
  return out;
}

std::vector<KvEntry> KeyValue::read_all(int timeout_ms, bool* complete) {
  std::vector<KvEntry> out;
  bool whole =
      read_each(timeout_ms, [&](std::string_view key, std::string_view value, uint64_t revision) {
        KvEntry e;
        e.key.assign(key);
        e.value.assign(value);
        e.revision = revision;
        out.push_back(std::move(e));
      });
  if (complete != nullptr) *complete = whole;
  return out;
}

bool KeyValue::read_each(int timeout_ms, const EntryFn& fn) {
  const std::string prefix = "$KV." + bucket_ + ".";
  // Every message of the bucket's stream: it keeps one per key (History 1),
  // so no last-per-subject consumer (and its filter) is needed.
  return js_->read_each("KV_" + bucket_, prefix + ">", timeout_ms, 0,
                        [&](std::string_view subject, std::string_view data, uint64_t seq) {
                          if (subject.size() > prefix.size())
                            fn(subject.substr(prefix.size()), data, seq);
                        });
}

// --- pull consumer ----------------------------------------------------------------

struct Consumer::Impl {
  natsSubscription* sub = nullptr;
  Handler handler;
  std::mutex mu;
  std::unordered_map<uint64_t, natsMsg*> unacked;
  std::atomic<bool> stop{false};
  std::thread thread;

  void run() {
    while (!stop.load()) {
      natsMsgList list{};
      jsErrCode jerr = static_cast<jsErrCode>(0);
      natsStatus s = natsSubscription_Fetch(&list, sub, 256, 500, &jerr);
      if (s != NATS_OK) {
        if (s != NATS_TIMEOUT) std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      for (int i = 0; i < list.Count; ++i) {
        natsMsg* msg = list.Msgs[i];
        list.Msgs[i] = nullptr;
        Inbound in;
        in.subject = natsMsg_GetSubject(msg);
        const auto* d = reinterpret_cast<const uint8_t*>(natsMsg_GetData(msg));
        in.data.assign(d, d + natsMsg_GetDataLength(msg));
        const char* id = nullptr;
        if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK && id != nullptr) in.msg_id = id;
        jsMsgMetaData* meta = nullptr;
        if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
          in.stream_seq = meta->Sequence.Stream;
          jsMsgMetaData_Destroy(meta);
        }
        if (in.stream_seq == 0) {
          natsMsg_Destroy(msg);
          continue;
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          auto [it, fresh] = unacked.emplace(in.stream_seq, msg);
          if (!fresh) {  // redelivered while the first copy is still in hand
            natsMsg_Destroy(it->second);
            it->second = msg;
          }
        }
        handler(std::move(in));
      }
      natsMsgList_Destroy(&list);
    }
  }
};

std::unique_ptr<Consumer> Consumer::open(JetStream& js, const std::string& stream,
                                         const std::string& durable, const std::string& filter,
                                         Handler handler, std::string* error, int ack_wait_ms) {
  std::unique_ptr<Consumer> c(new Consumer());
  c->impl_ = std::make_unique<Impl>();
  c->impl_->handler = std::move(handler);
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream.c_str();
  so.Config.AckPolicy = js_AckExplicit;
  so.Config.AckWait = static_cast<int64_t>(ack_wait_ms) * 1000 * 1000;
  so.Config.MaxAckPending = 65536;
  so.Config.DeliverPolicy = js_DeliverAll;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_PullSubscribe(&c->impl_->sub, js.raw(), filter.c_str(), durable.c_str(),
                                  nullptr, &so, &jerr);
  if (s != NATS_OK) {
    if (error != nullptr) *error = "consumer " + durable + " on " + stream + ": " + status_text(s);
    return nullptr;
  }
  c->impl_->thread = std::thread([impl = c->impl_.get()] { impl->run(); });
  return c;
}

void Consumer::stop_soon() {
  if (impl_) impl_->stop = true;
}

Consumer::~Consumer() {
  if (!impl_) return;
  impl_->stop = true;
  if (impl_->thread.joinable()) impl_->thread.join();
  for (auto& [seq, msg] : impl_->unacked) natsMsg_Destroy(msg);
  if (impl_->sub != nullptr) natsSubscription_Destroy(impl_->sub);
}

natsMsg* Consumer::take(uint64_t stream_seq) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->unacked.find(stream_seq);
  if (it == impl_->unacked.end()) return nullptr;
  natsMsg* msg = it->second;
  impl_->unacked.erase(it);
  return msg;
}

void Consumer::ack(uint64_t stream_seq) {
  if (natsMsg* msg = take(stream_seq)) {
    natsMsg_Ack(msg, nullptr);
    natsMsg_Destroy(msg);
  }
}

void Consumer::nak(uint64_t stream_seq, int64_t delay_ms) {
  if (natsMsg* msg = take(stream_seq)) {
    natsMsg_NakWithDelay(msg, delay_ms, nullptr);
    natsMsg_Destroy(msg);
  }
}

}  // namespace troupe::bus
