// The demo's jobs, its checks and its summary (see demo.hpp).
#include "gateway/demo.hpp"

#include <map>
#include <nlohmann/json.hpp>

#include "gateway/format.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe::gateway {

namespace {

DemoJob make(const std::string& team, const std::string& name, const std::string& kind, int gpus,
             int workers, const std::string& gpu_type, const std::string& script,
             const std::string& key, std::string_view expect, std::optional<int> exit = 0) {
  DemoJob d;
  auto& s = d.spec;
  s.set_team(team);
  s.set_name(name);
  s.set_kind(kind);
  s.mutable_resources()->set_gpus(gpus);
  if (gpus > 0) s.mutable_resources()->set_gpu_type(gpu_type);
  s.set_workers(workers);
  s.set_max_runtime_s(120);
  s.set_max_retries(0);
  s.set_idempotency_key(key);
  s.add_command("sh");
  s.add_command("-c");
  s.add_command(script);
  (*s.mutable_env())["TROUPE_DEMO"] = "1";
  d.expect_state = std::string(expect);
  d.expect_exit = exit;
  return d;
}

}  // namespace

std::vector<DemoJob> demo_jobs(const std::string& gpu_type, const std::string& run_tag) {
  const std::string k = "demo-" + run_tag + "-";
  std::vector<DemoJob> v;
  // First the gang: it takes all 8 GPUs of the two nodes, so the GPU jobs
  // submitted after it wait in their queues until it finishes.
  v.push_back(make("vision", "gang-pretrain", "training", 4, 2, gpu_type,
                   "echo \"rank $TROUPE_RANK of $TROUPE_WORLD_SIZE on GPUs $CUDA_VISIBLE_DEVICES, "
                   "coordinator $TROUPE_COORDINATOR\"; sleep 2; echo rank $TROUPE_RANK done",
                   k + "gang", names::kSucceeded));
  v.push_back(make("vision", "finetune-resnet", "training", 2, 1, gpu_type,
                   "echo fine-tuning on GPUs $CUDA_VISIBLE_DEVICES; sleep 2; echo loss 0.42",
                   k + "finetune", names::kSucceeded));
  v.push_back(make("nlp", "batch-translate", "inference", 1, 1, gpu_type,
                   "echo translating 1000 sentences; sleep 2; echo wrote out.jsonl",
                   k + "translate", names::kSucceeded));
  v.push_back(make("nlp", "tokenize-cpu", "inference", 0, 1, gpu_type,
                   "echo no GPU needed: CUDA_VISIBLE_DEVICES=[$CUDA_VISIBLE_DEVICES]; sleep 1",
                   k + "tokenize", names::kSucceeded));
  v.push_back(make("research", "eval-bleu", "evaluation", 1, 1, gpu_type,
                   "echo evaluating checkpoint; sleep 2; echo BLEU 31.4", k + "bleu",
                   names::kSucceeded));
  v.push_back(make("research", "eval-broken", "evaluation", 1, 1, gpu_type,
                   "echo this evaluation fails on purpose >&2; sleep 1; exit 3", k + "broken",
                   names::kFailed, 3));
  // Dependencies: blocked until their upstream job ended as they need.
  auto report = make("research", "report-bleu", "evaluation", 0, 1, gpu_type,
                     "echo publishing the BLEU report", k + "report", names::kSucceeded);
  report.after = v.size() - 2;  // eval-bleu succeeded
  v.push_back(std::move(report));
  auto triage = make("research", "triage-broken", "evaluation", 0, 1, gpu_type,
                     "echo eval-broken failed: opening a ticket", k + "triage", names::kSucceeded);
  triage.after = v.size() - 2;  // eval-broken failed
  triage.after_on = "failed";
  v.push_back(std::move(triage));
  // A sweep: 2 x 2 learning rates and batch sizes, two tasks at a time.
  auto sweep = make("research", "sweep-lr-batch", "training", 1, 1, gpu_type,
                    "echo lr=$TROUPE_PARAM_LR batch=$TROUPE_PARAM_BATCH "
                    "task $TROUPE_ARRAY_INDEX of $TROUPE_ARRAY_COUNT: $(cat $TROUPE_PARAMS_FILE); "
                    "sleep 1",
                    k + "sweep", names::kSucceeded);
  auto& params = *sweep.spec.mutable_sweep()->mutable_params();
  for (double lr : {0.1, 0.01}) params["lr"].add_values()->set_number_value(lr);
  for (double batch : {32, 64}) params["batch"].add_values()->set_number_value(batch);
  sweep.spec.mutable_sweep()->set_parallelism(2);
  v.push_back(std::move(sweep));
  // A pipeline: prepare, then train on what was prepared (one request).
  auto prep = make("research", "prep-data", "inference", 0, 1, gpu_type,
                   "echo preparing the training data; sleep 1", k + "prep", names::kSucceeded);
  auto train = make("research", "train-small", "training", 1, 1, gpu_type,
                    "echo training on the prepared data on GPU $CUDA_VISIBLE_DEVICES; sleep 1",
                    k + "train", names::kSucceeded);
  for (auto* m : {&prep, &train}) {
    m->in_pipeline = true;
    m->spec.clear_idempotency_key();  // the pipeline's key applies
  }
  train.needs = {"prep-data"};
  v.push_back(std::move(prep));
  v.push_back(std::move(train));
  return v;
}

