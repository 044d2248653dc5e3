#include "gateway/usage.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "messages/json_text.hpp"
#include "messages/names.hpp"

namespace troupe::gateway {

namespace {
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(0, p.size()) == p;
}
}  // namespace

std::string closest(std::string_view word, const std::vector<std::string>& known) {
  if (word.empty()) return {};
  size_t limit = std::max<size_t>(2, word.size() / 3);
  std::string best;
  size_t best_d = limit + 1;
  for (const auto& k : known) {
    size_t d = edit_distance(word, k);
    if (d < best_d) {
      best = k;
      best_d = d;
    }
  }
  if (!best.empty()) return best;
  for (const auto& k : known)
    if (word.size() >= 2 && starts_with(k, word)) return k;
  return {};
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& known) {
  auto c = closest(word, known);
  return c.empty() ? std::string() : " (did you mean '" + c + "'?)";
}

std::optional<std::string> unknown_verb(const std::vector<std::string>& args,
                                        const std::vector<std::string>& verbs,
                                        const std::vector<std::string>& global_with_value) {
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--") return std::nullopt;
    if (starts_with(a, "-")) {
      bool takes_value = a.find('=') == std::string::npos &&
                         std::find(global_with_value.begin(), global_with_value.end(), a) !=
                             global_with_value.end();
      if (takes_value) ++i;
      continue;
    }
    if (std::find(verbs.begin(), verbs.end(), a) != verbs.end()) return std::nullopt;
    std::string msg = "unknown command '" + a + "'" + did_you_mean(a, verbs);
    std::string list;
    for (const auto& v : verbs) list += (list.empty() ? "" : ", ") + v;
    return msg + "; the commands are " + list;
  }
  return std::nullopt;
}

std::optional<int64_t> parse_duration_s(std::string_view text) {
  if (text.empty()) return std::nullopt;
  constexpr int64_t kMax = 100LL * 365 * 24 * 3600;
  int64_t total = 0;
  size_t i = 0;
  bool any = false;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
    int64_t n = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      n = n * 10 + (text[i] - '0');
      if (n > kMax) return std::nullopt;
      ++i;
    }
    int64_t unit = 1;
    if (i < text.size()) {
      unit = names::unit_seconds(text[i]);
      if (unit == 0) return std::nullopt;
      ++i;
    } else if (any) {
      return std::nullopt;  // "1h30": the unit of 30 is not said
    }
    total += n * unit;
    if (total > kMax) return std::nullopt;
    any = true;
  }
  return total;
}

std::optional<int64_t> parse_size_mb(std::string_view text) {
  size_t i = 0;
  int64_t n = 0;
  constexpr int64_t kMax = int64_t{1} << 40;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    n = n * 10 + (text[i] - '0');
    if (n > kMax * 1024) return std::nullopt;
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::string unit(text.substr(i));
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() == 3 && unit.substr(1) == "IB") unit = unit.substr(0, 1);
  if (unit.size() == 2 && (unit[1] == 'I' || unit[1] == 'B')) unit = unit.substr(0, 1);
  int64_t mb = 0;
  if (unit.empty() || unit == "M") {
    mb = n;
  } else if (unit == "K") {
    mb = (n + 1023) / 1024;
  } else if (unit == "G") {
    mb = n * 1024;
  } else if (unit == "T") {
    mb = n * 1024 * 1024;
  } else {
    return std::nullopt;
  }
  if (mb > kMax) return std::nullopt;
  return mb;
}

std::string usage_error(const VerbFlags& verb, const std::vector<std::string>& global_with_value,
                        const std::vector<std::string>& words, const std::string& what) {
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  std::vector<std::string> known = verb.with_value;
  known.insert(known.end(), verb.without_value.begin(), verb.without_value.end());
  known.insert(known.end(), {"--help", "--nats", "--creds", "--tls-ca"});
  std::string head = "troupe " + (verb.verb.empty() ? std::string() : verb.verb + ": ");
  if (verb.verb.empty()) head = "troupe: ";
  // Walk the words after the verb: flags (and their values), positionals.
  bool after_verb = verb.verb.empty();
  std::vector<std::string> positionals;
  size_t first_positional = words.size();
  bool command_flag = false;
  for (size_t i = 0; i < words.size(); ++i) {
    const auto& w = words[i];
    if (!after_verb) {
      if (w == verb.verb) after_verb = true;
      if (!w.empty() && w[0] == '-' && w.find('=') == std::string::npos &&
          has(global_with_value, w))
        ++i;
      continue;
    }
    if (w.size() > 1 && w[0] == '-') {
      std::string name = w.substr(0, w.find('='));
      bool unknown = name.size() > 2 && name[1] == '-' && !has(known, name);
      if (unknown && verb.verb == "submit" && !positionals.empty()) {
        command_flag = true;  // a flag of the job's command, after its program
        break;
      }
      if (unknown)
        return head + "unknown flag " + name + did_you_mean(name, known) + " (see troupe " +
               verb.verb + " --help)";
      if (w.find('=') == std::string::npos &&
          (has(verb.with_value, name) || has(global_with_value, name)))
        ++i;
      continue;
    }
    if (positionals.empty()) first_positional = i;
    positionals.push_back(w);
  }
  if (verb.verb == "submit" && (positionals.size() > 1 || command_flag)) {
    std::string command;
    for (size_t i = first_positional; i < words.size(); ++i) command += " " + words[i];
    return head + "'" + command.substr(1) +
           "' looks like a job command, not a spec file: put it after --: troupe submit "
           "[flags] --" +
           command;
  }
  return head + what + " (see troupe " + (verb.verb.empty() ? "" : verb.verb + " ") + "--help)";
}

