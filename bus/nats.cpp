#include "bus/nats.hpp"

#include <cstring>
#include <mutex>
#include <unordered_map>

#include <nats/nats.h>

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
  natsMsg_Destroy(msg);
  (*handler)(std::move(in));
}

void on_reconnected(natsConnection*, void* closure) {
  auto* opts = static_cast<ConnectOptions*>(closure);
  if (opts->on_reconnected) opts->on_reconnected();
}

}  // namespace

Library::Library() { nats_Open(-1); }
Library::~Library() { nats_Close(); }

Subscription::~Subscription() {
  if (sub_ != nullptr) {
    natsSubscription_Unsubscribe(sub_);
    natsSubscription_Destroy(sub_);
  }
}

int64_t Subscription::dropped() const {
  int64_t n = 0;
  if (sub_ != nullptr) natsSubscription_GetDropped(sub_, &n);
  return n;
}

std::unique_ptr<Connection> Connection::open(const ConnectOptions& o, std::string* error) {
  std::unique_ptr<Connection> c(new Connection());
  c->opts_ = std::make_unique<ConnectOptions>(o);
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) s = natsOptions_SetURL(opts, o.url.c_str());
  if (s == NATS_OK) s = natsOptions_SetName(opts, o.name.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, o.timeout_ms);
  if (s == NATS_OK) s = natsOptions_SetSendAsap(opts, o.send_asap);
  if (s == NATS_OK) s = natsOptions_SetAllowReconnect(opts, true);
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, o.max_reconnect);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, o.reconnect_wait_ms);
  if (s == NATS_OK) s = natsOptions_SetReconnectBufSize(opts, 64 * 1024 * 1024);
  if (s == NATS_OK) s = natsOptions_SetMaxPendingMsgs(opts, 1 << 20);
  if (s == NATS_OK)
    s = natsOptions_SetReconnectedCB(opts, on_reconnected, c->opts_.get());
  if (s == NATS_OK) s = natsConnection_Connect(&c->nc_, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) {
    if (error != nullptr) *error = "cannot connect to " + o.url + ": " + status_text(s);
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

std::optional<std::vector<uint8_t>> Connection::request(const std::string& subject,
                                                        const void* data, size_t size,
                                                        int timeout_ms, std::string* error) {
  natsMsg* reply = nullptr;
  natsStatus s = natsConnection_Request(&reply, nc_, subject.c_str(), data,
                                        static_cast<int>(size), timeout_ms);
  if (s != NATS_OK) {
    if (error != nullptr) {
      if (s == NATS_NO_RESPONDERS)
        *error = "no responders on " + subject + " (is troupe-scheduler running?)";
      else if (s == NATS_TIMEOUT)
        *error = "request on " + subject + " timed out";
      else
        *error = status_text(s);
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
    s = natsConnection_Subscribe(&sub->sub_, nc_, subject.c_str(), on_message,
                                 sub->handler_.get());
  else
    s = natsConnection_QueueSubscribe(&sub->sub_, nc_, subject.c_str(), queue.c_str(),
                                      on_message, sub->handler_.get());
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
  return out;
}

bool Connection::connected() const {
  return natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED;
}

// --- JetStream ---------------------------------------------------------------

struct JetStream::Impl {
  Connection* conn = nullptr;
  jsCtx* js = nullptr;
  std::mutex mu;
  std::unordered_map<natsMsg*, AckFn> pending;  // keyed by the published message

  static void on_ack(jsCtx*, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
    auto* self = static_cast<Impl*>(closure);
    AckFn fn;
    {
      std::lock_guard<std::mutex> lock(self->mu);
      auto it = self->pending.find(msg);
      if (it != self->pending.end()) {
        fn = std::move(it->second);
        self->pending.erase(it);
      }
    }
    if (fn) {
      if (pa != nullptr)
        fn(true, pa->Duplicate, {});
      else
        fn(false, false,
           pae != nullptr && pae->ErrText != nullptr ? pae->ErrText : "publish failed");
    }
    natsMsg_Destroy(msg);
  }
};

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
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 2000;
    js_PublishAsyncComplete(impl_->js, &po);
    jsCtx_Destroy(impl_->js);
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
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_AddStream(nullptr, impl_->js, &sc, nullptr, &jerr);
  if (s != NATS_OK && jerr == JSStreamNameExistErr)
    s = js_UpdateStream(nullptr, impl_->js, &sc, nullptr, &jerr);
  if (s != NATS_OK) {
    if (error != nullptr) *error = "stream " + cfg.name + ": " + status_text(s);
    return false;
  }
  return true;
}

void JetStream::publish_async(const std::string& subject, const void* data, size_t size,
                              const std::string& msg_id, AckFn done) {
  natsMsg* msg = nullptr;
  natsStatus s = natsMsg_Create(&msg, subject.c_str(), nullptr, static_cast<const char*>(data),
                                static_cast<int>(size));
  if (s == NATS_OK && !msg_id.empty()) s = natsMsgHeader_Set(msg, "Nats-Msg-Id", msg_id.c_str());
  if (s != NATS_OK) {
    natsMsg_Destroy(msg);
    done(false, false, status_text(s));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->pending.emplace(msg, std::move(done));
  }
  natsMsg* owned = msg;
  s = js_PublishMsgAsync(impl_->js, &owned, nullptr);
  if (s != NATS_OK) {
    AckFn fn;
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      auto it = impl_->pending.find(msg);
      if (it != impl_->pending.end()) {
        fn = std::move(it->second);
        impl_->pending.erase(it);
      }
    }
    if (owned != nullptr) natsMsg_Destroy(owned);
    if (fn) fn(false, false, status_text(s));
  }
}

std::string JetStream::publish(const std::string& subject, const void* data, size_t size,
                               const std::string& msg_id) {
  jsPubOptions po;
  jsPubOptions_Init(&po);
  if (!msg_id.empty()) po.MsgId = msg_id.c_str();
  jsPubAck* pa = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_Publish(&pa, impl_->js, subject.c_str(), data, static_cast<int>(size), &po,
                            &jerr);
  if (pa != nullptr) jsPubAck_Destroy(pa);
  return s == NATS_OK ? std::string() : status_text(s);
}

std::vector<Inbound> JetStream::read_all(const std::string& stream, const std::string& filter,
                                         int timeout_ms) {
  std::vector<Inbound> out;
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  if (js_GetStreamInfo(&si, impl_->js, stream.c_str(), nullptr, &jerr) != NATS_OK) return out;
  uint64_t last = si->State.LastSeq;
  uint64_t total = si->State.Msgs;
  jsStreamInfo_Destroy(si);
  if (total == 0) return out;

  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream.c_str();
  so.Config.DeliverPolicy = js_DeliverAll;
  so.Config.AckPolicy = js_AckNone;
  so.Ordered = true;
  natsSubscription* sub = nullptr;
  if (js_SubscribeSync(&sub, impl_->js, filter.c_str(), nullptr, &so, &jerr) != NATS_OK)
    return out;
  for (;;) {
    natsMsg* msg = nullptr;
    if (natsSubscription_NextMsg(&msg, sub, timeout_ms) != NATS_OK) break;
    Inbound in;
    in.subject = natsMsg_GetSubject(msg);
    const auto* d = reinterpret_cast<const uint8_t*>(natsMsg_GetData(msg));
    in.data.assign(d, d + natsMsg_GetDataLength(msg));
    jsMsgMetaData* meta = nullptr;
    uint64_t seq = 0;
    if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
      seq = meta->Sequence.Stream;
      jsMsgMetaData_Destroy(meta);
    }
    natsMsg_Destroy(msg);
    out.push_back(std::move(in));
    if (seq >= last) break;
  }
  natsSubscription_Destroy(sub);
  return out;
}

}  // namespace troupe::bus