std::string demo_pipeline_request(const std::vector<DemoJob>& jobs, const std::string& run_tag) {
  nlohmann::json members = nlohmann::json::array();
  for (const auto& j : jobs) {
    if (!j.in_pipeline) continue;
    auto m = nlohmann::json::parse(spec::to_json(j.spec));
    for (const auto& n : j.needs) m["depends_on"].push_back({{"name", n}});
    members.push_back(std::move(m));
  }
  return nlohmann::json{{"name", "demo-pipeline"},
                        {"idempotency_key", "demo-" + run_tag + "-pipeline"},
                        {"jobs", members}}
      .dump();
}

std::vector<std::string> demo_problems(const std::vector<DemoJob>& jobs,
                                       const std::vector<pb::JobView>& views) {
  std::vector<std::string> out;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& want = jobs[i];
    const std::string& name = want.spec.name();
    if (i >= views.size() || views[i].job_id().empty()) {
      out.push_back(name + ": no status");
      continue;
    }
    const auto& got = views[i];
    if (got.state() != want.expect_state) {
      std::string line = name + " (" + got.job_id() + ") ended " +
                         (got.state().empty() ? std::string("in no state") : got.state()) +
                         ", expected " + want.expect_state;
      if (!got.reason().empty()) line += " (" + got.reason() + ")";
      out.push_back(line);
      continue;
    }
    if (want.expect_exit && want.expect_state == names::kFailed &&
        (!got.has_exit_code() || got.exit_code() != *want.expect_exit)) {
      out.push_back(name + " (" + got.job_id() + ") failed with " +
                    (got.has_exit_code() ? "exit code " + std::to_string(got.exit_code())
                                         : std::string("no exit code")) +
                    ", expected exit code " + std::to_string(*want.expect_exit));
    }
  }
  return out;
}

std::string demo_summary(const std::vector<pb::JobView>& views) {
  std::map<std::string, int> counts;
  for (const auto& v : views) counts[v.state().empty() ? "unknown" : v.state()]++;
  std::string out = "Jobs by state:";
  for (const auto& [state, n] : counts) out += "  " + state + " " + std::to_string(n);
  out += "\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& v : views) {
    std::string duration = "-";
    if (v.start_ms() > 0 && v.end_ms() >= v.start_ms())
      duration = format_duration(v.end_ms() - v.start_ms());
    rows.push_back({v.job_id(), v.team(), v.name(), v.kind(), v.state(), gpus_text(v),
                    v.has_exit_code() ? std::to_string(v.exit_code()) : "-", duration});
  }
  out += render_table({"ID", "TEAM", "NAME", "KIND", "STATE", "GPUS", "EXIT", "DURATION"}, rows);
  return out;
}

}  // namespace troupe::gateway
