// The NATS connection, subscriptions and JetStream, as RAII objects. This
// folder is the only code that includes NATS headers; everything else sees
// these classes. Callbacks run on NATS threads: hand data to actors with
// caf::anon_send (actors/bridge.hpp), never touch actor state there.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/inbound.hpp"

// Opaque NATS C types (defined in <nats/nats.h>, included by nats.cpp only).
struct __natsConnection;
struct __natsSubscription;
struct __jsCtx;
struct __kvStore;
struct __natsMsg;

namespace troupe::bus {

using Handler = std::function<void(Inbound&&)>;

// Initialises the NATS library for the process and closes it on destruction.
// Create one in main() before any Connection; destroy it after the last one
// (its destructor waits for the library's threads to end).
class Library {
 public:
  Library();
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
};

class Subscription {
 public:
  ~Subscription();
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  // Messages dropped by the client because this subscriber fell behind.
  int64_t dropped() const;

 private:
  friend class Connection;
  Subscription() = default;
  __natsSubscription* sub_ = nullptr;
  std::unique_ptr<Handler> handler_;
};
using SubscriptionPtr = std::unique_ptr<Subscription>;

struct ConnectOptions {
  // One URL or several, comma-separated (nats:// or tls://). A URL may hold
  // user:password@; it is never printed (redact_url).
  std::string url = "nats://127.0.0.1:4222";
  // The identity (docs/security.md): a NATS .creds file (user JWT + nkey
  // seed), "" for none. Its inbox prefix is derived from the JWT's name
  // (subjects::inbox_prefix) unless `inbox_prefix` is set.
  std::string creds_file;
  std::string inbox_prefix;
  // A CA bundle (PEM): the server must present a certificate it signed
  // (TLS is then required). "" for plain TCP (unless the URL is tls://).
  std::string tls_ca;
  std::string name = "troupe";
  int timeout_ms = 2000;
  int reconnect_wait_ms = 250;
  int max_reconnect = -1;  // forever
  // Write each message at once (lowest latency) rather than let the client's
  // flusher batch them (higher throughput for a busy publisher).
  bool send_asap = true;
  // Deliver every subscription's messages from the library's shared delivery
  // thread instead of a thread per subscription (libnats' default). For a
  // connection with many subscriptions: a simulated fleet subscribes once per
  // member when its identity allows no wildcard (1,000 threads otherwise).
  bool shared_delivery = false;
  // Called (on a NATS thread) when the connection is re-established.
  std::function<void()> on_reconnected;
  // Called (on a NATS thread) with an asynchronous error the server reported,
  // such as a permissions violation ("Permissions Violation for Publish to
  // ..."), which libnats reports nowhere else. Default: a line on stderr.
  std::function<void(const std::string&)> on_error;
};

// Why a request on `subject` got no answer, as a user reads it: no
// responders, or a timeout. A request the server refused to carry (no
// permission to publish the subject or to receive on the reply subject)
// looks like a timeout: `last_async` (the connection's last asynchronous
// error) says why.
std::string request_failure(const std::string& subject, bool no_responders,
                            const std::string& last_async);

// `url` with any user:password@ replaced by "***@" (for logs and errors).
std::string redact_url(const std::string& url);
// The NATS user name in a .creds file's JWT ("" and `error` when unreadable).
std::string creds_identity(const std::string& creds_file, std::string* error = nullptr);

class Connection {
 public:
  // Connects; returns nullptr and sets `error` when it cannot.
  static std::unique_ptr<Connection> open(const ConnectOptions& opts, std::string* error);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Thread-safe. Returns false when the client refused (closed connection).
  bool publish(const std::string& subject, const void* data, size_t size,
               const std::string& reply = {});
  bool publish(const std::string& subject, const std::vector<uint8_t>& data,
               const std::string& reply = {}) {
    return publish(subject, data.data(), data.size(), reply);
  }
  bool publish(const std::string& subject, const std::string& data, const std::string& reply = {}) {
    return publish(subject, data.data(), data.size(), reply);
  }

  // Blocking request/reply. nullopt on timeout or no responders (`error` says which).
  std::optional<std::vector<uint8_t>> request(const std::string& subject, const void* data,
                                              size_t size, int timeout_ms,
                                              std::string* error = nullptr);
  std::optional<std::vector<uint8_t>> request(const std::string& subject, const std::string& data,
                                              int timeout_ms, std::string* error = nullptr) {
    return request(subject, data.data(), data.size(), timeout_ms, error);
  }

  // request() with the reply sent to `reply_prefix`.<unique> instead of this
  // connection's inbox: for a responder that may publish there and nowhere
  // else (a front door's claim answers, subjects::dispatch_answer).
  std::optional<std::vector<uint8_t>> request_via(const std::string& subject,
                                                  const std::string& data,
                                                  const std::string& reply_prefix, int timeout_ms,
                                                  std::string* error = nullptr);

  // Delivers every message on `subject` (wildcards allowed) to `handler` on a
  // NATS thread. A non-empty `queue` joins a queue group.
  SubscriptionPtr subscribe(const std::string& subject, Handler handler,
                            const std::string& queue = {});