std::string completion_script(const std::string& shell, const std::vector<VerbFlags>& verbs,
                              const std::vector<std::string>& global_flags,
                              const std::vector<std::string>& global_with_value) {
  if (shell != "bash" && shell != "zsh") return {};
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& w : v) s += (s.empty() ? "" : " ") + w;
    return s;
  };
  std::vector<std::string> names;
  for (const auto& v : verbs) names.push_back(v.verb);
  std::string s = "# troupe completion " + shell + ": source it (e.g. from ~/." + shell + "rc)\n";
  if (shell == "zsh") s += "autoload -U +X bashcompinit && bashcompinit\n";
  s += "_troupe() {\n";
  s += "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" verb=\"\" i\n";
  s += "  for ((i = 1; i < COMP_CWORD; i++)); do\n";
  std::string valued;
  for (const auto& g : global_with_value) valued += (valued.empty() ? "" : "|") + g;
  s += "    case \"${COMP_WORDS[i]}\" in";
  if (!valued.empty()) s += " " + valued + ") ((i++)) ;;";
  s += " -*) ;; *) verb=\"${COMP_WORDS[i]}\"; break ;; esac\n";
  s += "  done\n";
  s += "  local words\n";
  s += "  case \"$verb\" in\n";
  for (const auto& v : verbs) {
    std::vector<std::string> flags = v.with_value;
    flags.insert(flags.end(), v.without_value.begin(), v.without_value.end());
    if (std::find(flags.begin(), flags.end(), "--help") == flags.end()) flags.push_back("--help");
    s += "    " + v.verb + ") words=\"" + join(flags) + "\" ;;\n";
  }
  s += "    \"\") words=\"" + join(names) + " " + join(global_flags) + "\" ;;\n";
  s += "  esac\n";
  s += "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n";
  s += "}\n";
  s += "complete -F _troupe troupe\n";
  return s;
}

bool readable_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path);
  return in.good();
}

int job_exit_code(const pb::JobView& job, std::string* why) {
  if (!names::is_terminal(job.state())) return -1;
  if (job.state() == names::kSucceeded) return 0;
  if (why != nullptr) *why = job.reason();
  if (job.state() == names::kCanceled) return kCanceledExit;
  std::string cause = job.attempts_size() > 0 ? job.attempts(job.attempts_size() - 1).cause() : "";
  if (cause == "max_runtime") return kRuntimeLimitExit;
  if (job.has_exit_code() && job.exit_code() >= 1 && job.exit_code() <= 255) return job.exit_code();
  return kNoExitCodeExit;
}

std::optional<Output> parse_output(std::string_view text) {
  if (text == "table") return Output::table;
  if (text == "wide") return Output::wide;
  if (text == "json") return Output::json;
  if (text == "yaml") return Output::yaml;
  return std::nullopt;
}

namespace {
void emit(YAML::Emitter& out, const nlohmann::json& j) {
  if (j.is_object()) {
    out << YAML::BeginMap;
    for (auto it = j.begin(); it != j.end(); ++it) {
      out << YAML::Key << it.key() << YAML::Value;
      emit(out, it.value());
    }
    out << YAML::EndMap;
  } else if (j.is_array()) {
    out << YAML::BeginSeq;
    for (const auto& v : j) emit(out, v);
    out << YAML::EndSeq;
  } else if (j.is_string()) {
    out << YAML::DoubleQuoted << j.get<std::string>();
  } else if (j.is_null()) {
    out << YAML::Null;
  } else {
    out << j.dump();  // numbers and booleans as JSON writes them
  }
}
}  // namespace

std::string json_to_yaml(const std::string& json) {
  auto j = json_text::parse(json);
  if (j.is_discarded()) return {};
  YAML::Emitter out;
  emit(out, j);
  return std::string(out.c_str()) + "\n";
}

std::string check_state(std::string_view state) {
  for (auto s : names::kStates)
    if (s == state) return {};
  std::vector<std::string> known(names::kStates.begin(), names::kStates.end());
  std::string list;
  for (const auto& s : known) list += (list.empty() ? "" : ", ") + s;
  return "unknown state '" + std::string(state) + "'" + did_you_mean(state, known) +
         "; the states are " + list;
}

}  // namespace troupe::gateway