  bool flush(int timeout_ms = 2000);
  // A fresh reply subject under this connection's inbox prefix.
  std::string new_inbox();
  // True when the connection knows more than one server (a NATS cluster:
  // those given and those the servers told it of).
  bool in_cluster() const;
  bool connected() const;
  // The last asynchronous error the server reported (a permissions
  // violation, say), "" when none.
  std::string last_async_error() const;
  // Waits up to `timeout_ms` for an asynchronous error containing `needle`
  // reported since the last call that found one; true when it came.
  bool wait_async_error(const std::string& needle, int timeout_ms);

  __natsConnection* raw() { return nc_; }

 private:
  Connection() = default;
  __natsConnection* nc_ = nullptr;
  std::unique_ptr<ConnectOptions> opts_;
  struct Errors;
  std::unique_ptr<Errors> errors_;
};
using ConnectionPtr = std::unique_ptr<Connection>;

struct StreamConfig {
  std::string name;
  std::vector<std::string> subjects;
  int64_t duplicate_window_ms = 2 * 60 * 1000;
  int64_t max_age_s = 0;  // 0: keep forever
  int64_t max_bytes = 0;  // > 0: the oldest messages go beyond this many bytes
  bool memory = false;
  // Copies kept by a NATS cluster (JetStream R1/R3/R5): 1 on one server; up
  // to the cluster's size, each on another server, so that one server lost
  // loses nothing acknowledged. An existing stream is updated to this.
  int replicas = 1;
};

// JetStream context on one connection: streams and async publish with acks.
class JetStream {
 public:
  static std::unique_ptr<JetStream> open(Connection& conn, std::string* error);
  ~JetStream();
  JetStream(const JetStream&) = delete;
  JetStream& operator=(const JetStream&) = delete;

  // Creates the stream, or updates it when it exists.
  bool ensure_stream(const StreamConfig& cfg, std::string* error);
  // As ensure_stream; where the server cannot reserve cfg.max_bytes
  // ("insufficient storage") and `shrink` (a bound not given by the user),
  // halves it, down to `min_bytes`; below that, `then_unbounded` makes the
  // stream without a bound, else it is not made. cfg.max_bytes says the
  // bound made (or last tried).
  bool ensure_stream_fitting(StreamConfig& cfg, bool shrink, int64_t min_bytes, bool then_unbounded,
                             std::string* error);
  // Gives an existing stream `replicas` copies (scaled up or down in place,
  // as nats-server 2.9 allows); true when it has them.
  bool set_replicas(const std::string& stream, int replicas, std::string* error);
  // The account's JetStream file-storage limit in bytes; 0 when it has none
  // (or the server did not say).
  int64_t storage_limit();

  // Called once per publish on a NATS thread: ok, duplicate (same msg id seen
  // within the window), error text.
  using AckFn = std::function<void(bool ok, bool duplicate, const std::string& error)>;
  // Publishes with `msg_id` as Nats-Msg-Id (de-duplication) and calls `done`
  // when the server acknowledged the message as stored (or failed).
  void publish_async(const std::string& subject, const void* data, size_t size,
                     const std::string& msg_id, AckFn done);
  // How publish_unique ended. Not ok: not stored (`error`). Ok: stored as
  // message `seq`; or, `duplicate`, dropped by the stream because message
  // `seq` came first with the same msg id within its duplicate window, and
  // `original` holds that message's data. A duplicate whose original cannot
  // be read (gone, stored under another msg id, or no answer) is not ok.
  struct Unique {
    bool ok = false;
    bool duplicate = false;
    uint64_t seq = 0;
    std::vector<uint8_t> original;
    std::string error;
  };
  using UniqueFn = std::function<void(Unique)>;
  // publish_async, whose duplicate comes with the message stored first (a
  // stored message with the very bytes sent is taken as this publish's own,
  // resent after a lost ack: reported stored, not duplicate). The
  // original is read on a thread of this context's own (the ack's thread
  // never waits); `done` runs on a NATS thread or on that one.
  void publish_unique(const std::string& subject, const void* data, size_t size,
                      const std::string& msg_id, UniqueFn done);
  // Synchronous publish (for tools and tests). Returns the error or "".
  std::string publish(const std::string& subject, const void* data, size_t size,
                      const std::string& msg_id = {});

  // Reads every message stored under `filter` in `stream`, oldest first
  // (Inbound::stream_seq set), up to the newest one stored when it began.
  // `since_ms` > 0: only messages stored since then (nats-server's clock).
  // `complete` (if given) is false when it stopped short of the newest (no
  // message for `timeout_ms`, or the stream did not answer).
  std::vector<Inbound> read_all(const std::string& stream, const std::string& filter,
                                int timeout_ms = 2000, int64_t since_ms = 0,
                                bool* complete = nullptr);
  // The same, each message handed to `fn` as it comes (subject, data, stream
  // sequence; the views last for the call) instead of copied into a list: a
  // restore reads hundreds of thousands. Returns what `complete` says.
  using StoredFn =
      std::function<void(std::string_view subject, std::string_view data, uint64_t seq)>;
  bool read_each(const std::string& stream, const std::string& filter, int timeout_ms,
                 int64_t since_ms, const StoredFn& fn);

  // Publishes with headers and reports the stored sequence (0 on error; the
  // error text and JetStream error code otherwise).
  using SeqAckFn = std::function<void(uint64_t seq, int err_code, const std::string& error)>;
  void publish_async_seq(const std::string& subject, const std::string& data,
                         const std::vector<std::pair<std::string, std::string>>& headers,
                         SeqAckFn done);

  __jsCtx* raw() { return ctx(); }

 private:
  __jsCtx* ctx();
  struct Impl;
  JetStream() = default;
  std::unique_ptr<Impl> impl_;
};
using JetStreamPtr = std::unique_ptr<JetStream>;

struct KvEntry {
  std::string key;
  std::string value;
  uint64_t revision = 0;
};

// A JetStream key-value bucket (file storage, one value per key), created
// when missing.
class KeyValue {
 public:
  // `replicas` (> 0): the bucket's copies, as StreamConfig::replicas; an
  // existing bucket with fewer or more is updated to it. 0: an existing
  // bucket as it is (one copy when it is made here).
  static std::unique_ptr<KeyValue> open(JetStream& js, const std::string& bucket,
                                        std::string* error, int replicas = 0);
  ~KeyValue();
  KeyValue(const KeyValue&) = delete;
  KeyValue& operator=(const KeyValue&) = delete;

  // The newest entry of `key`; nullopt when there is none, or when the
  // bucket could not be read (`*failed` true then).
  std::optional<KvEntry> get(const std::string& key, bool* failed = nullptr);
  // The revision of `key`'s newest message, a delete or purge marker
  // included (which get() does not show): what an update must expect to
  // write over it. 0 when the key never had one, or (`*failed` true) when
  // the bucket could not be read.
  uint64_t last_revision(const std::string& key, bool* failed = nullptr);
  // How many messages the bucket's stream holds (about one per key: values
  // and purge markers), 0 when it did not answer: a reader sizes its maps.
  uint64_t stored_count();
  // Compare-and-set: writes `value` when the key's revision is `expected`
  // (0: the key must not exist yet). Returns the new revision, or 0 with
  // `*conflict` true when another writer changed the key first.
  uint64_t update(const std::string& key, const std::string& value, uint64_t expected,
                  bool* conflict, std::string* error = nullptr);

  struct Write {
    std::string key;
    std::string value;      // empty: purge the key (a marker without value is all that stays)
    uint64_t expected = 0;  // CAS on revision; 0: the key must be new
  };
  struct Result {
    uint64_t revision = 0;  // 0: not written
    bool conflict = false;  // the revision was not `expected`: someone else wrote
    std::string error;
  };
  // Many compare-and-set writes, pipelined; waits for every answer up to
  // `timeout_ms` (unanswered ones come back with an error).
  std::vector<Result> write_all(const std::vector<Write>& writes, int timeout_ms);

  // The newest value of every key (one pass over the bucket's stream); a
  // purged key comes back with an empty value.
  std::vector<KvEntry> read_all(int timeout_ms = 2000, bool* complete = nullptr);
  // The same, each entry handed to `fn` (key, value: empty when purged,
  // revision) as it comes. Returns false when it stopped short of the newest.
  using EntryFn =
      std::function<void(std::string_view key, std::string_view value, uint64_t revision)>;
  bool read_each(int timeout_ms, const EntryFn& fn);

 private:
  KeyValue() = default;
  JetStream* js_ = nullptr;
  __kvStore* kv_ = nullptr;
  std::string bucket_;
};
using KeyValuePtr = std::unique_ptr<KeyValue>;

// A durable pull consumer delivering to `handler` on its own thread; each
// Inbound carries its stream sequence, to be passed to ack() once handled.
// Unacknowledged messages come again after `ack_wait_ms`.
class Consumer {
 public:
  static std::unique_ptr<Consumer> open(JetStream& js, const std::string& stream,
                                        const std::string& durable, const std::string& filter,
                                        Handler handler, std::string* error,
                                        int ack_wait_ms = 30000);
  // Waits for its fetching thread (at most one fetch's wait, 500 ms).
  ~Consumer();
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;
  // Tells its fetching thread to end, without waiting: several consumers
  // told first end together, not one fetch's wait after another.
  void stop_soon();
  // Thread-safe.
  void ack(uint64_t stream_seq);
  // Delivered again (to any member of the consumer) `delay_ms` from now,
  // not after the ack wait. Thread-safe.
  void nak(uint64_t stream_seq, int64_t delay_ms);

 private:
  struct Impl;
  Consumer() = default;
  __natsMsg* take(uint64_t stream_seq);  // out of the unacknowledged, null when not there
  std::unique_ptr<Impl> impl_;
};
using ConsumerPtr = std::unique_ptr<Consumer>;

}  // namespace troupe::bus
